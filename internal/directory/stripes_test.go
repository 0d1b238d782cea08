package directory

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"testing"
	"time"
)

// stripeRun drives StripeTrees as a shard would for one broadcast: the
// receivers ask in a seeded order 20 µs apart (a shard's queue of
// Locates), a stripe's copy is whole a seeded while after its sender is
// handed, and the receivers of killed members' unfinished stripes ask
// again. It tallies every member's upload: a stripe's bytes for every
// receiver it was handed to (a receiver that moves pays its old sender
// all the same).
type stripeRun struct {
	t        *testing.T
	st       *StripeTrees
	size     int64
	upload   map[string]int64
	dead     map[string]bool
	assigned map[[2]any]bool
}

func (r *stripeRun) take(as []StripeAssignment) {
	for _, a := range as {
		if r.dead[a.Sender] {
			r.t.Fatalf("%s handed the dead %s for stripe %d", a.Receiver, a.Sender, a.Stripe)
		}
		if a.Sender == a.Receiver {
			r.t.Fatalf("%s handed itself for stripe %d", a.Receiver, a.Stripe)
		}
		_, n := StripeRange(r.size, r.st.Stripes(), a.Stripe)
		r.upload[a.Sender] += n
		r.assigned[[2]any{a.Receiver, a.Stripe}] = true
	}
}

func runStripes(t *testing.T, n, k int, seed uint64, kills int, finish bool) (*stripeRun, []string) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 7))
	const creator = "h0"
	var recv []string
	for i := 1; i < n; i++ {
		recv = append(recv, fmt.Sprintf("h%d", i))
	}
	rng.Shuffle(len(recv), func(i, j int) { recv[i], recv[j] = recv[j], recv[i] })
	st := NewStripeTrees(StripeConfig{Stripes: k, Receivers: n - 1, Hold: 5 * time.Millisecond}, creator)
	r := &stripeRun{t: t, st: st, size: 32 << 20, upload: map[string]int64{}, dead: map[string]bool{}, assigned: map[[2]any]bool{}}
	now := time.Unix(0, 0)
	killAt := len(recv) / 2
	for i, h := range recv {
		now = now.Add(20 * time.Microsecond)
		if i == killAt && kills > 0 {
			victims := slices.Clone(recv[:killAt])
			rng.Shuffle(len(victims), func(i, j int) { victims[i], victims[j] = victims[j], victims[i] })
			for _, v := range victims[:kills] {
				r.kill(now, v, recv)
			}
		}
		if r.dead[h] {
			continue
		}
		r.take(st.Join(now, h))
		if finish {
			// Some stripes finish while others still ask.
			for j := range k {
				if rng.IntN(4) == 0 {
					// A copy is whole only after its sender's is.
					h := recv[rng.IntN(i+1)]
					if up := st.Sender(h, j); up != "" && !r.dead[h] && !r.dead[up] && (up == "h0" || st.copies[j][up].whole) {
						st.Done(h, j)
					}
				}
			}
		}
	}
	for range 1000 {
		if st.Waiting() == 0 {
			break
		}
		as, next := st.Tick(now)
		r.take(as)
		if !next.IsZero() && next.After(now) {
			now = next
		}
	}
	if w := st.Waiting(); w != 0 {
		t.Fatalf("n=%d k=%d seed %d: %d asks still wait", n, k, seed, w)
	}
	return r, recv
}

// kill has v die: every receiver of its unfinished stripes asks again.
func (r *stripeRun) kill(now time.Time, v string, recv []string) {
	r.dead[v] = true
	r.st.Failed(v)
	for _, h := range recv {
		for j := range r.st.Stripes() {
			if c := r.st.copies[j][h]; c != nil && c.from == v && !c.whole {
				r.take(r.st.Relocate(now, h, j, v))
			}
		}
	}
}

// check asserts every live receiver has a sender for every stripe, on a
// path to the creator with no cycle and no dead member, and returns the
// depth and the most any member uploaded.
func (r *stripeRun) check(recv []string) (int, int64) {
	t := r.t
	st := r.st
	for _, h := range recv {
		if r.dead[h] {
			continue
		}
		for j := range st.Stripes() {
			seen := map[string]bool{}
			for cur := h; cur != "h0"; {
				if seen[cur] {
					t.Fatalf("stripe %d: a cycle through %s", j, cur)
				}
				seen[cur] = true
				c := st.copies[j][cur]
				if c == nil || c.from == "" {
					t.Fatalf("stripe %d: %s (above %s) has no sender", j, cur, h)
				}
				if r.dead[c.from] && !c.whole {
					t.Fatalf("stripe %d: %s reads from the dead %s", j, cur, c.from)
				}
				if c.whole {
					break
				}
				cur = c.from
			}
		}
	}
	var up int64
	for _, b := range r.upload {
		up = max(up, b)
	}
	return st.Depth(), up
}

// TestStripeTreesDepthAndUpload is the striped broadcast's promise: to
// N receivers that ask one after another in any order, every stripe's
// tree is O(log N) deep (interior copies k to a copy, a leaf below) and
// no member uploads more than 1.1·S and a chunk; with members killed
// halfway, the receivers of their unfinished stripes move to live
// copies without a cycle, each kill costing at most S more somewhere,
// and the depth stays within twice the bound.
func TestStripeTreesDepthAndUpload(t *testing.T) {
	const chunk = 256 << 10
	for _, n := range []int{2, 3, 8, 64, 256, 1024} {
		for _, k := range []int{2, 3, 4} {
			if testing.Short() && n > 256 {
				continue
			}
			for seed := uint64(1); seed <= 5; seed++ {
				for _, kills := range []int{0, 3} {
					if kills >= n-2 {
						continue
					}
					name := fmt.Sprintf("n=%d/k=%d/seed=%d/kills=%d", n, k, seed, kills)
					t.Run(name, func(t *testing.T) {
						r, recv := runStripes(t, n, k, seed, kills, seed%2 == 0)
						depth, up := r.check(recv)
						S := float64(r.size)
						// The creator's hop, the interior copies' tree, a leaf.
						bound := int(math.Ceil(math.Log(float64(n))/math.Log(float64(k)))) + 3
						limit := int64(1.1*S) + chunk
						if kills > 0 {
							bound *= 2
							limit += int64(kills) * r.size
						}
						t.Logf("depth %d (bound %d), most uploaded %.3f·S", depth, bound, float64(up)/S)
						if depth > bound {
							t.Errorf("depth %d, want at most %d", depth, bound)
						}
						if up > limit {
							t.Errorf("a member uploaded %d = %.2f·S, want at most %d", up, float64(up)/S, limit)
						}
					})
				}
			}
		}
	}
}

// TestStripeTreesLoneReceiver: a receiver nobody follows is not kept
// waiting for one past Hold, and takes the creator for every stripe.
func TestStripeTreesLoneReceiver(t *testing.T) {
	st := NewStripeTrees(StripeConfig{Stripes: 2, Receivers: 10, Hold: time.Millisecond}, "c")
	t0 := time.Unix(0, 0)
	as := st.Join(t0, "a")
	if len(as) != 1 || as[0].Sender != "c" {
		t.Fatalf("first ask: %v, want its interior stripe from the creator", as)
	}
	as, next := st.Tick(t0)
	if len(as) != 0 || !next.Equal(t0.Add(time.Millisecond)) {
		t.Fatalf("before Hold: %v, next %v", as, next)
	}
	as, _ = st.Tick(next)
	if len(as) != 1 || as[0].Sender != "c" || as[0].Stripe == st.class["a"] {
		t.Fatalf("after Hold: %v, want its other stripe from the creator", as)
	}
}

// TestStripeTreesNoCycleOnRelocate: a receiver whose sender failed is
// never handed a copy fed through its own.
func TestStripeTreesNoCycleOnRelocate(t *testing.T) {
	st := NewStripeTrees(StripeConfig{Stripes: 2, Receivers: 3, Hold: time.Millisecond}, "c")
	t0 := time.Unix(0, 0)
	st.Join(t0, "a") // interior in 0, from c
	st.Join(t0, "b") // interior in 1, from c; a leaf in 0 from a
	st.Join(t0, "d")
	st.Tick(t0.Add(time.Hour))
	// In stripe 0, a feeds b (and d); a's sender, the creator, is fine,
	// but say a lost it: a must not be handed b's or d's copy.
	if s := st.Sender("b", 0); s != "a" {
		t.Fatalf("b's stripe 0 sender %q, want a", s)
	}
	as := st.Relocate(t0.Add(time.Hour), "a", 0, "")
	for _, x := range as {
		if x.Receiver == "a" && (x.Sender == "b" || x.Sender == "d") {
			t.Fatalf("a handed %s, fed through a", x.Sender)
		}
	}
}
