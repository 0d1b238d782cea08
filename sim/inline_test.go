package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/objstore"
)

// TestInlineBroadcastToAFewIsServedByTheShard: an object under
// InlineLimit lives in its directory shard, and a Get's Locate is
// answered with its bytes. Up to directory.InlineQueueCopies receivers
// at once, and for objects of a KiB at any fan-out here (the shard's
// uplink sends each before the next Locate is processed), every Get is
// answered so: no receiver reads from another (the tree has no depth),
// and every copy holds the creator's bytes. An object of a KiB, cheap
// on the shard's uplink (directory.CheapOnTheUplink), is published, and
// its member answers every Locate without the table; larger ones are
// the table's to answer.
func TestInlineBroadcastToAFewIsServedByTheShard(t *testing.T) {
	for _, c := range []struct {
		n    int
		size int64
	}{{8, 1 << 10}, {8, 32 << 10}, {8, InlineLimit - 1}, {directory.InlineQueueCopies + 1, InlineLimit - 1}, {64, 1 << 10}} {
		o := run(t, cfg("broadcast", c.n, c.size, 3))
		if o.Depth != 0 {
			t.Errorf("N=%d S=%d: a receiver read from another copy (depth %d); want every Get answered by the shard", c.n, c.size, o.Depth)
		}
		if o.HotShard < int64(c.n-1) {
			t.Errorf("N=%d S=%d: the object's shard processed %d messages; want at least a Locate per receiver (%d)", c.n, c.size, o.HotShard, c.n-1)
		}
		cheap := directory.CheapOnTheUplink(c.size, DefaultParams(c.n).Bandwidth/8*TestbedPayloadEfficiency)
		if cheap && o.QuickLocates != int64(c.n-1) {
			t.Errorf("N=%d S=%d: %d Locates answered without the table; want every receiver's (%d)", c.n, c.size, o.QuickLocates, c.n-1)
		}
		if !cheap && o.QuickLocates != 0 {
			t.Errorf("N=%d S=%d: %d Locates answered without the table; want none (not cheap on the uplink)", c.n, c.size, o.QuickLocates)
		}
	}
}

// TestQuickLocatesShortenASmallBroadcast: a 1 KiB broadcast's Locates
// answered from the shard's published objects cost its member
// QuickLocateShare of a table's message: to 64 and 1,024 hosts the
// broadcast takes less than with every Locate answered by the table
// (Params.ActorLocates), whose queue of Locates bounded it, and every
// copy holds the creator's bytes (run's invariants) either way.
func TestQuickLocatesShortenASmallBroadcast(t *testing.T) {
	for _, n := range []int{64, 1024} {
		quick := run(t, cfg("broadcast", n, 1<<10, 1))
		c := cfg("broadcast", n, 1<<10, 1)
		c.Params.ActorLocates = true
		table := run(t, c)
		if table.QuickLocates != 0 || quick.QuickLocates == 0 {
			t.Fatalf("N=%d: %d and %d Locates answered without the table; want some, and none with ActorLocates", n, quick.QuickLocates, table.QuickLocates)
		}
		if quick.Time >= table.Time {
			t.Errorf("N=%d: %v with quick Locates, %v without: want shorter", n, quick.Time, table.Time)
		}
	}
}

// TestInlineBroadcastRelaysPastTheShardsUplink: to 63 receivers, an
// inline object of 32 KiB or 63 KiB would take 62 copies' bytes over the
// one uplink of its shard's host if the shard answered every Locate with
// them. It answers with them only while its uplink's queue holds few
// (directory.AnswerWithBytes), and the other receivers read from copies
// that hold the object: the broadcast takes less than half of that
// uplink's time, every copy exact. An object of InlineLimit bytes
// streams from copy to copy like any larger object.
func TestInlineBroadcastRelaysPastTheShardsUplink(t *testing.T) {
	const n = 64
	for _, size := range []int64{32 << 10, InlineLimit - 1} {
		o := run(t, cfg("broadcast", n, size, 3))
		if o.Depth == 0 {
			t.Errorf("S=%d: every Get answered by the shard; want receivers reading from copies", size)
		}
		p := DefaultParams(n)
		uplink := p.Bandwidth / 8 * p.PayloadEfficiency
		shardAlone := time.Duration((float64((n-2)*size) - p.Burst) / uplink * float64(time.Second))
		if o.Time > shardAlone/2 {
			t.Errorf("S=%d: %v, more than half the %v the shard's uplink needs for %d copies", size, o.Time, shardAlone, n-2)
		}
	}
	o := run(t, cfg("broadcast", n, InlineLimit, 3))
	if o.Depth == 0 {
		t.Errorf("S=%d (not inline): every receiver read from the creator; want copies relaying", InlineLimit)
	}
}

// TestInlineBroadcastUnderFailures: receivers that read an inline object
// from copies lose them when their holders die, and get it from the
// shard (or another copy): every live Get ends with the creator's bytes
// (run's invariants), whichever hosts die and when, the shard's among
// them; so do those of a 1 KiB object whose Locates the shard's member
// answers without its table, whose index goes with a table that moves.
func TestInlineBroadcastUnderFailures(t *testing.T) {
	for _, size := range []int64{InlineLimit - 1, 1 << 10} { // 1 KiB: answered without the table
		for seed := uint64(1); seed <= 4; seed++ {
			for _, at := range []float64{0.1, 0.5, 0.9} {
				c := cfg("broadcast", 32, size, seed)
				c.Kill, c.KillAt = 1+int(seed%3), at
				o := run(t, c)
				if o.FailureFree <= 0 {
					t.Errorf("S=%d seed %d: no failure-free time to place the kill", size, seed)
				}
			}
		}
	}
}

// TestInlineCopyHoldsTheCreatorsBytes: a copy an inline Get stored has
// the creator's checksum only if its bytes are the creator's.
func TestInlineCopyHoldsTheCreatorsBytes(t *testing.T) {
	for _, size := range []int64{1, 7, 8, 1000} {
		const sum = 0x0123456789abcdef
		store := objstore.NewStore(1 << 20)
		good, _, err := store.Create("good", size, sum)
		if err != nil {
			t.Fatal(err)
		}
		if err := good.Append(inlineBytes(sum, size)); err != nil {
			t.Fatal(err)
		}
		if got, ok := inlineSum(good); !ok || got != sum {
			t.Errorf("S=%d: the creator's bytes give checksum %x (%v), want %x", size, got, ok, uint64(sum))
		}
		bad, _, err := store.Create("bad", size, sum)
		if err != nil {
			t.Fatal(err)
		}
		b := inlineBytes(sum, size)
		b[len(b)-1] ^= 1
		if err := bad.Append(b); err != nil {
			t.Fatal(err)
		}
		if got, ok := inlineSum(bad); !ok || got == sum {
			t.Errorf("S=%d: a flipped byte still gives the creator's checksum %x (%v)", size, got, ok)
		}
	}
}

// TestInlineReduceIsRefused: a Reduce of sources under InlineLimit is
// reduced by the coordinator from their bytes, which the simulator does
// not drive: Run says so instead of reporting a broken invariant.
func TestInlineReduceIsRefused(t *testing.T) {
	for _, sc := range []string{"reduce", "allreduce", "async"} {
		if _, err := Run(cfg(sc, 8, 1<<10, 1)); err == nil {
			t.Errorf("%s of 1 KiB: ran; want it refused as not simulated", sc)
		}
	}
}

// TestNoShardsIsRefused: every object id hashes to a directory shard, so
// Run refuses a configuration without one instead of dividing by zero.
func TestNoShardsIsRefused(t *testing.T) {
	c := cfg("broadcast", 4, 1<<20, 1)
	c.Shards = 0
	if _, err := Run(c); err == nil || !strings.Contains(err.Error(), "directory shards") {
		t.Fatalf("a broadcast with 0 shards: %v; want it refused, naming the shards", err)
	}
}
