package sim

import (
	"math"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/reduction/plan"
)

// A striped broadcast (Params.Stripes, directory.StripeTrees) keeps
// every stripe's tree O(log N) deep and every host's upload about S on
// both link profiles, with hosts killed or paused midway as without:
// at most ⌈log_k N⌉+3 deep (the creator's hop, the interior copies'
// tree of k a copy, a leaf below; twice that with faults, where a
// receiver whose sender died takes a copy with room, or the least
// loaded one), and at most 1.1·S and a chunk uploaded (and S more a
// kill: a killed host's receivers move to live copies). Every copy is
// exact and every tree acyclic (run fails the test otherwise). N = 256
// and 1,024 run with HOPLITE_SIM_1024 set: 256 alone took three minutes
// of the default suite under the race detector (directory's
// TestStripeTreesDepthAndUpload checks the core's trees to 1,024 in it).
func TestStripedBroadcastDepthAndUpload(t *testing.T) {
	const size = 8 << 20
	ns := []int{8, 64}
	if os.Getenv("HOPLITE_SIM_1024") != "" {
		ns = append(ns, 256, 1024)
	}
	for _, prof := range broadcastProfiles {
		for _, n := range ns {
			for _, k := range []int{2, 3} {
				for _, fault := range []string{"", "kill", "pause"} {
					seed := uint64(n + k)
					c := cfg("broadcast", n, size, seed)
					prof.set(&c.Params)
					c.Stripes = k
					switch fault {
					case "kill":
						c.Kill, c.KillAt = 3, 0.5
					case "pause":
						c.Pause, c.PauseAt, c.PauseFor = 3, 0.3, 50*time.Millisecond
					}
					o := run(t, c)
					chunk := int64(plan.ChunkForObject(c.Params.Bandwidth*c.Params.PayloadEfficiency/8, size))
					maxDepth := int(math.Ceil(math.Log(float64(n))/math.Log(float64(k)))) + 3
					maxUpload := size + size/10 + chunk
					if fault != "" {
						maxDepth *= 2
					}
					if fault == "kill" {
						maxUpload += int64(c.Kill) * size
					}
					if o.Depth < 1 || o.Depth > maxDepth {
						t.Errorf("%s N=%d k=%d %s: depth %d, want 1..%d", prof.name, n, k, fault, o.Depth, maxDepth)
					}
					if o.MaxUpload > maxUpload {
						t.Errorf("%s N=%d k=%d %s: a host uploaded %d bytes = %.2f·S, want at most %d",
							prof.name, n, k, fault, o.MaxUpload, float64(o.MaxUpload)/size, maxUpload)
					}
					t.Logf("%s N=%d k=%d %s: %v, depth %d, most uploaded %.3f·S", prof.name, n, k, fault, o.Time, o.Depth, float64(o.MaxUpload)/size)
				}
			}
		}
	}
}

// TestStripedBroadcastDeterministic: the same striped configuration,
// with kills, gives the same outcome (the core's choices are by name and
// depth, never by map order).
func TestStripedBroadcastDeterministic(t *testing.T) {
	c := cfg("broadcast", 64, 4<<20, 3)
	c.Stripes, c.Kill, c.KillAt, c.Pause, c.PauseAt, c.PauseFor = 3, 2, 0.5, 2, 0.3, 20*time.Millisecond
	a, b := run(t, c), run(t, c)
	if !reflect.DeepEqual(a, b) {
		t.Errorf("two runs differ:\n%+v\n%+v", a, b)
	}
}
