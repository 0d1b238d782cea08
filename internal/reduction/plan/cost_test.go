package plan

import (
	"math"
	"testing"
	"time"
)

const maxDuration = time.Duration(math.MaxInt64)

func TestCostHandComputed(t *testing.T) {
	const ms = time.Millisecond
	// B = 1e9 B/s and S = 1e6 B make one transfer S/B = 1ms.
	cases := []struct {
		n, d int
		L    time.Duration
		B    float64
		S    int64
		want time.Duration
	}{
		{8, 1, ms, 1e9, 1e6, 9 * ms},                   // 8·1 + 1
		{8, 2, ms, 1e9, 1e6, 5 * ms},                   // 1·log2 8 + 2·1
		{8, 8, ms, 1e9, 1e6, 9 * ms},                   // flat gather: 1 + 8·1
		{9, 3, ms, 1e9, 1e6, 5 * ms},                   // 1·2 + 3·1
		{64, 4, 2 * ms, 1e9, 5e5, 8 * ms},              // 2·3 + 4·0.5
		{1, 1, ms, 1e9, 1e6, 2 * ms},                   // 1·1 + 1
		{1, 2, ms, 1e9, 1e6, 2 * ms},                   // log_2 1 = 0, 2·1
		{4, 2, ms, 1e9, 0, 2 * ms},                     // no transfer
		{4, 2, 0, 1e9, 1e6, 2 * ms},                    // no latency
		{10, 2, ms, 1e9, 0, 3321928 * time.Nanosecond}, // log2 10 = 3.3219280949
		{4, 2, ms, 0, 0, 2 * ms},                       // S=0 needs no bandwidth
		{4, 2, ms, math.Inf(1), 1 << 40, 2 * ms},
		{4, 2, -ms, 1e9, -5, 0},           // negative inputs count as zero
		{0, 0, ms, 1e9, 1e6, 1*ms + 1*ms}, // n, d < 1 count as 1
	}
	for _, c := range cases {
		if got := Cost(c.n, c.d, c.L, c.B, c.S); got != c.want {
			t.Errorf("Cost(n=%d, d=%d, L=%v, B=%g, S=%d) = %v, want %v", c.n, c.d, c.L, c.B, c.S, got, c.want)
		}
	}
}

func TestCostSaturates(t *testing.T) {
	cases := []struct {
		B float64
		S int64
	}{
		{0, 1},
		{-3, 1},
		{math.NaN(), 1},
		{1, math.MaxInt64},
		{1e-300, 1 << 62},
	}
	for _, c := range cases {
		for _, d := range []int{1, 2, 16} {
			if got := Cost(16, d, time.Millisecond, c.B, c.S); got != maxDuration {
				t.Errorf("Cost(16, %d, B=%g, S=%d) = %v, want saturation", d, c.B, c.S, got)
			}
		}
	}
	if got := Cost(math.MaxInt, 1, maxDuration, 1e9, 1); got != maxDuration {
		t.Errorf("huge n·L = %v, want saturation", got)
	}
}

func TestChooseDegree(t *testing.T) {
	cases := []struct {
		name string
		n    int
		L    time.Duration
		B    float64
		S    int64
		maxD int
		want int
	}{
		// 1 GiB at 1 GB/s dwarfs 1µs hops: pay the transfer once.
		{"huge S small L", 16, time.Microsecond, 1e9, 1 << 30, 16, 1},
		// 8 bytes: latency dominates, the flat gather has one hop.
		{"tiny S", 16, time.Millisecond, 1e9, 8, 16, 16},
		{"zero S", 16, time.Millisecond, 1e9, 0, 16, 16},
		// S/B = L = 1ms, 64 KiB chunks (65.536 µs): T(2) = 6 + 3·2·0.066,
		// T(3) = 2.52+3 + 2·3·0.066, T(4) = 6 + 4·0.066 (ms).
		{"balanced", 16, time.Millisecond, 1e9, 1e6, 16, 3},
		// maxD caps the search: T(1) = 17 + 14·0.066 ms, T(2) = 6.39 ms.
		{"capped", 16, time.Millisecond, 1e9, 1e6, 2, 2},
		{"single object", 1, time.Millisecond, 1e9, 1e6, 8, 1},
		{"no bandwidth ties to chain", 16, time.Millisecond, 0, 1, 16, 1},
		{"bad inputs", 0, time.Millisecond, 1e9, 1e6, 0, 1},
	}
	for _, c := range cases {
		d, costs := ChooseDegree(c.n, c.L, c.B, c.S, c.maxD)
		if d != c.want {
			t.Errorf("%s: ChooseDegree = %d, want %d (costs %v)", c.name, d, c.want, costs)
		}
		top := min(max(c.n, 1), max(c.maxD, 1))
		if len(costs) != top {
			t.Errorf("%s: %d costs, want %d", c.name, len(costs), top)
		}
		for k := 1; k <= top; k++ {
			got, ok := costs[k]
			if !ok || got != Cost(max(c.n, 1), k, c.L, c.B, c.S)+Fill(max(c.n, 1), k, c.B, c.S) {
				t.Errorf("%s: costs[%d] = %v, %v", c.name, k, got, ok)
			}
			if got < costs[d] {
				t.Errorf("%s: d=%d costs %v < chosen %v", c.name, k, got, costs[d])
			}
		}
	}
}

func TestChainLength(t *testing.T) {
	cases := []struct {
		n    int
		L    time.Duration
		B    float64
		S    int64
		want int
	}{
		{100, time.Millisecond, 1e9, 1e7, 10}, // 1e7 / (1e9·1e-3)
		{100, time.Millisecond, 1e9, 14e6, 14},
		{100, time.Millisecond, 1e9, 1e3, 1}, // rounds to 0, clamped up
		{5, time.Millisecond, 1e9, 1e7, 5},   // clamped to n
		{100, time.Millisecond, 1e9, 0, 1},
		{100, 0, 1e9, 1e7, 100},
		{100, time.Millisecond, 0, 1e7, 100},
		{100, time.Millisecond, math.NaN(), 1e7, 100},
		{100, time.Millisecond, math.Inf(1), 1e7, 1},
		{100, time.Nanosecond, 1e-300, math.MaxInt64, 100},
		{0, time.Millisecond, 1e9, 1e7, 1},
	}
	for _, c := range cases {
		if got := ChainLength(c.n, c.L, c.B, c.S); got != c.want {
			t.Errorf("ChainLength(%d, %v, %g, %d) = %d, want %d", c.n, c.L, c.B, c.S, got, c.want)
		}
	}
}

func TestChunkFor(t *testing.T) {
	for _, c := range []struct {
		B    float64
		want int
	}{
		{50e6, 256 << 10},  // 400 Mbit/s: 250 KB in 5 ms
		{125e6, 512 << 10}, // 1 Gbit/s: 625 KB
		{1.25e9, 4 << 20},  // 10 Gbit/s: 6.25 MB, clamped
		{3.5e9, 4 << 20},   // loopback
		{1e6, 64 << 10},    // 8 Mbit/s: 5 KB, clamped up
		{0, 256 << 10},     // unknown: UnmeasuredChunk
		{-5, 256 << 10},
		{math.NaN(), 256 << 10},
		{math.Inf(1), 4 << 20},
	} {
		if got := ChunkFor(c.B); got != c.want {
			t.Errorf("ChunkFor(%g) = %d, want %d", c.B, got, c.want)
		}
	}
}

func TestChunkForObjectKeepsEnoughChunksToPipeline(t *testing.T) {
	B := 400e6 / 8 // 400 Mbit/s: ChunkFor gives 256 KiB
	for _, c := range []struct {
		S    int64
		want int
	}{
		{32 << 20, 256 << 10}, // 128 chunks: the bandwidth's chunk
		{4 << 20, 256 << 10},  // exactly 16
		{2 << 20, 128 << 10},
		{1 << 20, 64 << 10},
		{256 << 10, MinChunk}, // never below MinChunk
		{1, MinChunk},
		{0, 256 << 10},  // size unknown
		{-1, 256 << 10}, // likewise
	} {
		if got := ChunkForObject(B, c.S); got != c.want {
			t.Errorf("ChunkForObject(400 Mbit/s, %d) = %d, want %d", c.S, got, c.want)
		}
	}
	if got := ChunkForObject(math.Inf(1), 1<<30); got != MaxChunk {
		t.Errorf("unbounded bandwidth, 1 GiB: %d, want %d", got, MaxChunk)
	}
}

func TestFillHandComputed(t *testing.T) {
	// B = 1e9 B/s, S = 8 MiB: the link's chunk is 512 KiB (ChunkFor's 4
	// MiB halved to keep 16 a chunk), 524.288 µs each; ReduceChunk halves
	// it while the fill's chunks exceed S/16 = 512 KiB, down to 64 KiB.
	const c = 524288 * time.Nanosecond
	for _, tc := range []struct {
		n, d int
		want time.Duration
	}{
		{1, 1, 0}, {2, 1, 0}, {3, 1, c}, // one hop of 512 KiB: the link's chunk
		{4, 1, 2 * c / 2},      // two hops: 256 KiB chunks
		{16, 1, 14 * c / 8},    // 14 hops: 64 KiB (still 896 KiB, but MinChunk)
		{16, 2, 3 * 2 * c / 8}, // h = 4: 6 chunks of 64 KiB
		{17, 2, 4 * 2 * c / 8}, // h = 5: 8 of 64 KiB
		{16, 4, 1 * 4 * c / 4}, // h = 2: 4 of 128 KiB
		{16, 16, 0},            // the flat gather: one level
	} {
		if got := Fill(tc.n, tc.d, 1e9, 8<<20); got != tc.want {
			t.Errorf("Fill(%d, %d) = %v, want %v", tc.n, tc.d, got, tc.want)
		}
	}
	// A small object moves in one chunk of its own size.
	if got := Fill(4, 1, 1e9, 1000); got != 2*time.Microsecond {
		t.Errorf("Fill of a 1000-byte object on a chain of 4 = %v, want 2µs", got)
	}
	for _, B := range []float64{0, -1, math.NaN(), math.Inf(1)} {
		if got := Fill(16, 2, B, 8<<20); got != 0 {
			t.Errorf("Fill at B=%v = %v, want 0", B, got)
		}
	}
}

// TestChooseDegreeWithFill: with the pipeline's fill, in the chunk
// ReduceChunk gives the chain's depth, a long chain loses to the binary
// tree only once even its smallest chunks (PipelineFloor: 64 KiB under
// DeepPipelineHops, 16 KiB from there on these links) fill for longer
// than the tree's second S/B takes, while the testbed's sizes keep the
// chain.
func TestChooseDegreeWithFill(t *testing.T) {
	const B = 400e6 / 8 * 1448 / 1514 // the testbed's payload rate
	L := 44 * time.Microsecond
	for _, tc := range []struct {
		n    int
		S    int64
		want int
	}{
		{4, 32 << 20, 1}, {8, 32 << 20, 1}, {16, 32 << 20, 1}, {128, 32 << 20, 1},
		{256, 32 << 20, 1}, {512, 32 << 20, 1}, {1024, 32 << 20, 1}, {4096, 32 << 20, 2},
		{8, 1 << 20, 1}, {16, 1 << 20, 1}, {64, 1 << 20, 2},
	} {
		if d, costs := ChooseDegree(tc.n, L, B, tc.S, tc.n); d != tc.want {
			t.Errorf("n=%d S=%d: ChooseDegree = %d, want %d (T(1) %v, T(2) %v)", tc.n, tc.S, d, tc.want, costs[1], costs[2])
		}
		// Eq. 2.1 alone keeps the chain at every one of them.
		if tc.want != 1 && Cost(tc.n, 1, L, B, tc.S) >= Cost(tc.n, 2, L, B, tc.S) {
			t.Errorf("n=%d S=%d: eq. 2.1 alone already prefers d=2", tc.n, tc.S)
		}
	}
}

// TestReduceChunk: a shallow tree keeps the link's chunk; a deep one
// halves it until its fill is S/16 at most, never under PipelineFloor:
// MinChunk, or MinPipelineChunk for a chain of DeepPipelineHops or more
// on links where such a chunk still takes ChunkCPUTimes its CPU.
func TestReduceChunk(t *testing.T) {
	const B = 400e6 / 8 * 1448 / 1514 // the testbed's payload rate: 256 KiB for 32 MiB
	for _, tc := range []struct {
		n, d int
		S    int64
		want int
	}{
		{8, 1, 32 << 20, 256 << 10},           // 6 hops of 256 KiB: 1.5 of S/16's 2 MiB
		{16, 1, 32 << 20, 128 << 10},          // 14 hops: 3.5 MiB at 256 KiB
		{64, 1, 32 << 20, MinChunk},           // 62 hops: MinChunk, though 3.9 MiB
		{1024, 2, 32 << 20, MinChunk},         // h = 10: 18 hops
		{16, 4, 32 << 20, 256 << 10},          // h = 2: 4 hops
		{16, 16, 32 << 20, 256 << 10},         // the flat gather waits for no chunk
		{1024, 1, 1 << 20, MinPipelineChunk},  // 1,022 hops: under MinChunk
		{1024, 1, 32 << 20, MinPipelineChunk}, // the same
		{129, 1, 32 << 20, MinChunk},          // 127 hops: not deep enough
		{130, 1, 32 << 20, MinPipelineChunk},  // 128 hops of 16 KiB fill S/16, no more
		{1024, 1, 0, 256 << 10},               // size unknown: the link's
	} {
		if got := ReduceChunk(tc.n, tc.d, B, tc.S); got != tc.want {
			t.Errorf("ReduceChunk(%d, %d, S=%d) = %d, want %d", tc.n, tc.d, tc.S, got, tc.want)
		}
	}
	// On 10 Gbit/s a 64 KiB chunk takes less than ChunkCPUTimes its CPU:
	// even the deepest chain keeps MinChunk, as does an unknown link.
	for _, B := range []float64{10e9 / 8, 0, math.NaN()} {
		if got := ReduceChunk(1024, 1, B, 32<<20); got != MinChunk && !(B == 0 || math.IsNaN(B)) {
			t.Errorf("ReduceChunk(1024, 1) at B=%g = %d, want MinChunk", B, got)
		}
		if got := PipelineFloor(1022, B); got != MinChunk {
			t.Errorf("PipelineFloor(1022) at B=%g = %d, want MinChunk", B, got)
		}
	}
}

// TestFillShaped: behind a shaper whose burst passes a level's first
// chunks at once, a link-bound chain fills for nothing and a tree's
// level waits for what its d chunks have beyond the burst; a B well
// under the shaper's rate (a host's CPU per byte bounds it) gets no
// credit, nor does a zero Shaper.
func TestFillShaped(t *testing.T) {
	const B = 1e9
	const S = 8 << 20
	c64 := transferNanos(B, 64<<10) // the depth's chunk of every case below
	for _, tc := range []struct {
		name string
		n, d int
		sh   Shaper
		B    float64
		want time.Duration
	}{
		{"no shaper", 16, 1, Shaper{}, B, Fill(16, 1, B, S)},
		{"chain behind a burst larger than its chunk", 16, 1, Shaper{Rate: B, Burst: 100 << 10}, B, 0},
		{"chain behind a burst smaller than its chunk", 16, 1, Shaper{Rate: B, Burst: 16 << 10}, B, saturate(14 * transferNanos(B, 48<<10))},
		{"binary tree: 2 chunks a level, 100 KiB pass", 16, 2, Shaper{Rate: B, Burst: 100 << 10}, B, saturate(3 * transferNanos(B, 28<<10))},
		{"the CPU bounds B", 16, 1, Shaper{Rate: 2.5 * B, Burst: 100 << 10}, B, Fill(16, 1, B, S)},
		{"B a little under the rate", 16, 1, Shaper{Rate: 1.05 * B, Burst: 100 << 10}, B, 0},
	} {
		if got := FillShaped(tc.n, tc.d, tc.B, tc.sh, S); got != tc.want {
			t.Errorf("%s: FillShaped(%d, %d) = %v, want %v (a 64 KiB chunk: %v)", tc.name, tc.n, tc.d, got, tc.want, time.Duration(c64))
		}
	}
}

// TestChooseDegreeShapedKeepsTheChain: on the testbed's links, whose
// shaper passes 4 ms of its rate at once, a chain's chunks fill for
// nothing and the chain is kept at 4,096 sources, where unshaped links
// (a chunk's time a hop) make the binary tree cheaper; reduce-then-
// broadcast is priced with it.
func TestChooseDegreeShapedKeepsTheChain(t *testing.T) {
	const B = 400e6 / 8 * 1448 / 1514
	sh := Shaper{Rate: B, Burst: 400e6 / 8 * 0.004 * 1448 / 1514}
	L := 50 * time.Microsecond
	// Unshaped, a chain of 4,095 hops fills for longer than the tree's
	// second S/B even in 16 KiB chunks (at 1,024 it no longer does).
	if d, _ := ChooseDegree(4096, L, B, 32<<20, 4096); d != 2 {
		t.Fatalf("unshaped, 4,096 sources: d = %d, want 2", d)
	}
	if d, _ := ChooseDegreeShaped(4096, L, B, sh, 32<<20, 4096); d != 1 {
		t.Fatalf("shaped, 4,096 sources: d = %d, want the chain", d)
	}
	d, costs := ChooseDegreeShaped(1024, L, B, sh, 32<<20, 1024)
	if d != 1 || costs[1] != Cost(1024, 1, L, B, 32<<20) {
		t.Errorf("shaped: d = %d, chain %v; want the chain at eq. 2.1's %v", d, costs[1], Cost(1024, 1, L, B, 32<<20))
	}
	rb, rd := ReduceBroadcastCostShaped(1024, L, B, sh, 32<<20, 1024)
	if want := saturate((float64(costs[1]) + float64(Cost(1023, 1, L, B, 32<<20))) * ReduceBroadcastOverhead); rd != 1 || rb != want {
		t.Errorf("ReduceBroadcastCostShaped = %v (d=%d), want %v (d=1)", rb, rd, want)
	}
	if c := ChooseAllReduceShaped(1024, L, B, sh, 32<<20, 4, 1024, true); c.Sliced || c.ReduceBroadcastCost != rb || c.Degree != 1 {
		t.Errorf("ChooseAllReduceShaped(1024) = %+v, want reduce-then-broadcast at %v by a chain", c, rb)
	}
}

// TestPipelineFloor: under DeepPipelineHops the floor is MinChunk; from
// there, the least power of two down to MinPipelineChunk whose transfer
// still takes ChunkCPUTimes·ChunkCPU on the link.
func TestPipelineFloor(t *testing.T) {
	need := ChunkCPUTimes * ChunkCPU.Seconds()
	for _, tc := range []struct {
		hops int
		B    float64
		want int
	}{
		{DeepPipelineHops - 1, 50e6 / 8, MinChunk},
		{DeepPipelineHops, 50e6 / 8, MinPipelineChunk},
		{1022, 400e6 / 8, MinPipelineChunk},
		{1022, 10e9 / 8, MinChunk},
		{1022, 32 << 10 / need * 0.99, 32 << 10}, // 32 KiB takes a little more than it must, 16 KiB half
		{1022, 0, MinChunk},
		{1022, math.Inf(1), MinChunk},
	} {
		if got := PipelineFloor(tc.hops, tc.B); got != tc.want {
			t.Errorf("PipelineFloor(%d, %g) = %d, want %d", tc.hops, tc.B, got, tc.want)
		}
	}
}
