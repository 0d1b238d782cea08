package sim

import (
	"math"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/reduction/plan"
)

// A broadcast under a fan-out of 2 (directory.TableConfig.FanOut): the
// tree the real table builds from receivers that ask at once is at most
// ⌈log2 N⌉ deep, at most 2·⌈log2 N⌉ with hosts killed or paused midway,
// no host uploads more than twice the object (and a chunk a resumed
// stream sends again), and every copy is exact (run fails the test on
// any violation: a checksum, a cycle, a Get that never ended).
func TestFanOutBroadcastDepthAndUpload(t *testing.T) {
	const k, size = 2, 8 << 20
	for _, n := range []int{16, 64, 256} {
		for _, fault := range []string{"", "kill", "pause"} {
			for seed := uint64(1); seed <= 3; seed++ {
				c := cfg("broadcast", n, size, seed)
				c.FanOut = k
				switch fault {
				case "kill":
					c.Kill, c.KillAt = 3, 0.5
				case "pause":
					c.Pause, c.PauseAt, c.PauseFor = 3, 0.3, 50*time.Millisecond
				}
				o := run(t, c)
				logN := int(math.Ceil(math.Log2(float64(n))))
				maxDepth := logN
				if fault != "" {
					maxDepth = 2 * logN
				}
				if o.Depth > maxDepth || o.Depth < 1 {
					t.Errorf("N=%d %s seed %d: depth %d, want 1..%d", n, fault, seed, o.Depth, maxDepth)
				}
				chunk := int64(plan.ChunkForObject(DefaultParams(n).Bandwidth*DefaultParams(n).PayloadEfficiency/8, size))
				if o.MaxUpload > k*size+chunk*int64(c.Kill+1) {
					t.Errorf("N=%d %s seed %d: a host uploaded %d bytes, want at most %d·S and a chunk per kill (S=%d)",
						n, fault, seed, o.MaxUpload, k, size)
				}
			}
		}
	}
}

// Without a fan-out, receivers that ask at once form a chain: each copy
// streams to one receiver, and the tree is N-1 deep.
func TestBroadcastWithoutFanOutIsAChain(t *testing.T) {
	o := run(t, cfg("broadcast", 64, 8<<20, 1))
	if o.Depth != 63 {
		t.Errorf("depth %d, want the chain's 63", o.Depth)
	}
	if o.MaxUpload > 8<<20+256<<10 {
		t.Errorf("a host uploaded %d bytes, want about S", o.MaxUpload)
	}
}

// The testbed's links bound a transfer (a chain: fan-out 1); on 10 Gbit/s
// links a receiver's CPU per byte takes in less than half an uplink gives.
func TestLinkFanOut(t *testing.T) {
	p := DefaultParams(8)
	if k := p.LinkFanOut(); k != 1 {
		t.Errorf("testbed: fan-out %d, want 1", k)
	}
	p.Bandwidth = 10e9
	if k := p.LinkFanOut(); k != 2 {
		t.Errorf("10 Gbit/s: fan-out %d, want 2", k)
	}
}
