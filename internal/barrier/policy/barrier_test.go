package policy

import (
	"errors"
	"fmt"
	"math"
	"math/rand"
	"slices"
	"testing"
	"time"
)

func mustBarrier(t testing.TB, o Options) *Barrier {
	t.Helper()
	b, err := New(o)
	if err != nil {
		t.Fatalf("New(%+v): %v", o, err)
	}
	return b
}

func label(i int) string { return fmt.Sprintf("l%03d", i) }

func mustEnter(t testing.TB, b *Barrier, now time.Time, l string) Decision {
	t.Helper()
	d, err := b.Enter(now, l, "host-"+l)
	if err != nil {
		t.Fatalf("Enter(%v, %s): %v", now.Sub(t0), l, err)
	}
	checkNext(t, b, d)
	return d
}

func checkNext(t testing.TB, b *Barrier, d Decision) {
	t.Helper()
	if !d.Next().Equal(b.NextDeadline()) {
		t.Fatalf("Decision.Next %v != NextDeadline %v", d.Next(), b.NextDeadline())
	}
}

// log is what a shell saw while driving a barrier.
type log struct {
	fired    bool
	reason   FireReason
	firedAt  time.Time
	release  []string
	lateFire []string
	catchUp  []string
	decs     int
}

func (l *log) add(t testing.TB, d Decision, now time.Time) {
	t.Helper()
	if d.Fired {
		if l.fired {
			t.Fatalf("fired twice")
		}
		l.fired, l.reason, l.firedAt = true, d.Reason, now
	}
	l.release = append(l.release, d.Release...)
	l.lateFire = append(l.lateFire, d.LateFire...)
	l.catchUp = append(l.catchUp, d.CatchUp...)
	l.decs++
}

type arrival struct {
	at    time.Time
	label string
}

// drive feeds arrivals to b as a shell would: before each arrival it ticks
// at every deadline due by then; afterwards it ticks until no deadline is
// left.
func drive(t testing.TB, b *Barrier, arrs []arrival) *log {
	t.Helper()
	l := &log{}
	tickUntil := func(limit time.Time) {
		for i := 0; ; i++ {
			dl := b.NextDeadline()
			if dl.IsZero() || (!limit.IsZero() && dl.After(limit)) {
				return
			}
			if i > 10000 {
				t.Fatalf("deadline %v never goes away", dl)
			}
			d := b.Tick(dl)
			checkNext(t, b, d)
			l.add(t, d, dl)
		}
	}
	for _, a := range arrs {
		tickUntil(a.at)
		l.add(t, mustEnter(t, b, a.at, a.label), a.at)
	}
	tickUntil(time.Time{})
	return l
}

// oracle computes, from the paper's rules, when and why a plain barrier
// fires and which labels it releases. Timed rules due at an instant act
// before entries at the same instant.
func oracle(o Options, arrs []arrival) (fired bool, reason FireReason, at time.Time, rel, late []string) {
	need := percentCount(o.MinPercent, o.MaxParticipants)
	first := arrs[0].at
	var instants []time.Time
	for _, a := range arrs {
		instants = append(instants, a.at)
	}
	if o.Timeout > 0 {
		instants = append(instants, first.Add(o.Timeout))
	}
	if need > 0 {
		instants = append(instants, first.Add(o.MinWait))
	}
	slices.SortFunc(instants, func(a, b time.Time) int { return a.Compare(b) })
	i := 0 // arrivals consumed
	for _, now := range instants {
		if fired {
			break
		}
		// timed rules
		if o.Timeout > 0 && !now.Before(first.Add(o.Timeout)) {
			fired, reason, at = true, FireTimeout, now
		} else if need > 0 && i >= need && !now.Before(first.Add(o.MinWait)) {
			fired, reason, at = true, FirePercent, now
		}
		for !fired && i < len(arrs) && arrs[i].at.Equal(now) {
			rel = append(rel, arrs[i].label)
			i++
			if i == o.MaxParticipants {
				fired, reason, at = true, FireMax, now
			} else if need > 0 && i >= need && !now.Before(first.Add(o.MinWait)) {
				fired, reason, at = true, FirePercent, now
			}
		}
	}
	if !fired {
		return false, NotFired, time.Time{}, nil, nil
	}
	for _, a := range arrs[i:] {
		late = append(late, a.label)
	}
	return
}

// TestEarlyEntryExhaustive compares the barrier with the oracle for every
// combination of max (1..5), percent, minWait, timeout, number of arrivals
// and inter-arrival gaps from {0, 1, 3} s.
func TestEarlyEntryExhaustive(t *testing.T) {
	percents := []float64{0, 20, 50, 60, 100}
	waits := []time.Duration{0, 2 * time.Second, 5 * time.Second}
	timeouts := []time.Duration{0, 3 * time.Second, 5 * time.Second, 7 * time.Second} // 5 s ties MinWait
	gaps := []float64{0, 1, 3}
	cases, fires := 0, map[FireReason]int{}
	for max := 1; max <= 5; max++ {
		for k := 1; k <= max; k++ {
			nPat := int(math.Pow(3, float64(k-1)))
			for pat := 0; pat < nPat; pat++ {
				arrs := []arrival{{t0, label(0)}}
				s, p := 0.0, pat
				for i := 1; i < k; i++ {
					s += gaps[p%3]
					p /= 3
					arrs = append(arrs, arrival{sec(s), label(i)})
				}
				for _, pc := range percents {
					for _, w := range waits {
						for _, to := range timeouts {
							o := Options{MaxParticipants: max, MinPercent: pc, MinWait: w, Timeout: to}
							b := mustBarrier(t, o)
							got := drive(t, b, arrs)
							fired, reason, at, rel, late := oracle(o, arrs)
							cases++
							if got.fired != fired || got.reason != reason || !got.firedAt.Equal(at) ||
								!slices.Equal(got.release, rel) || !slices.Equal(got.lateFire, late) {
								t.Fatalf("%+v arrivals %v:\n got fired=%v %v at %v rel %v late %v\nwant fired=%v %v at %v rel %v late %v",
									o, arrs, got.fired, got.reason, got.firedAt.Sub(t0), got.release, got.lateFire,
									fired, reason, at.Sub(t0), rel, late)
							}
							if f, r := b.Fired(); f != fired || r != reason {
								t.Fatalf("Fired() = %v %v", f, r)
							}
							fires[reason]++
							if len(b.Passed()) != len(rel)+len(late) {
								t.Fatalf("Passed %v", b.Passed())
							}
						}
					}
				}
			}
		}
	}
	for _, r := range []FireReason{NotFired, FireMax, FireTimeout, FirePercent} {
		if fires[r] == 0 {
			t.Errorf("no case ended with %v", r)
		}
	}
	t.Logf("%d cases, outcomes %v", cases, fires)
}

func TestTraditionalBarrier(t *testing.T) {
	b := mustBarrier(t, Options{MaxParticipants: 3})
	for i := 0; i < 2; i++ {
		d := mustEnter(t, b, sec(float64(i*100)), label(i))
		if d.Fired || len(d.Release) != 0 || !d.Next().IsZero() {
			t.Fatalf("entry %d: %+v", i, d)
		}
	}
	if d := b.Tick(sec(1e6)); d.Fired {
		t.Fatal("a traditional barrier fired on time")
	}
	d := mustEnter(t, b, sec(1e6+1), label(2))
	if !d.Fired || d.Reason != FireMax || !slices.Equal(d.Release, []string{"l000", "l001", "l002"}) {
		t.Fatalf("%+v", d)
	}
	if !b.FiredAt().Equal(sec(1e6 + 1)) {
		t.Fatalf("FiredAt %v", b.FiredAt())
	}
}

func TestTimeoutEarlyEntry(t *testing.T) {
	b := mustBarrier(t, Options{MaxParticipants: 10, Timeout: 30 * time.Second, MinPercent: 50, MinWait: time.Minute})
	mustEnter(t, b, sec(5), "a")
	d := mustEnter(t, b, sec(6), "b")
	if !d.Next().Equal(sec(35)) {
		t.Fatalf("next %v, want 35s", d.Next().Sub(t0))
	}
	if d := b.Tick(sec(34.999)); d.Fired {
		t.Fatal("fired before the timeout")
	}
	d = b.Tick(sec(35))
	if !d.Fired || d.Reason != FireTimeout || !slices.Equal(d.Release, []string{"a", "b"}) || !d.Next().IsZero() {
		t.Fatalf("%+v", d)
	}
}

func TestPercentWithoutMinWait(t *testing.T) {
	b := mustBarrier(t, Options{MaxParticipants: 10, MinPercent: 30})
	mustEnter(t, b, sec(0), "a")
	mustEnter(t, b, sec(1), "b")
	d := mustEnter(t, b, sec(2), "c")
	if !d.Fired || d.Reason != FirePercent || len(d.Release) != 3 {
		t.Fatalf("%+v", d)
	}
}

func TestPercentWithMinWait(t *testing.T) {
	b := mustBarrier(t, Options{MaxParticipants: 10, MinPercent: 30, MinWait: 10 * time.Second})
	mustEnter(t, b, sec(0), "a")
	mustEnter(t, b, sec(1), "b")
	d := mustEnter(t, b, sec(2), "c")
	if d.Fired || !d.Next().Equal(sec(10)) {
		t.Fatalf("fired before MinWait or wrong deadline: %+v", d)
	}
	if d := mustEnter(t, b, sec(3), "d"); d.Fired {
		t.Fatal("fired before MinWait")
	}
	d = b.Tick(sec(10))
	if !d.Fired || d.Reason != FirePercent || !slices.Equal(d.Release, []string{"a", "b", "c", "d"}) {
		t.Fatalf("%+v", d)
	}
}

func TestAlwaysFireAtMax(t *testing.T) {
	b := mustBarrier(t, Options{MaxParticipants: 3, MinPercent: 10, MinWait: time.Hour, Timeout: 2 * time.Hour})
	mustEnter(t, b, sec(0), "a")
	mustEnter(t, b, sec(0), "b")
	d := mustEnter(t, b, sec(0), "c")
	if !d.Fired || d.Reason != FireMax || len(d.Release) != 3 {
		t.Fatalf("%+v", d)
	}
}

func TestLatePassThroughVsCatchUp(t *testing.T) {
	for _, mode := range []LateMode{PassThrough, CatchUp} {
		b := mustBarrier(t, Options{MaxParticipants: 3, Timeout: 5 * time.Second, LateMode: mode})
		mustEnter(t, b, sec(0), "a")
		mustEnter(t, b, sec(1), "b")
		if d := b.Tick(sec(5)); !d.Fired || d.Reason != FireTimeout {
			t.Fatalf("%v: %+v", mode, d)
		}
		d := mustEnter(t, b, sec(7), "c")
		switch mode {
		case PassThrough:
			if !slices.Equal(d.LateFire, []string{"c"}) || len(d.CatchUp) != 0 || len(d.Release) != 0 {
				t.Fatalf("pass-through: %+v", d)
			}
			ps := b.Passed()
			if len(ps) != 3 || !ps[2].Late || ps[2].Label != "c" || ps[0].Late || !ps[2].At.Equal(sec(7)) {
				t.Fatalf("passed %+v", ps)
			}
			if h := b.Hosts(); len(h) != 3 || h["c"] != "host-c" {
				t.Fatalf("hosts %v", h)
			}
		case CatchUp:
			if !slices.Equal(d.CatchUp, []string{"c"}) || len(d.LateFire) != 0 || len(d.Release) != 0 {
				t.Fatalf("catch-up: %+v", d)
			}
			if h := b.Hosts(); len(h) != 2 || h["a"] != "host-a" || h["b"] != "host-b" {
				t.Fatalf("hosts %v", h)
			}
		}
		if b.Entered() != 3 {
			t.Fatalf("Entered %d", b.Entered())
		}
	}
}

func TestThrottledRelease(t *testing.T) {
	for _, th := range []Throttle{{Count: 2, Interval: 10 * time.Second}, {Percent: 25, Interval: 10 * time.Second}} {
		b := mustBarrier(t, Options{MaxParticipants: 8, Timeout: time.Minute, Throttle: &th})
		for i := 0; i < 7; i++ {
			if d := mustEnter(t, b, sec(float64(i)), label(i)); d.Fired {
				t.Fatal("fired early")
			}
		}
		d := b.Tick(sec(60))
		if !d.Fired || d.Reason != FireTimeout || !slices.Equal(d.Release, []string{"l000", "l001"}) || !d.Next().Equal(sec(70)) {
			t.Fatalf("%+v: first batch %+v", th, d)
		}
		if d := b.Tick(sec(69.999)); len(d.Release) != 0 {
			t.Fatalf("released before the interval: %+v", d)
		}
		if d := b.Tick(sec(70)); !slices.Equal(d.Release, []string{"l002", "l003"}) || !d.Next().Equal(sec(80)) {
			t.Fatalf("second batch %+v", d)
		}
		// A late tick releases one batch only and restarts the interval.
		if d := b.Tick(sec(95)); !slices.Equal(d.Release, []string{"l004", "l005"}) || !d.Next().Equal(sec(105)) {
			t.Fatalf("third batch %+v", d)
		}
		if !slices.Equal(b.Waiting(), []string{"l006"}) {
			t.Fatalf("waiting %v", b.Waiting())
		}
		if d := b.Tick(sec(105)); !slices.Equal(d.Release, []string{"l006"}) || !d.Next().IsZero() {
			t.Fatalf("last batch %+v", d)
		}
		var order []string
		for _, p := range b.Passed() {
			order = append(order, p.Label)
		}
		if !slices.Equal(order, []string{"l000", "l001", "l002", "l003", "l004", "l005", "l006"}) {
			t.Fatalf("not FIFO: %v", order)
		}
	}
}

// TestThrottlePacing: whatever the tick times, no more than Count labels
// pass in any window shorter than Interval, and all pass in FIFO order.
func TestThrottlePacing(t *testing.T) {
	for seed := int64(1); seed <= 200; seed++ {
		r := rand.New(rand.NewSource(seed))
		count := 1 + r.Intn(4)
		iv := time.Duration(1+r.Intn(10)) * time.Second
		n := 5 + r.Intn(30)
		b := mustBarrier(t, Options{MaxParticipants: n, Throttle: &Throttle{Count: count, Interval: iv}})
		now := t0
		for i := 0; i < n; i++ {
			now = now.Add(time.Duration(r.Intn(1000)) * time.Millisecond)
			mustEnter(t, b, now, label(i))
		}
		for i := 0; i < 10000 && len(b.Waiting()) > 0; i++ {
			now = now.Add(time.Duration(r.Intn(3000)) * time.Millisecond)
			checkNext(t, b, b.Tick(now))
		}
		ps := b.Passed()
		if len(ps) != n {
			t.Fatalf("seed %d: %d of %d passed", seed, len(ps), n)
		}
		for i, p := range ps {
			if p.Label != label(i) {
				t.Fatalf("seed %d: not FIFO at %d: %v", seed, i, p.Label)
			}
			if i >= count && p.At.Sub(ps[i-count].At) < iv {
				t.Fatalf("seed %d: %d released within %v", seed, count+1, p.At.Sub(ps[i-count].At))
			}
		}
	}
}

func TestThrottledLatePassThrough(t *testing.T) {
	b := mustBarrier(t, Options{MaxParticipants: 6, Timeout: 5 * time.Second, Throttle: &Throttle{Count: 1, Interval: 10 * time.Second}})
	mustEnter(t, b, sec(0), "a")
	mustEnter(t, b, sec(1), "b")
	if d := b.Tick(sec(5)); !slices.Equal(d.Release, []string{"a"}) {
		t.Fatalf("%+v", d)
	}
	if d := mustEnter(t, b, sec(6), "late1"); len(d.LateFire)+len(d.Release) != 0 {
		t.Fatalf("late arrival jumped the queue: %+v", d)
	}
	if d := b.Tick(sec(15)); !slices.Equal(d.Release, []string{"b"}) {
		t.Fatalf("%+v", d)
	}
	if d := b.Tick(sec(25)); !slices.Equal(d.LateFire, []string{"late1"}) || len(d.Release) != 0 {
		t.Fatalf("%+v", d)
	}
	// Queue drained and the interval has passed: a late arrival leaves at once.
	if d := mustEnter(t, b, sec(40), "late2"); !slices.Equal(d.LateFire, []string{"late2"}) || !d.Next().IsZero() {
		t.Fatalf("%+v", d)
	}
	// Within the interval of that release: it waits.
	if d := mustEnter(t, b, sec(45), "late3"); len(d.LateFire) != 0 || !d.Next().Equal(sec(50)) {
		t.Fatalf("%+v", d)
	}
}

func TestSemaphoreHolderTimeout(t *testing.T) {
	b := mustBarrier(t, Options{MaxParticipants: 5, Semaphore: &Semaphore{Count: 1, HolderTimeout: 10 * time.Second}})
	if d := mustEnter(t, b, sec(0), "a"); !slices.Equal(d.Release, []string{"a"}) || !d.Next().Equal(sec(10)) {
		t.Fatalf("%+v", d)
	}
	if d := mustEnter(t, b, sec(1), "b"); len(d.Release) != 0 {
		t.Fatalf("semaphore exceeded: %+v", d)
	}
	if d := b.Tick(sec(9.999)); len(d.TimedOut) != 0 || len(d.Release) != 0 {
		t.Fatalf("%+v", d)
	}
	d := b.Tick(sec(10))
	if !slices.Equal(d.TimedOut, []string{"a"}) || !slices.Equal(d.Release, []string{"b"}) || !d.Next().Equal(sec(20)) {
		t.Fatalf("%+v", d)
	}
	if _, err := b.Release(sec(11), "a"); !errors.Is(err, ErrNotHolding) {
		t.Fatalf("release of a timed-out holder: %v", err)
	}
	d, err := b.Release(sec(12), "b")
	if err != nil || !d.Next().IsZero() || len(b.Holders()) != 0 {
		t.Fatalf("%+v %v", d, err)
	}
	// A release arriving when the timeout is due but unprocessed wins.
	mustEnter(t, b, sec(20), "c")
	mustEnter(t, b, sec(20), "d")
	d, err = b.Release(sec(30), "c")
	if err != nil || len(d.TimedOut) != 0 || !slices.Equal(d.Release, []string{"d"}) {
		t.Fatalf("%+v %v", d, err)
	}
}

// TestSemaphoreRandom checks a semaphore barrier against a model under
// random interleavings of entries, releases and ticks: the bound is never
// exceeded, admission is FIFO and work-conserving, and timed-out holders
// are exactly those past their timeout.
func TestSemaphoreRandom(t *testing.T) {
	for seed := int64(1); seed <= 500; seed++ {
		r := rand.New(rand.NewSource(seed))
		k := 1 + r.Intn(4)
		var ht time.Duration
		if r.Intn(2) == 0 {
			ht = time.Duration(5+r.Intn(15)) * time.Second
		}
		max := 10 + r.Intn(30)
		b := mustBarrier(t, Options{MaxParticipants: max, Semaphore: &Semaphore{Count: k, HolderTimeout: ht}})
		var queue []string
		held := map[string]time.Time{}
		gone := map[string]bool{}
		now := t0
		next := 0
		apply := func(op string, d Decision) {
			for _, l := range d.TimedOut {
				since, ok := held[l]
				if !ok || ht == 0 || now.Sub(since) < ht {
					t.Fatalf("seed %d %s: %s timed out wrongly", seed, op, l)
				}
				delete(held, l)
				gone[l] = true
			}
			for _, l := range d.Release {
				if len(queue) == 0 || queue[0] != l {
					t.Fatalf("seed %d %s: admitted %s, FIFO head %v", seed, op, l, queue)
				}
				queue = queue[1:]
				held[l] = now
			}
			if len(held) > k {
				t.Fatalf("seed %d %s: %d holders > %d", seed, op, len(held), k)
			}
			if len(queue) > 0 && len(held) < k {
				t.Fatalf("seed %d %s: %d waiting with a free slot", seed, op, len(queue))
			}
			for l, since := range held {
				if ht > 0 && now.Sub(since) >= ht {
					t.Fatalf("seed %d %s: holder %s past its timeout", seed, op, l)
				}
			}
			hs := b.Holders()
			if len(hs) != len(held) || !slices.Equal(b.Waiting(), queue) {
				t.Fatalf("seed %d %s: holders %v model %v", seed, op, hs, held)
			}
			checkNext(t, b, d)
		}
		for step := 0; step < 300; step++ {
			now = now.Add(time.Duration(r.Intn(3000)) * time.Millisecond)
			switch op := r.Intn(10); {
			case op < 4 && next < max:
				l := label(next)
				next++
				queue = append(queue, l)
				d, err := b.Enter(now, l, "h")
				if err != nil {
					t.Fatal(err)
				}
				apply("enter", d)
			case op < 8 && len(held) > 0:
				var ls []string
				for l := range held {
					ls = append(ls, l)
				}
				slices.Sort(ls)
				l := ls[r.Intn(len(ls))]
				d, err := b.Release(now, l)
				if err != nil {
					t.Fatalf("seed %d: release %s: %v", seed, l, err)
				}
				delete(held, l)
				gone[l] = true
				apply("release", d)
			case op == 8 && (len(queue) > 0 || len(gone) > 0):
				// releasing someone not holding fails and changes nothing
				var l string
				if len(queue) > 0 && (len(gone) == 0 || r.Intn(2) == 0) {
					l = queue[r.Intn(len(queue))]
				} else {
					var gs []string
					for g := range gone {
						gs = append(gs, g)
					}
					slices.Sort(gs)
					l = gs[r.Intn(len(gs))]
				}
				if _, err := b.Release(now, l); !errors.Is(err, ErrNotHolding) {
					t.Fatalf("seed %d: release of non-holder %s: %v", seed, l, err)
				}
			default:
				apply("tick", b.Tick(now))
			}
		}
	}
}

// TestAdaptiveSemaphoreRandom: with adaptive concurrency the level stays in
// [1, AdaptiveMax], holders never exceed it, and no one waits while nobody
// holds.
func TestAdaptiveSemaphoreRandom(t *testing.T) {
	for seed := int64(1); seed <= 200; seed++ {
		r := rand.New(rand.NewSource(seed))
		cap := 2 + r.Intn(6)
		b := mustBarrier(t, Options{MaxParticipants: 60, Semaphore: &Semaphore{Count: 1 + r.Intn(cap), Adaptive: true, AdaptiveMax: cap, HolderTimeout: 30 * time.Second}})
		now := t0
		next := 0
		for step := 0; step < 400; step++ {
			now = now.Add(time.Duration(r.Intn(4000)) * time.Millisecond)
			hs := b.Holders()
			var d Decision
			if r.Intn(2) == 0 && next < 60 {
				d = mustEnter(t, b, now, label(next))
				next++
			} else if len(hs) > 0 {
				var err error
				if d, err = b.Release(now, hs[r.Intn(len(hs))]); err != nil {
					t.Fatal(err)
				}
			} else {
				d = b.Tick(now)
			}
			checkNext(t, b, d)
			if l := b.Limit(); l < 1 || l > cap || len(b.Holders()) > l {
				t.Fatalf("seed %d: level %d holders %d cap %d", seed, l, len(b.Holders()), cap)
			}
			if len(b.Waiting()) > 0 && len(b.Holders()) == 0 {
				t.Fatalf("seed %d: stalled with %d waiting", seed, len(b.Waiting()))
			}
		}
	}
}

func TestEntryCallback(t *testing.T) {
	b := mustBarrier(t, Options{MaxParticipants: 4, MinPercent: 50, EntryCallback: true, CallbackTimeout: 10 * time.Second, Timeout: time.Hour})
	d := mustEnter(t, b, sec(0), "a")
	if d.Consult == nil || d.Consult.Label != "a" || d.Consult.Host != "host-a" || d.Consult.Default || d.Fired {
		t.Fatalf("%+v %+v", d, d.Consult)
	}
	d = mustEnter(t, b, sec(1), "b")
	if d.Consult == nil || !d.Consult.Default || d.Consult.Reason != FirePercent || d.Fired || len(d.Release) != 0 {
		t.Fatalf("the callback must decide: %+v %+v", d, d.Consult)
	}
	if d, err := b.Veto(sec(2)); err != nil || !d.Next().Equal(sec(12)) || b.Vetoes() != 1 {
		t.Fatalf("veto: %+v %v", d, err)
	}
	if d := b.Tick(sec(11.9)); d.Consult != nil {
		t.Fatal("consulted before CallbackTimeout")
	}
	d = b.Tick(sec(12))
	if d.Consult == nil || d.Consult.Label != "" || !d.Consult.Default || d.Fired {
		t.Fatalf("callback timeout: %+v", d)
	}
	d, err := b.ForceFire(sec(13))
	if err != nil || !d.Fired || d.Reason != FireForced || !slices.Equal(d.Release, []string{"a", "b"}) {
		t.Fatalf("%+v %v", d, err)
	}
	d = mustEnter(t, b, sec(14), "c")
	if d.Consult != nil || !slices.Equal(d.LateFire, []string{"c"}) {
		t.Fatalf("late entry: %+v", d)
	}
	if _, err := b.ForceFire(sec(15)); !errors.Is(err, ErrAlreadyFired) {
		t.Fatalf("second ForceFire: %v", err)
	}
}

func TestEntryCallbackMaxAndTimeoutStillFire(t *testing.T) {
	b := mustBarrier(t, Options{MaxParticipants: 2, EntryCallback: true})
	mustEnter(t, b, sec(0), "a")
	if d := mustEnter(t, b, sec(1), "b"); !d.Fired || d.Reason != FireMax {
		t.Fatalf("%+v", d)
	}
	b = mustBarrier(t, Options{MaxParticipants: 5, EntryCallback: true, Timeout: 3 * time.Second})
	mustEnter(t, b, sec(0), "a")
	if d := b.Tick(sec(3)); !d.Fired || d.Reason != FireTimeout || d.Consult != nil {
		t.Fatalf("%+v", d)
	}
	// A percent threshold met only by MinWait consults once.
	b = mustBarrier(t, Options{MaxParticipants: 4, MinPercent: 50, MinWait: 5 * time.Second, EntryCallback: true})
	mustEnter(t, b, sec(0), "a")
	if d := mustEnter(t, b, sec(1), "b"); d.Consult == nil || d.Consult.Default || !d.Next().Equal(sec(5)) {
		t.Fatalf("%+v", d)
	}
	d := b.Tick(sec(5))
	if d.Consult == nil || !d.Consult.Default || d.Consult.Reason != FirePercent || d.Fired {
		t.Fatalf("%+v", d)
	}
	if d := b.Tick(sec(100)); d.Consult != nil || !d.Next().IsZero() {
		t.Fatalf("consulted twice: %+v", d)
	}
}

// kneeScenario: the paper's scenario, 100 hosts, exponential inter-arrival
// times for the first 80 and a heavy tail.
func kneeScenario(seed int64) []arrival {
	r := rand.New(rand.NewSource(seed))
	var out []arrival
	for i, at := range arrivals(r, 100, 80, 20) {
		out = append(out, arrival{at, label(i)})
	}
	return out
}

func TestFireOnKnee(t *testing.T) {
	for seed := int64(1); seed <= 20; seed++ {
		b := mustBarrier(t, Options{MaxParticipants: 100, MinPercent: 50, FireOnKnee: true})
		arrs := kneeScenario(seed)
		l := drive(t, b, arrs)
		if !l.fired || l.reason != FireKnee {
			t.Fatalf("seed %d: fired=%v %v", seed, l.fired, l.reason)
		}
		if n := len(l.release); n < 78 || n > 82 {
			t.Fatalf("seed %d: fired after %d arrivals, tail begins after 80", seed, n)
		}
		if !slices.Equal(l.release, labelsOf(arrs[:len(l.release)])) || !slices.Equal(l.lateFire, labelsOf(arrs[len(l.release):])) {
			t.Fatalf("seed %d: released %v late %v", seed, l.release, l.lateFire)
		}
		acc := 0
		for _, k := range b.Knees() {
			if k.Accepted {
				acc++
			}
		}
		if acc != 1 {
			t.Fatalf("seed %d: %d accepted knees before the fire", seed, acc)
		}
	}
}

func labelsOf(as []arrival) []string {
	var out []string
	for _, a := range as {
		out = append(out, a.label)
	}
	return out
}

// TestFireOnKneeNotBeforeMinPercent: with the tail beginning at 30 of 100
// arrivals, a knee there is reported but does not fire the barrier under
// MinPercent 60; MinPercent alone does not fire it either.
func TestFireOnKneeNotBeforeMinPercent(t *testing.T) {
	for seed := int64(1); seed <= 20; seed++ {
		r := rand.New(rand.NewSource(seed))
		var arrs []arrival
		for i, at := range arrivals(r, 100, 30, 20) {
			arrs = append(arrs, arrival{at, label(i)})
		}
		b := mustBarrier(t, Options{MaxParticipants: 100, MinPercent: 60, FireOnKnee: true})
		l := drive(t, b, arrs)
		if l.fired && len(l.release) < 60 {
			t.Fatalf("seed %d: fired with %d < 60%% arrived (%v)", seed, len(l.release), l.reason)
		}
		if l.fired && l.reason != FireKnee && l.reason != FireMax {
			t.Fatalf("seed %d: fired by %v", seed, l.reason)
		}
		early := false
		for _, k := range b.Knees() {
			if k.Arrivals < 60 && !k.Accepted {
				early = true
			}
		}
		if !early {
			t.Fatalf("seed %d: the early knee was not reported", seed)
		}
	}
}

func TestKneeConsultation(t *testing.T) {
	for _, fireOnKnee := range []bool{false, true} {
		b := mustBarrier(t, Options{MaxParticipants: 100, MinPercent: 50, EntryCallback: true, FireOnKnee: fireOnKnee})
		var knee *Consultation
		for _, a := range kneeScenario(1)[:99] { // the 100th would fire by max
			for i, dl := 0, b.NextDeadline(); !dl.IsZero() && !dl.After(a.at); i, dl = i+1, b.NextDeadline() {
				if i > 1000 {
					t.Fatalf("deadline %v never goes away", dl)
				}
				if d := b.Tick(dl); d.Consult != nil && d.Consult.Knee != nil && knee == nil {
					knee = d.Consult
					if len(d.Knees) == 0 || !d.Knees[len(d.Knees)-1].Accepted {
						t.Fatalf("decision knees %+v", d.Knees)
					}
				}
			}
			d := mustEnter(t, b, a.at, a.label)
			if d.Fired {
				t.Fatalf("fired by %v without the callback", d.Reason)
			}
		}
		if knee == nil {
			t.Fatalf("FireOnKnee=%v: no knee consultation", fireOnKnee)
		}
		if knee.Knee.Arrivals < 78 || knee.Knee.Arrivals > 82 {
			t.Fatalf("knee at %d", knee.Knee.Arrivals)
		}
		// Without FireOnKnee, MinPercent is a firing rule of its own and is
		// met by then: the default is to fire by percent.
		wantReason := FirePercent
		if fireOnKnee {
			wantReason = FireKnee
		}
		if !knee.Default || knee.Reason != wantReason {
			t.Fatalf("FireOnKnee=%v: default %v %v", fireOnKnee, knee.Default, knee.Reason)
		}
	}
}

func TestBadOptions(t *testing.T) {
	ok := Options{MaxParticipants: 10}
	with := func(f func(*Options)) Options { o := ok; f(&o); return o }
	cases := []struct {
		name string
		o    Options
		want error
	}{
		{"max 0", with(func(o *Options) { o.MaxParticipants = 0 }), ErrBadMax},
		{"max -1", with(func(o *Options) { o.MaxParticipants = -1 }), ErrBadMax},
		{"timeout", with(func(o *Options) { o.Timeout = -1 }), ErrNegativeDuration},
		{"minwait", with(func(o *Options) { o.MinWait = -time.Second }), ErrNegativeDuration},
		{"callback timeout", with(func(o *Options) { o.EntryCallback = true; o.CallbackTimeout = -1 }), ErrNegativeDuration},
		{"percent low", with(func(o *Options) { o.MinPercent = -1 }), ErrBadPercent},
		{"percent high", with(func(o *Options) { o.MinPercent = 101 }), ErrBadPercent},
		{"percent NaN", with(func(o *Options) { o.MinPercent = math.NaN() }), ErrBadPercent},
		{"warmup 1", with(func(o *Options) { o.KneeWarmup = 1 }), ErrBadWarmup},
		{"warmup -1", with(func(o *Options) { o.KneeWarmup = -1 }), ErrBadWarmup},
		{"late mode", with(func(o *Options) { o.LateMode = 7 }), ErrBadLateMode},
		{"callback timeout alone", with(func(o *Options) { o.CallbackTimeout = time.Second }), ErrConflictingOption},
		{"throttle no interval", with(func(o *Options) { o.Throttle = &Throttle{Count: 1} }), ErrBadThrottle},
		{"throttle negative interval", with(func(o *Options) { o.Throttle = &Throttle{Count: 1, Interval: -1} }), ErrNegativeDuration},
		{"throttle none", with(func(o *Options) { o.Throttle = &Throttle{Interval: time.Second} }), ErrBadThrottle},
		{"throttle both", with(func(o *Options) { o.Throttle = &Throttle{Count: 1, Percent: 10, Interval: time.Second} }), ErrBadThrottle},
		{"throttle count<0", with(func(o *Options) { o.Throttle = &Throttle{Count: -1, Interval: time.Second} }), ErrBadThrottle},
		{"throttle percent", with(func(o *Options) { o.Throttle = &Throttle{Percent: 150, Interval: time.Second} }), ErrBadPercent},
		{"semaphore 0", with(func(o *Options) { o.Semaphore = &Semaphore{} }), ErrBadSemaphore},
		{"semaphore -1", with(func(o *Options) { o.Semaphore = &Semaphore{Count: -1} }), ErrBadSemaphore},
		{"holder timeout", with(func(o *Options) { o.Semaphore = &Semaphore{Count: 1, HolderTimeout: -1} }), ErrNegativeDuration},
		{"adaptive max < count", with(func(o *Options) { o.Semaphore = &Semaphore{Count: 3, Adaptive: true, AdaptiveMax: 2} }), ErrBadSemaphore},
		{"adaptive max < 0", with(func(o *Options) { o.Semaphore = &Semaphore{Count: 3, Adaptive: true, AdaptiveMax: -2} }), ErrBadSemaphore},
		{"adaptive max alone", with(func(o *Options) { o.Semaphore = &Semaphore{Count: 3, AdaptiveMax: 5} }), ErrConflictingOption},
		{"semaphore+throttle", with(func(o *Options) {
			o.Semaphore = &Semaphore{Count: 1}
			o.Throttle = &Throttle{Count: 1, Interval: 1}
		}), ErrConflictingOption},
		{"semaphore+timeout", with(func(o *Options) { o.Semaphore = &Semaphore{Count: 1}; o.Timeout = 1 }), ErrConflictingOption},
		{"semaphore+percent", with(func(o *Options) { o.Semaphore = &Semaphore{Count: 1}; o.MinPercent = 1 }), ErrConflictingOption},
		{"semaphore+knee", with(func(o *Options) { o.Semaphore = &Semaphore{Count: 1}; o.FireOnKnee = true }), ErrConflictingOption},
		{"semaphore+catchup", with(func(o *Options) { o.Semaphore = &Semaphore{Count: 1}; o.LateMode = CatchUp }), ErrConflictingOption},
		{"semaphore+callback", with(func(o *Options) { o.Semaphore = &Semaphore{Count: 1}; o.EntryCallback = true }), ErrConflictingOption},
	}
	for _, c := range cases {
		err := c.o.Validate()
		if !errors.Is(err, c.want) || !errors.Is(err, ErrInvalidOptions) {
			t.Errorf("%s: %v, want %v", c.name, err, c.want)
		}
		if b, err := New(c.o); b != nil || err == nil {
			t.Errorf("%s: New accepted", c.name)
		}
	}
	goods := []Options{
		ok,
		{MaxParticipants: 1, MinPercent: 100, Timeout: 1, MinWait: 1, FireOnKnee: true, KneeWarmup: 2, LateMode: CatchUp},
		{MaxParticipants: 3, Throttle: &Throttle{Percent: 100, Interval: 1}},
		{MaxParticipants: 3, Semaphore: &Semaphore{Count: 5, HolderTimeout: 1, Adaptive: true, AdaptiveMax: 5}},
		{MaxParticipants: 3, EntryCallback: true, CallbackTimeout: 1},
	}
	for _, o := range goods {
		if err := o.Validate(); err != nil {
			t.Errorf("%+v: %v", o, err)
		}
	}
}

func TestBadEvents(t *testing.T) {
	b := mustBarrier(t, Options{MaxParticipants: 2, Timeout: 5 * time.Second})
	if _, err := b.Enter(sec(0), "", "h"); !errors.Is(err, ErrEmptyLabel) {
		t.Fatalf("empty label: %v", err)
	}
	mustEnter(t, b, sec(0), "a")
	// A failed event changes nothing, not even the clock: no timeout fires.
	if _, err := b.Enter(sec(100), "a", "other"); !errors.Is(err, ErrDuplicateLabel) {
		t.Fatalf("duplicate: %v", err)
	}
	if f, _ := b.Fired(); f || b.Entered() != 1 {
		t.Fatal("a failed Enter changed the barrier")
	}
	if _, err := b.Release(sec(1), "a"); !errors.Is(err, ErrNotSemaphore) {
		t.Fatalf("release on a plain barrier: %v", err)
	}
	if _, err := b.Veto(sec(1)); !errors.Is(err, ErrNoCallback) {
		t.Fatalf("veto without callback: %v", err)
	}
	mustEnter(t, b, sec(1), "b")
	if _, err := b.Enter(sec(2), "c", "h"); !errors.Is(err, ErrFull) {
		t.Fatalf("beyond max: %v", err)
	}
	if _, err := b.Enter(sec(2), "b", "h"); !errors.Is(err, ErrDuplicateLabel) {
		t.Fatalf("duplicate after fire: %v", err)
	}
	if _, err := b.ForceFire(sec(2)); !errors.Is(err, ErrAlreadyFired) {
		t.Fatalf("force after fire: %v", err)
	}

	s := mustBarrier(t, Options{MaxParticipants: 3, Semaphore: &Semaphore{Count: 1}})
	if _, err := s.Release(sec(0), "x"); !errors.Is(err, ErrUnknownLabel) {
		t.Fatalf("release without enter: %v", err)
	}
	mustEnter(t, s, sec(0), "a")
	mustEnter(t, s, sec(0), "b")
	if _, err := s.Release(sec(0), "b"); !errors.Is(err, ErrNotHolding) {
		t.Fatalf("release of a waiting label: %v", err)
	}
	if _, err := s.ForceFire(sec(0)); !errors.Is(err, ErrSemaphore) {
		t.Fatalf("force on a semaphore: %v", err)
	}
	if _, err := s.Release(sec(1), "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Release(sec(1), "a"); !errors.Is(err, ErrNotHolding) {
		t.Fatalf("double release: %v", err)
	}

	c := mustBarrier(t, Options{MaxParticipants: 3, Timeout: time.Second, EntryCallback: true})
	mustEnter(t, c, sec(0), "a")
	mustEnter(t, c, sec(0), "b")
	if w := c.Close(); !slices.Equal(w, []string{"a", "b"}) || !c.Closed() {
		t.Fatalf("Close returned %v", w)
	}
	if w := c.Close(); w != nil {
		t.Fatalf("second Close returned %v", w)
	}
	if _, err := c.Enter(sec(0), "c", "h"); !errors.Is(err, ErrClosed) {
		t.Fatalf("enter after close: %v", err)
	}
	if _, err := c.ForceFire(sec(0)); !errors.Is(err, ErrClosed) {
		t.Fatalf("force after close: %v", err)
	}
	if _, err := c.Veto(sec(0)); !errors.Is(err, ErrClosed) {
		t.Fatalf("veto after close: %v", err)
	}
	if d := c.Tick(sec(10)); d.Fired || !d.Next().IsZero() || !c.NextDeadline().IsZero() {
		t.Fatalf("tick after close: %+v", d)
	}
	s.Close()
	if _, err := s.Release(sec(2), "b"); !errors.Is(err, ErrClosed) {
		t.Fatalf("release after close: %v", err)
	}
}

func TestTimeNeverGoesBack(t *testing.T) {
	b := mustBarrier(t, Options{MaxParticipants: 5, Timeout: 10 * time.Second})
	mustEnter(t, b, sec(0), "a")
	b.Tick(sec(8))
	d := mustEnter(t, b, sec(1), "b") // treated as at 8 s
	if d.Fired {
		t.Fatal("fired")
	}
	if d := b.Tick(sec(2)); d.Fired || !d.Next().Equal(sec(10)) {
		t.Fatalf("%+v", d)
	}
	d = b.Tick(sec(10))
	if !d.Fired {
		t.Fatal("timeout lost")
	}
	if ps := b.Passed(); !ps[1].At.Equal(sec(10)) {
		t.Fatalf("%+v", ps)
	}
}

func TestStrings(t *testing.T) {
	for r, s := range map[FireReason]string{NotFired: "not-fired", FireMax: "max", FireTimeout: "timeout", FirePercent: "percent", FireKnee: "knee", FireForced: "forced", 42: "FireReason(42)"} {
		if r.String() != s {
			t.Errorf("%d: %q", int(r), r.String())
		}
	}
	for m, s := range map[LateMode]string{PassThrough: "pass-through", CatchUp: "catch-up", 9: "LateMode(9)"} {
		if m.String() != s {
			t.Errorf("%d: %q", int(m), m.String())
		}
	}
}

// TestFireOnKneeAfterMinWait: a knee found before MinWait is reported but
// does not fire; if the next arrival is still overdue when MinWait ends,
// the knee is accepted then and fires the barrier.
func TestFireOnKneeAfterMinWait(t *testing.T) {
	b := mustBarrier(t, Options{MaxParticipants: 10, FireOnKnee: true, MinWait: time.Minute, KneeWarmup: 2})
	mustEnter(t, b, sec(0), "a")
	d := mustEnter(t, b, sec(1), "b")
	// arr = 0.3 s, arrvar = 0.25 s: threshold 1.3 s
	if d.Next().Sub(sec(1.3)).Abs() > time.Microsecond {
		t.Fatalf("next %v", d.Next().Sub(t0))
	}
	d = b.Tick(d.Next())
	if d.Fired || len(d.Knees) != 1 || d.Knees[0].Accepted || d.Knees[0].Arrivals != 2 || !d.Next().Equal(sec(60)) {
		t.Fatalf("%+v", d)
	}
	d = b.Tick(sec(60))
	if !d.Fired || d.Reason != FireKnee || !slices.Equal(d.Release, []string{"a", "b"}) ||
		len(d.Knees) != 1 || !d.Knees[0].Accepted || !d.Knees[0].AcceptedAt.Equal(sec(60)) {
		t.Fatalf("%+v", d)
	}
}
