package sim

import (
	"math"
	"os"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/reduction/plan"
)

// broadcastProfiles are the link profiles the broadcast tree is checked
// on: the testbed's, and the same cores on 10 Gbit/s links of 20 µs.
var broadcastProfiles = []struct {
	name string
	set  func(*Params)
}{
	{"testbed", func(*Params) {}},
	{"10gbit", func(p *Params) {
		p.Bandwidth, p.Burst, p.Latency = 10e9, TestbedBurst(10e9), 20*time.Microsecond
	}},
}

// A broadcast under the shards' default fan-out (directory.FanOutAuto)
// forms the tree the cost model chooses for it, with hosts killed or
// paused midway as without: where it chooses a chain, each host uploads
// the object about once (at most 1.1·S, and a chunk a resumed stream
// sends again per kill; at 1,024 the rest of the object a kill, below);
// where it chooses a fan-out k > 1, the tree is
// at most ⌈log2 N⌉ deep (2·⌈log2 N⌉ with faults: a receiver whose sender
// failed takes the shallowest copy with room, which may hang below its
// old subtree's leaves) and a host uploads at most k·S and those chunks,
// and with kills the rest of an object for each (a copy whose receivers
// are whole has room again, and takes on a killed copy's receivers).
// Every copy is exact (run fails the test on a checksum, a cycle or a
// Get that never ended). N = 1,024 runs with HOPLITE_SIM_1024 set.
func TestBroadcastTreeUnderTheCostModel(t *testing.T) {
	const size = 8 << 20
	ns := []int{16, 64, 256}
	if os.Getenv("HOPLITE_SIM_1024") != "" {
		ns = append(ns, 1024)
	}
	trees := 0
	for _, prof := range broadcastProfiles {
		for _, n := range ns {
			for _, fault := range []string{"", "kill", "pause"} {
				for seed := uint64(1); seed <= 2; seed++ {
					c := cfg("broadcast", n, size, seed)
					prof.set(&c.Params)
					switch fault {
					case "kill":
						c.Kill, c.KillAt = 3, 0.5
					case "pause":
						c.Pause, c.PauseAt, c.PauseFor = 3, 0.3, 50*time.Millisecond
					}
					k := c.Params.BroadcastFanOut(size)
					o := run(t, c)
					chunk := int64(plan.ChunkForObject(c.Params.Bandwidth*c.Params.PayloadEfficiency/8, size))
					resent := chunk * int64(c.Kill+1)
					logN := int(math.Ceil(math.Log2(float64(n))))
					maxDepth, maxUpload := n-1, size+size/10+resent
					if k > 1 {
						trees++
						maxDepth, maxUpload = logN, int64(k)*size+resent
						if fault != "" {
							maxDepth = 2 * logN
						}
					}
					if fault == "kill" && (k > 1 || n > 256) {
						// A copy whose own receivers are whole has room
						// again, and takes receivers a killed copy fed: in
						// a tree, and in a chain of a thousand whose head
						// is whole when the kills come (its fill is a
						// 64 KiB chunk a hop: an 8 MiB chain to 1,024
						// fills for longer than the object takes).
						maxUpload += int64(c.Kill) * size
					}
					if o.Depth < 1 || o.Depth > maxDepth {
						t.Errorf("%s N=%d %s seed %d (fan-out %d): depth %d, want 1..%d", prof.name, n, fault, seed, k, o.Depth, maxDepth)
					}
					if o.MaxUpload > maxUpload {
						t.Errorf("%s N=%d %s seed %d (fan-out %d): a host uploaded %d bytes, want at most %d (S=%d)",
							prof.name, n, fault, seed, k, o.MaxUpload, maxUpload, size)
					}
				}
			}
		}
	}
	if trees == 0 {
		t.Error("the cost model chose a chain everywhere: no tree was checked")
	}
}

// The cost model keeps broadcasts on the testbed's links a chain at
// every N (each byte uploaded once): the shard hands a deep chain small
// chunks, whose every hop the shaper's burst passes at once, so its fill
// stays below what a tree loses by sharing uplinks. On 10 Gbit/s links,
// where a receiver's CPU per byte is slower than an uplink, a broadcast
// to 64 is a tree; to 8 a chain still, whose 6 hops below the first, in
// 256 KiB chunks, cost their receivers' CPU less than a tree's 2 in 1
// MiB chunks (75.0 against 76.0 ms in the simulator).
func TestBroadcastFanOutChoice(t *testing.T) {
	const size = 32 << 20
	for _, c := range []struct {
		profile int
		n, want int
	}{
		{0, 8, 1}, {0, 16, 1}, {0, 64, 1}, {0, 256, 1}, {0, 1024, 1},
		{1, 8, 1}, {1, 64, 2}, {1, 1024, 2},
	} {
		p := DefaultParams(c.n)
		broadcastProfiles[c.profile].set(&p)
		if got := p.BroadcastFanOut(size); got != c.want {
			t.Errorf("%s N=%d: fan-out %d, want %d", broadcastProfiles[c.profile].name, c.n, got, c.want)
		}
	}
}

// The shard hands every receiver the chunk for the depth of the tree it
// expects (LocateReply.chunk, plan.BroadcastChunk), and the streams move
// in it, with hosts killed or paused midway as without: on the
// testbed's links a chain of 63 or 255 hops moves in chunks smaller than
// one link's (so that its fill stays a sixteenth of the object's time),
// a broadcast to 8 keeps the link's; the tree stays as deep and each
// host uploads as much as TestBroadcastTreeUnderTheCostModel allows, and
// every copy is exact. A world with a fixed chunk (--chunk, a cluster's
// ChunkSize) keeps it.
func TestBroadcastMovesInTheShardsChunk(t *testing.T) {
	const size = 32 << 20
	shrunk := 0
	for _, prof := range broadcastProfiles {
		for _, n := range []int{8, 64, 256} {
			for _, fault := range []string{"", "kill", "pause"} {
				c := cfg("broadcast", n, size, 3)
				prof.set(&c.Params)
				switch fault {
				case "kill":
					c.Kill, c.KillAt = 3, 0.5
				case "pause":
					c.Pause, c.PauseAt, c.PauseFor = 3, 0.3, 50*time.Millisecond
				}
				B := c.Params.Bandwidth * c.Params.PayloadEfficiency / 8
				k := c.Params.BroadcastFanOut(size)
				want := int64(plan.BroadcastChunk(n-1, k, B, size))
				o := run(t, c)
				if o.Chunk != want {
					t.Errorf("%s N=%d %s: streams moved chunks of up to %d bytes, want the shard's %d", prof.name, n, fault, o.Chunk, want)
				}
				if want < int64(plan.ChunkForObject(B, size)) {
					shrunk++
				}
				logN := int(math.Ceil(math.Log2(float64(n))))
				resent := want * int64(c.Kill+1)
				maxDepth, maxUpload := n-1, size+size/10+resent
				if k > 1 {
					maxDepth, maxUpload = 2*logN, int64(k)*size+resent+int64(c.Kill)*size
				}
				if o.Depth < 1 || o.Depth > maxDepth {
					t.Errorf("%s N=%d %s (fan-out %d): depth %d, want 1..%d", prof.name, n, fault, k, o.Depth, maxDepth)
				}
				if o.MaxUpload > maxUpload {
					t.Errorf("%s N=%d %s (fan-out %d): a host uploaded %d bytes, want at most %d", prof.name, n, fault, k, o.MaxUpload, maxUpload)
				}
			}
		}
	}
	if shrunk == 0 {
		t.Error("no broadcast moved in a chunk smaller than its link's: the depth changed nothing")
	}
	c := cfg("broadcast", 64, size, 3)
	c.Chunk = 256 << 10
	if o := run(t, c); o.Chunk != c.Chunk {
		t.Errorf("--chunk 256KiB: streams moved chunks of up to %d bytes, want the fixed %d", o.Chunk, c.Chunk)
	}
}
