package sim

import (
	"strings"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/storenode"
)

// TestInlineBroadcastIsServedByTheShard: an object under InlineLimit
// lives in its directory shard, and every Get's Locate is answered with
// its bytes: no receiver reads from another (the tree has no depth),
// every copy holds the creator's bytes, and all of them leave through
// the shard host's uplink, so at 64 hosts the broadcast takes at least
// 62 copies' bytes over that one link (63 receivers, one of which may
// be the shard's host). An object of InlineLimit
// bytes streams from copy to copy as before.
func TestInlineBroadcastIsServedByTheShard(t *testing.T) {
	const n = 64
	for _, size := range []int64{1 << 10, 32 << 10, InlineLimit - 1} {
		c := cfg("broadcast", n, size, 3)
		o := run(t, c)
		if o.Depth != 0 {
			t.Errorf("S=%d: a receiver read from another copy (depth %d); want every Get answered by the shard", size, o.Depth)
		}
		p := DefaultParams(n)
		uplink := p.Bandwidth / 8 * p.PayloadEfficiency
		floor := time.Duration((float64((n-2)*size) - p.Burst) / uplink * float64(time.Second))
		if o.Time < floor {
			t.Errorf("S=%d: %v, less than the %v the shard's uplink needs for %d copies", size, o.Time, floor, n-2)
		}
		if o.HotShard < n-1 {
			t.Errorf("S=%d: the object's shard processed %d messages; want at least a Locate per receiver (%d)", size, o.HotShard, n-1)
		}
	}
	o := run(t, cfg("broadcast", n, InlineLimit, 3))
	if o.Depth == 0 {
		t.Errorf("S=%d (not inline): every receiver read from the creator; want copies relaying", InlineLimit)
	}
}

// TestInlineCopyHoldsTheCreatorsBytes: a copy an inline Get stored has
// the creator's checksum only if its bytes are the creator's.
func TestInlineCopyHoldsTheCreatorsBytes(t *testing.T) {
	for _, size := range []int64{1, 7, 8, 1000} {
		const sum = 0x0123456789abcdef
		store := storenode.NewStore(1 << 20)
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
