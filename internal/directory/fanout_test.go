package directory

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
	"time"
)

// fanOutTree has n receivers locate x at once (none completes), with
// the table's fan-out k, and returns each one's sender.
func fanOutTree(t *testing.T, tb *LocationTable, n int, now time.Time) map[string]string {
	t.Helper()
	createdOn(t, tb, "c")
	parent := map[string]string{}
	for i := range n {
		r := fmt.Sprintf("r%04d", i)
		s := locateFor(t, tb, r, "", now)
		if s == "" {
			t.Fatalf("%s got no sender: every copy is a sender under a fan-out", r)
		}
		parent[r] = s
	}
	return parent
}

func treeDepth(t *testing.T, parent map[string]string, r string) int {
	t.Helper()
	d := 0
	for ; r != "c"; d++ {
		if d > len(parent) {
			t.Fatalf("the tree has a cycle through %s", r)
		}
		r = parent[r]
	}
	return d
}

// kAryHeight is the height of the complete k-ary tree under a root that
// holds n nodes besides the root.
func kAryHeight(n, k int) int {
	h, level, total := 0, 1, 0
	for total < n {
		level *= k
		total += level
		h++
	}
	return h
}

// Receivers that ask at once form a chain under a fan-out of 1 and, under
// a fan-out of k, the complete k-ary tree: every copy streams to at most
// k, and the tree is as shallow as that allows.
func TestFanOutBroadcastTreeIsComplete(t *testing.T) {
	now := time.Unix(1000, 0)
	for _, k := range []int{1, 2, 3, 4} {
		for _, n := range []int{1, 7, 100, 1023} {
			if k == 1 && n > 100 {
				continue // a chain's every Locate walks it: quadratic
			}
			cfg := DefaultTableConfig()
			cfg.FanOut = k
			parent := fanOutTree(t, NewLocationTable(cfg), n, now)
			serving := map[string]int{}
			depth := 0
			for r, s := range parent {
				serving[s]++
				depth = max(depth, treeDepth(t, parent, r))
			}
			for s, c := range serving {
				if c > k {
					t.Errorf("k=%d n=%d: %s streams to %d receivers", k, n, s, c)
				}
			}
			want := n // a chain
			if k > 1 {
				want = kAryHeight(n, k)
			}
			if depth != want {
				t.Errorf("k=%d n=%d: depth %d, want %d", k, n, depth, want)
			}
		}
	}
}

// A receiver whose sender failed in a fan-out tree is never handed a copy
// below it (it would feed itself), and each copy still streams to at
// most k.
func TestFanOutFailoverNeverFormsCycle(t *testing.T) {
	now := time.Unix(1000, 0)
	rng := rand.New(rand.NewPCG(7, 7))
	const n, k = 200, 2
	cfg := DefaultTableConfig()
	cfg.FanOut = k
	tb := NewLocationTable(cfg)
	parent := fanOutTree(t, tb, n, now)
	below := func(a, r string) bool { // a is in r's subtree
		for i := 0; a != "c" && i <= len(parent); i++ {
			if a == r {
				return true
			}
			a = parent[a]
		}
		return false
	}
	for range 300 {
		r := fmt.Sprintf("r%04d", rng.IntN(n))
		s := locateFor(t, tb, r, parent[r], now)
		if s == "" {
			continue // parked: no copy with room outside its subtree
		}
		if below(s, r) {
			t.Fatalf("%s, whose sender %s failed, was handed %s of its own subtree", r, parent[r], s)
		}
		parent[r] = s
		serving := map[string]int{}
		for _, loc := range tb.entries["x"].locs {
			if loc.fetchingFrom != "" {
				serving[loc.fetchingFrom]++
			}
		}
		for s, c := range serving {
			if c > k {
				t.Fatalf("%s streams to %d receivers", s, c)
			}
		}
	}
}

func TestFanOutFor(t *testing.T) {
	for _, c := range []struct {
		up, in float64
		want   int
	}{
		{50e6, 476e6, 1},    // 400 Mbit/s links, 2.1 ns of CPU a byte
		{1.196e9, 476e6, 2}, // 10 Gbit/s links
		{1e9, 1e9, 1},
		{0, 1, 1}, {1, 0, 1}, {math.Inf(1), 1, 1}, {math.NaN(), 1, 1},
		{1e18, 1, 1 << 10},
	} {
		if got := FanOutFor(c.up, c.in); got != c.want {
			t.Errorf("FanOutFor(%g, %g) = %d, want %d", c.up, c.in, got, c.want)
		}
	}
}

// Under FanOutAuto the table builds what the cost model chooses for the
// receivers expected: on the testbed's links a broadcast to 8 stays the
// chain (each byte uploaded once); to 1,024 without a shaper's burst it
// becomes the complete binary tree; on 10 Gbit/s links, where a
// receiver's CPU takes bytes in slower than an uplink gives them, a
// broadcast to 8 is a tree already.
func TestFanOutAutoFollowsTheCostModel(t *testing.T) {
	now := time.Unix(1000, 0)
	testbed := DefaultTableConfig()
	testbed.FanOut, testbed.InlineUplink, testbed.Intake = FanOutAuto, 400e6/8*1448/1514, 1/2.1e-9
	fast := testbed
	fast.InlineUplink, fast.Latency = 10e9/8*1448/1514, 20*time.Microsecond
	for _, c := range []struct {
		name       string
		cfg        TableConfig
		receivers  int
		wantK      int
		wantHeight int
	}{
		{"testbed, 8", testbed, 7, 1, 7},
		{"testbed, 1024", testbed, 1023, 2, kAryHeight(1023, 2)},
		{"10 Gbit/s, 8", fast, 7, 2, kAryHeight(7, 2)},
	} {
		c.cfg.Receivers = c.receivers
		parent := fanOutTree(t, NewLocationTable(c.cfg), c.receivers, now)
		serving := map[string]int{}
		depth := 0
		for r, s := range parent {
			serving[s]++
			depth = max(depth, treeDepth(t, parent, r))
		}
		most := 0
		for _, n := range serving {
			most = max(most, n)
		}
		if most != c.wantK || depth != c.wantHeight {
			t.Errorf("%s: copies stream to up to %d, depth %d; want %d and %d", c.name, most, depth, c.wantK, c.wantHeight)
		}
	}
}

// Without an expected count the receivers an object has count: a table
// told nothing of the cluster keeps a broadcast to a few a chain.
func TestFanOutAutoCountsReceiversSeen(t *testing.T) {
	now := time.Unix(1000, 0)
	cfg := DefaultTableConfig()
	cfg.FanOut, cfg.InlineUplink, cfg.Intake = FanOutAuto, 400e6/8*1448/1514, 1/2.1e-9
	parent := fanOutTree(t, NewLocationTable(cfg), 7, now)
	for r := range parent {
		if d := treeDepth(t, parent, r); d == 7 {
			return
		}
	}
	t.Errorf("no receiver at depth 7: %v, want the chain", parent)
}
