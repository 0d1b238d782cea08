package plan

import (
	"math"
	"testing"
	"time"
)

// The testbed's links: 400 Mbit/s of payload, 50 µs, a receiver's 2.1 ns
// of CPU a byte, tc's 128 KiB burst; and the same cores on 10 Gbit/s.
var (
	testbedLink = BroadcastLink{L: 50 * time.Microsecond, B: 400e6 / 8 * 1448 / 1514, Intake: 1 / 2.1e-9, Burst: 128 << 10 * 1448 / 1514}
	fastLink    = BroadcastLink{L: 20 * time.Microsecond, B: 10e9 / 8 * 1448 / 1514, Intake: 1 / 2.1e-9}
	// The simulator's 10 Gbit/s profile: a CPU that takes a byte in 0.64
	// ns, faster than the link, and the shaper's burst of 4 ms.
	unshapedLink = BroadcastLink{L: 20 * time.Microsecond, B: 10e9 / 8 * 1448 / 1514, Intake: 10e9 / 8 * 1448 / 1514,
		Burst: 10e9 / 8 * 0.004 * 1448 / 1514, CPU: 1 / 0.64e-9}
)

func TestBroadcastTimeByHand(t *testing.T) {
	// S = 16 MiB at 100 MB/s moves in 512 KiB chunks (ChunkFor: the
	// power of two nearest 5 ms): a chain of 3 pays S/B, the first hop's
	// latency and two more hops of a chunk and a latency each.
	link := BroadcastLink{L: time.Millisecond, B: 1e8}
	const S = 16 << 20
	want := secs(float64(S)/1e8 + 1e-3 + 2*(float64(512<<10)/1e8+1e-3))
	if got := BroadcastTime(3, 1, link, S); absDiff(got, want) > time.Microsecond {
		t.Errorf("chain of 3: %v, want %v", got, want)
	}
	// Two streams share the uplink: S at B/2, one level of 2 receivers.
	want = secs(2*float64(S)/1e8 + 1e-3)
	if got := BroadcastTime(2, 2, link, S); absDiff(got, want) > time.Microsecond {
		t.Errorf("fan-out 2 to 2: %v, want %v", got, want)
	}
	// A receiver that takes bytes in at half the uplink makes the second
	// stream free.
	link.Intake = 5e7
	if a, b := BroadcastTime(2, 1, link, S), BroadcastTime(2, 2, link, S); b >= a {
		t.Errorf("intake B/2: fan-out 2 %v, chain %v: want the tree faster", b, a)
	}
	// An idle link's burst passes a whole chunk: the hop costs its latency.
	link = BroadcastLink{L: time.Millisecond, B: 1e8, Burst: 1 << 20}
	want = secs(float64(S)/1e8 + 3e-3)
	if got := BroadcastTime(3, 1, link, S); absDiff(got, want) > time.Microsecond {
		t.Errorf("chain of 3 under a burst: %v, want %v", got, want)
	}
	// But not its receiver's CPU: at 2e8 bytes a second it takes a 512
	// KiB chunk in for 2.6 ms before it relays it.
	link.CPU = 2e8
	want = secs(float64(S)/1e8 + 1e-3 + 2*(float64(512<<10)/2e8+1e-3))
	if got := BroadcastTime(3, 1, link, S); absDiff(got, want) > time.Microsecond {
		t.Errorf("chain of 3 under a burst, CPU 2e8 B/s: %v, want %v", got, want)
	}
	// A CPU faster than the link's rate still costs the hop its time.
	link.CPU = 1e9
	want = secs(float64(S)/1e8 + 1e-3 + 2*(float64(512<<10)/1e9+1e-3))
	if got := BroadcastTime(3, 1, link, S); absDiff(got, want) > time.Microsecond {
		t.Errorf("chain of 3 under a burst, CPU 1e9 B/s: %v, want %v", got, want)
	}
}

func secs(s float64) time.Duration { return time.Duration(math.Round(s * 1e9)) }

func absDiff(a, b time.Duration) time.Duration {
	if a > b {
		return a - b
	}
	return b - a
}

// Where the links bound a transfer a broadcast stays a chain: its chunk
// shrinks with its depth (BroadcastChunk) until the shaper's burst
// passes a hop's first chunk at once, so its fill stays below the
// transfer a tree loses even at 1,023 receivers of 32 MiB on the
// testbed. Where a receiver's CPU takes bytes in slower than an uplink
// gives them, fan-out is free, and a deep tree's fill (log N levels of
// a larger chunk) beats a chain's (N levels of the smallest) from some
// tens of receivers on.
func TestChooseBroadcastFanOut(t *testing.T) {
	const S = 32 << 20
	for _, c := range []struct {
		name string
		link BroadcastLink
		n    int
		want int
	}{
		{"testbed", testbedLink, 1, 1},
		{"testbed", testbedLink, 7, 1},
		{"testbed", testbedLink, 15, 1},
		{"testbed", testbedLink, 63, 1},
		{"testbed", testbedLink, 255, 1},
		{"testbed", testbedLink, 1023, 1},
		{"10 Gbit/s", fastLink, 1, 1},
		{"10 Gbit/s", fastLink, 7, 1},
		{"10 Gbit/s", fastLink, 63, 2},
		{"10 Gbit/s", fastLink, 1023, 2},
		// Link-bound with a burst: a chain's hop costs its receiver's
		// CPU for a 64 KiB chunk and a latency, 62 µs, so a chain of
		// 1,023 fills for longer than a tree of 2 loses.
		{"10 Gbit/s, unshaped CPU", unshapedLink, 63, 1},
		{"10 Gbit/s, unshaped CPU", unshapedLink, 255, 1},
		{"10 Gbit/s, unshaped CPU", unshapedLink, 1023, 2},
		{"no bandwidth", BroadcastLink{L: time.Millisecond}, 1023, 1},
		{"NaN bandwidth", BroadcastLink{B: math.NaN()}, 1023, 1},
		{"infinite bandwidth", BroadcastLink{B: math.Inf(1)}, 1023, 1},
	} {
		if got := ChooseBroadcastFanOut(c.n, c.link, S); got != c.want {
			t.Errorf("%s, %d receivers: fan-out %d, want %d", c.name, c.n, got, c.want)
		}
	}
	// Its choice is the cheapest BroadcastTime prices.
	for _, n := range []int{2, 31, 511, 4095} {
		for _, link := range []BroadcastLink{testbedLink, fastLink, unshapedLink} {
			k := ChooseBroadcastFanOut(n, link, S)
			for j := 1; j <= min(n, MaxBroadcastFanOut); j++ {
				if BroadcastTime(n, j, link, S) < BroadcastTime(n, k, link, S) {
					t.Errorf("n=%d %+v: chose %d, but %d is cheaper", n, link, k, j)
				}
			}
		}
	}
}

// A broadcast's chunk is the link's for a shallow tree and shrinks with
// the depth, so that the fill of a deep one costs at most
// BroadcastFillShare of the object, down to PipelineFloor: MinChunk, or
// MinPipelineChunk for a tree of DeepPipelineHops levels or more on a
// link slow enough.
func TestBroadcastChunk(t *testing.T) {
	const S = 32 << 20
	B := testbedLink.B
	if got, want := BroadcastChunk(7, 1, B, S), ChunkForObject(B, S); got != want {
		t.Errorf("chain of 7: chunk %d, want the link's %d", got, want)
	}
	if got := BroadcastChunk(1023, 1, B, S); got != MinPipelineChunk {
		t.Errorf("chain of 1,023: chunk %d, want MinPipelineChunk", got)
	}
	if got := BroadcastChunk(1023, 1, fastLink.B, S); got != MinChunk {
		t.Errorf("chain of 1,023 on the fast link: chunk %d, want MinChunk", got)
	}
	for _, n := range []int{2, 15, 63, 255, 1023} {
		for k := 1; k <= 4; k++ {
			for _, link := range []BroadcastLink{testbedLink, fastLink} {
				c := BroadcastChunk(n, k, link.B, S)
				floor := PipelineFloor(broadcastDepth(n, k)-1, link.B)
				if c > ChunkForObject(link.B, S) || c < floor {
					t.Errorf("n=%d k=%d B=%g: chunk %d outside [%d, ChunkForObject]", n, k, link.B, c, floor)
				}
				if fill := float64(broadcastDepth(n, k)-1) * float64(c); c > floor && fill > S*BroadcastFillShare {
					t.Errorf("n=%d k=%d B=%g: chunk %d fills %g bytes, over %g", n, k, link.B, c, fill, S*BroadcastFillShare)
				}
				if c < ChunkForObject(link.B, S) && float64(broadcastDepth(n, k)-1)*float64(2*c) <= S*BroadcastFillShare {
					t.Errorf("n=%d k=%d B=%g: chunk %d halved once too often", n, k, link.B, c)
				}
			}
		}
	}
	if got := BroadcastChunk(1023, 1, B, 0); got != ChunkFor(B) {
		t.Errorf("unknown size: chunk %d, want ChunkFor(B) %d", got, ChunkFor(B))
	}
}

func TestBroadcastDepth(t *testing.T) {
	for _, c := range []struct{ n, k, want int }{
		{1, 1, 1}, {7, 1, 7}, {1, 2, 1}, {2, 2, 1}, {3, 2, 2}, {6, 2, 2}, {7, 2, 3}, {1022, 2, 9}, {1023, 2, 10}, {2046, 2, 10}, {12, 3, 2}, {13, 3, 3},
	} {
		if got := broadcastDepth(c.n, c.k); got != c.want {
			t.Errorf("broadcastDepth(%d, %d) = %d, want %d", c.n, c.k, got, c.want)
		}
	}
}

// A link whose receivers choose their own chunk is priced with it: a
// deep chain's fill grows with the chunk, not with the depth's.
func TestBroadcastTimeWithTheReceiversChunk(t *testing.T) {
	const S = 32 << 20
	link := BroadcastLink{L: 50 * time.Microsecond, B: testbedLink.B}
	own := link
	own.Chunk = int64(ChunkForObject(link.B, S))
	if a, b := BroadcastTime(255, 1, link, S), BroadcastTime(255, 1, own, S); b <= a {
		t.Errorf("chain of 255: %v with the depth's chunk, %v with the link's: want the link's slower", a, b)
	}
	if got, want := BroadcastTime(255, 1, own, S), secs(float64(S)/link.B+50e-6+254*(float64(own.Chunk)/link.B+50e-6)); absDiff(got, want) > time.Microsecond {
		t.Errorf("chain of 255 in the link's chunk: %v, want %v", got, want)
	}
}
