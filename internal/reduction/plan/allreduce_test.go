package plan

import (
	"fmt"
	"math"
	"testing"
	"time"
)

func TestSlices(t *testing.T) {
	cases := []struct {
		size     int64
		n, width int
		want     []Slice
	}{
		{16, 2, 4, []Slice{{0, 8}, {8, 8}}},
		{20, 3, 4, []Slice{{0, 8}, {8, 8}, {16, 4}}},              // 5 elements: 2, 2, 1
		{56, 4, 8, []Slice{{0, 16}, {16, 16}, {32, 16}, {48, 8}}}, // 7 elements: 2, 2, 2, 1
		{12, 3, 4, []Slice{{0, 4}, {4, 4}, {8, 4}}},
		{8, 3, 4, nil},  // 2 elements for 3 slices
		{10, 2, 4, nil}, // not whole elements
		{16, 0, 4, nil},
		{16, 2, 0, nil},
	}
	for _, c := range cases {
		got := Slices(c.size, c.n, c.width)
		if fmt.Sprint(got) != fmt.Sprint(c.want) {
			t.Errorf("Slices(%d, %d, %d) = %v, want %v", c.size, c.n, c.width, got, c.want)
		}
	}
	// Every cut covers the object exactly, in order, on element bounds.
	for _, n := range []int{1, 2, 3, 5, 7, 8, 16} {
		for _, width := range []int{4, 8} {
			for _, elems := range []int64{int64(n), 1000, 16385, 1 << 20} {
				size := elems * int64(width)
				s := Slices(size, n, width)
				var off int64
				for i, sl := range s {
					if sl.Off != off || sl.Len <= 0 || sl.Len%int64(width) != 0 || (i > 0 && sl.Len > s[0].Len) || s[0].Len-sl.Len > int64(width) {
						t.Fatalf("Slices(%d, %d, %d)[%d] = %v", size, n, width, i, sl)
					}
					off += sl.Len
				}
				if len(s) != n || off != size {
					t.Fatalf("Slices(%d, %d, %d) covers %d bytes in %d slices", size, n, width, off, len(s))
				}
			}
		}
	}
}

func TestAllReduceCostsHandComputed(t *testing.T) {
	const us = time.Microsecond
	// n = 4, S = 8 MiB, B = 1e9 B/s, L = 100 µs. Sliced: 2·3/4·S/B =
	// 12582.912 µs, times the contention 1 + 0.12·2 = 15602.81088 µs;
	// slices of 2 MiB move in 128 KiB chunks (16 a slice): fill
	// 3·131072 ns, latency 6·L, the participants' 4 shares of 300 bytes
	// (a ring) 1200 ns, and 2·4 messages of the coordinator's 82 µs on the
	// critical path.
	// Reduce+broadcast: the chain wins,
	// T(1) = 4·L + S/B + its fill, 2 chunks of 256 KiB (the link's 512 KiB
	// halved: 2 would be more than S/16), broadcast 3·L + S/B.
	s := SlicedCost(4, 100*us, 1e9, 8<<20, false)
	if want := 15602811*time.Nanosecond + 3*131072*time.Nanosecond + 600*us + 1200*time.Nanosecond + 8*82*us; (s - want).Abs() > time.Nanosecond {
		t.Errorf("SlicedCost = %v, want %v", s, want)
	}
	// Paced: the contention is 1 + 0.02·2 (13086.22848 µs); each stream's
	// share is B/6, whose 5 ms chunk (1 MiB) halves to the same 128 KiB.
	ps := SlicedCost(4, 100*us, 1e9, 8<<20, true)
	if want := 13086228*time.Nanosecond + 3*131072*time.Nanosecond + 600*us + 1200*time.Nanosecond + 8*82*us; (ps - want).Abs() > time.Nanosecond {
		t.Errorf("paced SlicedCost = %v, want %v", ps, want)
	}
	rb, d := ReduceBroadcastCost(4, 100*us, 1e9, 8<<20, 4)
	// 18001.504 µs, times the overhead 1.15: 20701.7296 µs.
	if want := 20701730 * time.Nanosecond; (rb-want).Abs() > time.Nanosecond || d != 1 {
		t.Errorf("ReduceBroadcastCost = %v (d=%d), want %v (d=1)", rb, d, want)
	}
	if c := ChooseAllReduce(4, 100*us, 1e9, 8<<20, 4, 4, false); !c.Sliced || c.SlicedCost != s || c.ReduceBroadcastCost != rb {
		t.Errorf("ChooseAllReduce = %+v, want sliced at %v vs %v", c, s, rb)
	}
	if c := ChooseAllReduce(4, 100*us, 1e9, 8<<20, 4, 4, true); !c.Sliced || c.SlicedCost != ps || c.ReduceBroadcastCost != rb {
		t.Errorf("ChooseAllReduce(paced) = %+v, want sliced at %v vs %v", c, ps, rb)
	}
	// n = 8 unpaced: the bytes alone are 2·7/8·1.72 = 3.01·S/B against
	// 2·S/B; paced, 2·7/8·1.10 = 1.925·S/B. At 1 MiB the coordinator's
	// 112 messages (9.184 ms) outweigh the bytes.
	if c := ChooseAllReduce(8, 100*us, 1e9, 64<<20, 4, 8, false); c.Sliced {
		t.Errorf("ChooseAllReduce(8) = %+v, want reduce+broadcast", c)
	}
	if c := ChooseAllReduce(8, 100*us, 1e9, 64<<20, 4, 8, true); !c.Sliced {
		t.Errorf("ChooseAllReduce(8, paced) = %+v, want sliced", c)
	}
	if c := ChooseAllReduce(8, 100*us, 1e9, 1<<20, 4, 8, true); c.Sliced || c.SlicedCost != 9184*us {
		t.Errorf("ChooseAllReduce(8, paced, 1 MiB) = %+v, want reduce+broadcast, sliced at the coordinator's 9.184ms", c)
	}
	// Paced, the contention stops at 1.10: from 7 on the bytes cost
	// 2·(n-1)/n·1.10·S/B, a little fill (n-1 chunks), and the n shares
	// of 300 bytes.
	for _, n := range []int{16, 64, 256} {
		S := int64(256 << 20)
		bytes := time.Duration(2 * float64(n-1) / float64(n) * 1.10 * float64(S))
		tasks := time.Duration(n * 300)
		if got := SlicedCost(n, 0, 1e9, S, true); got < bytes+tasks || got > bytes+tasks+bytes/20 {
			t.Errorf("SlicedCost(%d, paced) = %v, want the bytes' %v and at most 5 %% of fill", n, got, bytes)
		}
	}
	if got, want := SlicedCost(128, 100*us, 1e9, 1<<20, true), time.Duration(14*128)*82*us; got != want {
		t.Errorf("SlicedCost(128, 1 MiB) = %v, want the coordinator's %v", got, want)
	}
	// Members in one process: a message costs about its latency.
	if got, want := SlicedCost(128, 10*us, 1e12, 1<<20, true), time.Duration(14*128)*10*us; got != want {
		t.Errorf("SlicedCost(128, L 10µs, 1 MiB) = %v, want the coordinator's %v", got, want)
	}
	// n = 2, S = 65540 (just above a 64 KiB inline limit): sliced is the
	// coordinator's 28 messages, 2.296 ms, over its bytes' 65.54 + 32.77
	// (one slice-sized chunk of fill) + 4·100 µs = 498.31 µs; the flat
	// tree (d = 2: 100 + 2·65.54) plus a broadcast to one (100 + 65.54)
	// is 396.62 µs, 456.113 µs with the overhead (1.15).
	c := ChooseAllReduce(2, 100*us, 1e9, 65540, 4, 2, false)
	if c.Sliced || c.SlicedCost != 2296*us || c.ReduceBroadcastCost != 456113*time.Nanosecond || c.Degree != 2 {
		t.Errorf("ChooseAllReduce(2, 65540 B) = %+v, want reduce+broadcast 456.113µs vs sliced 2.296ms", c)
	}
}

// TestChooseAllReduceMatchesAnalyticT checks the choice across n, S, L
// and B against the two analytic times, computed here independently.
func TestChooseAllReduceMatchesAnalyticT(t *testing.T) {
	for _, paced := range []bool{false, true} {
		slicedWins, rbWins := 0, 0
		for _, n := range []int{2, 3, 4, 5, 8, 12, 16, 32, 64, 128} {
			for _, S := range []int64{65540, 1 << 20, 32 << 20, 256 << 20} {
				for _, L := range []time.Duration{10 * time.Microsecond, 100 * time.Microsecond, time.Millisecond, 20 * time.Millisecond} {
					for _, B := range []float64{1.25e6, 5e7, 1.25e9, 1.25e10} {
						sec := func(bytes float64) float64 { return bytes / B }
						// Sliced: 2(n-1)/n·S/B + fill + (n+2)·L.
						// Paced, each of the 2(n-1) streams' share of B sets
						// the chunk.
						slice := S / int64(n)
						share, perParticipant := B, 0.12
						if paced {
							share, perParticipant = B/float64(2*(n-1)), 0.02
						}
						chunk := float64(ChunkFor(share))
						for chunk > MinChunk && chunk*MinChunksPerObject > float64(slice) {
							chunk /= 2
						}
						chunk = math.Min(chunk, float64(slice))
						growth := perParticipant * float64(n-2)
						if paced {
							growth = math.Min(growth, 0.10)
						}
						tSliced := sec(2*float64(n-1)*float64(S)/float64(n))*(1+growth) + sec(float64(n-1)*chunk) + float64(n+2)*L.Seconds() +
							sec(float64(slicedTasks(n))) + // the tasks' bytes
							float64(2*n)*math.Min(82e-6, L.Seconds()) // shares and commits on the critical path
						// The coordinator's CPU: 14n messages of at most
						// 82 µs, at most L.
						tSliced = math.Max(tSliced, float64(14*n)*math.Min(82e-6, L.Seconds()))
						// Reduce then broadcast: min over d of T(d) with its
						// fill of hops chunks c, c the object's chunk halved
						// while the fill would pass S/16, plus (n-1)·L + S/B.
						linkChunk := float64(ChunkFor(B))
						for linkChunk > MinChunk && linkChunk*MinChunksPerObject > float64(S) {
							linkChunk /= 2
						}
						best := math.Inf(1)
						for d := 1; d <= n; d++ {
							var td, hops float64
							if d == 1 {
								hops = float64(max(n-2, 0))
								td = float64(n)*L.Seconds() + sec(float64(S))
							} else {
								h := math.Ceil(math.Log(float64(n))/math.Log(float64(d)) - 1e-9)
								hops = (h - 1) * float64(d)
								td = L.Seconds()*math.Log(float64(n))/math.Log(float64(d)) + float64(d)*sec(float64(S))
							}
							fc := linkChunk
							for fc > MinChunk && hops*fc > float64(S)/16 {
								fc /= 2
							}
							if n > 2 {
								td += hops * sec(math.Min(fc, float64(S)))
							}
							best = math.Min(best, td)
						}
						tRB := (best + float64(n-1)*L.Seconds() + sec(float64(S))) * 1.15
						c := ChooseAllReduce(n, L, B, S, 4, n, paced)
						near := func(got time.Duration, want float64) bool { return math.Abs(got.Seconds()-want) < 2e-9+want*1e-9 }
						if !near(c.SlicedCost, tSliced) || !near(c.ReduceBroadcastCost, tRB) {
							t.Fatalf("paced=%v n=%d S=%d L=%v B=%g: costs sliced %v rb %v, analytic %.9fs %.9fs", paced, n, S, L, B, c.SlicedCost, c.ReduceBroadcastCost, tSliced, tRB)
						}
						if math.Abs(tSliced-tRB) < 1e-8 {
							continue // a tie within rounding: either answer is right
						}
						if want := tSliced < tRB; c.Sliced != want {
							t.Errorf("paced=%v n=%d S=%d L=%v B=%g: sliced=%v, want %v (T sliced %.6fs, T reduce+broadcast %.6fs)", paced, n, S, L, B, c.Sliced, want, tSliced, tRB)
						}
						if c.Sliced {
							slicedWins++
						} else {
							rbWins++
						}
					}
				}
			}
		}
		// The sweep must exercise both answers, or it checks nothing.
		if slicedWins == 0 || rbWins == 0 {
			t.Fatalf("paced=%v: the sweep chose sliced %d times and reduce+broadcast %d times: want both", paced, slicedWins, rbWins)
		}
	}
}

func TestChooseAllReduceRefusesWhatCannotBeSliced(t *testing.T) {
	for _, c := range []struct {
		n     int
		S     int64
		width int
	}{
		{1, 32 << 20, 4}, // one participant: nothing to exchange
		{8, 28, 4},       // 7 elements for 8 slices
		{4, 1<<20 + 2, 4},
	} {
		if got := ChooseAllReduce(c.n, 0, 1e6, c.S, c.width, c.n, true); got.Sliced {
			t.Errorf("ChooseAllReduce(n=%d, S=%d, width=%d) chose sliced", c.n, c.S, c.width)
		}
	}
	// An unknown bandwidth compares bytes on the busiest link: sliced
	// while its contention leaves it fewer (n = 3), not at n = 8.
	if c := ChooseAllReduce(3, time.Millisecond, 0, 32<<20, 4, 3, false); !c.Sliced {
		t.Errorf("ChooseAllReduce(3) with B unknown = %+v, want sliced", c)
	}
	if c := ChooseAllReduce(8, time.Millisecond, 0, 32<<20, 4, 8, false); c.Sliced {
		t.Errorf("ChooseAllReduce(8) with B unknown = %+v, want reduce+broadcast", c)
	}
}

// slicedTasks is what a sliced AllReduce's tasks cost in bytes: n shares
// of 300 around a ring (n > 2), n² tasks of 400 listed.
func slicedTasks(n int) int {
	if n > 2 {
		return n * 300
	}
	return n * n * 400
}
