package barrier_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/barrier"
	"github.com/hoplite-go/hoplite/messages"
)

type result struct {
	label string
	pass  *barrier.Pass
	err   error
}

// enterAll enters labels concurrently through h and collects the results.
func enterAll(t *testing.T, h *barrier.Barrier, labels ...string) <-chan result {
	t.Helper()
	ctx := deadline(t, 20*time.Second)
	out := make(chan result, len(labels))
	for _, l := range labels {
		go func() {
			p, err := h.Enter(ctx, l)
			out <- result{l, p, err}
		}()
	}
	return out
}

func TestTraditionalBarrierFiresAtMaxAndKnowsHosts(t *testing.T) {
	l := startCluster(t, 3)
	ctx := deadline(t, 20*time.Second)
	b, err := barrier.New(ctx, l, "phase-1", barrier.Max(4))
	if err != nil {
		t.Fatal(err)
	}
	var handles []*barrier.Barrier
	for i := range 2 {
		h, err := barrier.Open(ctx, l, "phase-1", barrier.Host(fmt.Sprintf("node-%d", i)))
		if err != nil {
			t.Fatal(err)
		}
		handles = append(handles, h)
	}
	res := enterAll(t, handles[0], "a", "b")
	// Nobody passes before all four entered.
	eventually(ctx, t, "two entries", func() bool { s, err := b.Status(ctx); return err == nil && s.Entered == 2 })
	select {
	case r := <-res:
		t.Fatalf("%s passed with 2 of 4 entered: %v", r.label, r.err)
	default:
	}
	res2 := enterAll(t, handles[1], "c", "d")
	for range 2 {
		for _, ch := range []<-chan result{res, res2} {
			r := <-ch
			if r.err != nil || r.pass.Reason != "max" || r.pass.Late {
				t.Fatalf("%s: pass %+v err %v", r.label, r.pass, r.err)
			}
		}
	}
	hosts, err := b.Hosts(ctx)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{"a": "node-0", "b": "node-0", "c": "node-1", "d": "node-1"}
	if fmt.Sprint(hosts) != fmt.Sprint(want) {
		t.Fatalf("hosts %v, want %v", hosts, want)
	}
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestTimeoutFiresEarlyAndLateLabelsPassThrough(t *testing.T) {
	l := startCluster(t, 3)
	ctx := deadline(t, 20*time.Second)
	b, err := barrier.New(ctx, l, "early", barrier.Max(5), barrier.Timeout(150*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range collect(enterAll(t, b, "a", "b"), 2) {
		if r.err != nil || r.pass.Reason != "timeout" {
			t.Fatalf("%s: %+v %v", r.label, r.pass, r.err)
		}
	}
	p, err := b.Enter(ctx, "late")
	if err != nil || !p.Late {
		t.Fatalf("late arrival: %+v %v", p, err)
	}
	s, err := b.Status(ctx)
	if err != nil || !s.Fired || s.Reason != "timeout" || len(s.Passed) != 3 || !s.Passed[2].Late {
		t.Fatalf("status %+v %v", s, err)
	}
}

func TestMinPercentAfterMinWait(t *testing.T) {
	l := startCluster(t, 2)
	ctx := deadline(t, 20*time.Second)
	b, err := barrier.New(ctx, l, "pct", barrier.Max(4), barrier.MinPercent(50), barrier.MinWait(30*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range collect(enterAll(t, b, "a", "b"), 2) {
		if r.err != nil || r.pass.Reason != "percent" {
			t.Fatalf("%s: %+v %v", r.label, r.pass, r.err)
		}
	}
}

func TestCatchUpRefusesLateLabels(t *testing.T) {
	l := startCluster(t, 2)
	ctx := deadline(t, 20*time.Second)
	b, err := barrier.New(ctx, l, "cu", barrier.Max(3), barrier.Timeout(20*time.Millisecond), barrier.CatchUp())
	if err != nil {
		t.Fatal(err)
	}
	if p, err := b.Enter(ctx, "first"); err != nil || p.Reason != "timeout" {
		t.Fatalf("first: %+v %v", p, err)
	}
	_, err = b.Enter(ctx, "late")
	if !errors.Is(err, barrier.ErrCatchUp) {
		t.Fatalf("late: %v, want ErrCatchUp", err)
	}
	hosts, err := b.Hosts(ctx)
	if err != nil || len(hosts) != 1 {
		t.Fatalf("hosts %v %v: a catch-up label does not pass", hosts, err)
	}
}

func collect(ch <-chan result, n int) []result {
	var out []result
	for range n {
		out = append(out, <-ch)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].label < out[j].label })
	return out
}

func TestEntryCallbackVetoesAndForces(t *testing.T) {
	l := startCluster(t, 3)
	ctx := deadline(t, 20*time.Second)
	var mu sync.Mutex
	var asked []barrier.Consultation
	b, err := barrier.New(ctx, l, "cb", barrier.Max(5), barrier.OnEnter(func(c barrier.Consultation) bool {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, c)
		return c.Entered >= 3 // veto until three entered
	}, 0))
	if err != nil {
		t.Fatal(err)
	}
	res := enterAll(t, b, "a", "b", "c")
	for _, r := range collect(res, 3) {
		if r.err != nil || r.pass.Reason != "forced" {
			t.Fatalf("%s: %+v %v", r.label, r.pass, r.err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 3 {
		t.Fatalf("callback asked %d times, want once per entry: %+v", len(asked), asked)
	}
	for i, c := range asked {
		if c.Label == "" || c.Entered != i+1 || c.Default {
			t.Fatalf("consultation %d: %+v", i, c)
		}
	}
}

func TestEntryCallbackTimeoutAsksWithoutEntries(t *testing.T) {
	l := startCluster(t, 2)
	ctx := deadline(t, 20*time.Second)
	var mu sync.Mutex
	var asked []barrier.Consultation
	b, err := barrier.New(ctx, l, "cb-timeout", barrier.Max(5), barrier.OnEnter(func(c barrier.Consultation) bool {
		mu.Lock()
		defer mu.Unlock()
		asked = append(asked, c)
		return c.Label == "" // fire when time, not an entry, asks
	}, 20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	p, err := b.Enter(ctx, "only")
	if err != nil || p.Reason != "forced" {
		t.Fatalf("%+v %v", p, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(asked) != 2 || asked[0].Label != "only" || asked[1].Label != "" || asked[1].Entered != 1 {
		t.Fatalf("consultations %+v: want the entry's, then one by the callback timeout", asked)
	}
}

func TestFireOnKnee(t *testing.T) {
	l := startCluster(t, 2)
	ctx := deadline(t, 20*time.Second)
	b, err := barrier.New(ctx, l, "knee", barrier.Max(10), barrier.FireOnKnee(), barrier.KneeWarmup(2))
	if err != nil {
		t.Fatal(err)
	}
	// Three quick arrivals, then none: the arrivals have a knee, and the
	// barrier fires there instead of waiting for ten.
	for _, r := range collect(enterAll(t, b, "a", "b", "c"), 3) {
		if r.err != nil {
			t.Fatalf("%s: %v", r.label, r.err)
		}
	}
	s, err := b.Status(ctx)
	if err != nil || !s.Fired || s.Reason != "knee" || len(s.Passed) != 3 {
		t.Fatalf("status %+v %v", s, err)
	}
}

func TestThrottledReleaseInBatches(t *testing.T) {
	l := startCluster(t, 3)
	ctx := deadline(t, 20*time.Second)
	b, err := barrier.New(ctx, l, "throttle", barrier.Max(6), barrier.Throttle(2, 20*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range collect(enterAll(t, b, "a", "b", "c", "d", "e", "f"), 6) {
		if r.err != nil || r.pass.Reason != "max" {
			t.Fatalf("%s: %+v %v", r.label, r.pass, r.err)
		}
	}
	s, err := b.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// Batches of two leave together (same release instant), in order.
	var batches [][]string
	for i, p := range s.Passed {
		if i == 0 || !p.At.Equal(s.Passed[i-1].At) {
			batches = append(batches, nil)
		}
		batches[len(batches)-1] = append(batches[len(batches)-1], p.Label)
	}
	if len(batches) != 3 || len(batches[0]) != 2 || len(batches[1]) != 2 || len(batches[2]) != 2 {
		t.Fatalf("release batches %v, want three of two", batches)
	}
}

func TestSemaphoreBoundsTheCriticalSection(t *testing.T) {
	l := startCluster(t, 3)
	ctx := deadline(t, 20*time.Second)
	for _, adaptive := range []bool{false, true} {
		name := fmt.Sprintf("sem-%v", adaptive)
		opts := []barrier.Option{barrier.Max(12), barrier.Semaphore(2)}
		limit := int32(2)
		if adaptive {
			opts = append(opts, barrier.Adaptive(3))
			limit = 3
		}
		b, err := barrier.New(ctx, l, name, opts...)
		if err != nil {
			t.Fatal(err)
		}
		var inside, most atomic.Int32
		var wg sync.WaitGroup
		errs := make(chan error, 12)
		for i := range 12 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				p, err := b.Enter(ctx, fmt.Sprintf("t%d", i))
				if err != nil {
					errs <- err
					return
				}
				n := inside.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				time.Sleep(time.Millisecond)
				inside.Add(-1)
				if err := p.Release(ctx); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
		if most.Load() > limit {
			t.Fatalf("%s: %d holders at once, limit %d", name, most.Load(), limit)
		}
		if s, err := b.Status(ctx); err != nil || len(s.Passed) != 12 {
			t.Fatalf("%s: status %+v %v", name, s, err)
		}
	}
}

func TestSemaphoreHolderTimeout(t *testing.T) {
	l := startCluster(t, 3)
	ev := watchEvents(t, l)
	ctx := deadline(t, 20*time.Second)
	failures := make(chan barrier.Failure, 4)
	ctrl, err := barrier.New(ctx, l, "holder", barrier.Max(2), barrier.Semaphore(1),
		barrier.HolderTimeout(40*time.Millisecond), barrier.OnFailure(func(f barrier.Failure) { failures <- f }))
	if err != nil {
		t.Fatal(err)
	}
	h, err := barrier.Open(ctx, l, "holder", barrier.Host("worker"))
	if err != nil {
		t.Fatal(err)
	}
	a, err := h.Enter(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	// a never releases: b gets in once a is presumed failed.
	bp, err := h.Enter(ctx, "b")
	if err != nil {
		t.Fatal(err)
	}
	if f := <-failures; f.Label != "a" || f.Host != "worker" || f.Reason == "" {
		t.Fatalf("failure %+v", f)
	}
	if err := a.Release(ctx); !errors.Is(err, messages.ErrTimeout) {
		t.Fatalf("release of a timed-out holder: %v, want TIMEOUT", err)
	}
	// (On a loaded machine b may hold too long as well.)
	if err := bp.Release(ctx); err != nil && !errors.Is(err, messages.ErrTimeout) {
		t.Fatal(err)
	}
	ev.waitFor(ctx, t, "DeliveryFailed event", func(ev *events) bool { return len(ev.failed) >= 1 && ev.failed[0].Label == "a" })
	if h.Stats().TimedOut < 1 {
		t.Fatalf("stats %+v", h.Stats())
	}
	_ = ctrl
}

func TestFailedParticipantsAreReported(t *testing.T) {
	l := startCluster(t, 3)
	ev := watchEvents(t, l)
	ctx := deadline(t, 20*time.Second)
	failures := make(chan barrier.Failure, 4)
	b, err := barrier.New(ctx, l, "fail", barrier.Max(3), barrier.OnFailure(func(f barrier.Failure) { failures <- f }))
	if err != nil {
		t.Fatal(err)
	}
	dying, err := barrier.Open(ctx, l, "fail", barrier.Host("doomed"))
	if err != nil {
		t.Fatal(err)
	}
	res := enterAll(t, dying, "a")
	eventually(ctx, t, "a entered", func() bool { s, err := b.Status(ctx); return err == nil && s.Entered == 1 })
	dying.Stop() // the participant fails after entering
	if r := <-res; !errors.Is(r.err, messages.ErrCanceled) {
		t.Fatalf("Enter of a stopped handle: %v", r.err)
	}
	for _, r := range collect(enterAll(t, b, "b", "c"), 2) {
		if r.err != nil {
			t.Fatal(r.err)
		}
	}
	// The fire could not be delivered to a: reported, not hung.
	if f := <-failures; f.Label != "a" || f.Host != "doomed" {
		t.Fatalf("failure %+v", f)
	}
	ev.waitFor(ctx, t, "DeliveryFailed", func(ev *events) bool { return len(ev.failed) == 1 })

	// A semaphore holder that fails frees its slot at once.
	sem, err := barrier.New(ctx, l, "fail-sem", barrier.Max(2), barrier.Semaphore(1), barrier.OnFailure(func(f barrier.Failure) { failures <- f }))
	if err != nil {
		t.Fatal(err)
	}
	holder, err := barrier.Open(ctx, l, "fail-sem")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := holder.Enter(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	next := enterAll(t, sem, "y")
	eventually(ctx, t, "y waiting", func() bool { s, err := sem.Status(ctx); return err == nil && s.Entered == 2 })
	holder.Stop()
	if r := <-next; r.err != nil {
		t.Fatal(r.err)
	}
	if f := <-failures; f.Label != "x" {
		t.Fatalf("failure %+v", f)
	}
}

// An Enter whose context ends answers then, even when its handle's actor
// is too busy to withdraw the waiter (here: held in the controller's entry
// callback, as a loaded machine held it for 1.5 s in chaos seed 15). The
// Enter returns TIMEOUT while the callback still holds the actor; the
// withdrawal completes after, and the barrier goes on.
func TestEnterAnswersAtItsDeadlineWhileItsHandleIsBusy(t *testing.T) {
	l := startCluster(t, 2)
	ctx := deadline(t, 20*time.Second)
	release := make(chan struct{})
	consulted := make(chan struct{}, 4)
	b, err := barrier.New(ctx, l, "busy-handle", barrier.Max(2), barrier.OnEnter(func(c barrier.Consultation) bool {
		consulted <- struct{}{}
		<-release
		return false
	}, time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		select {
		case <-release:
		default:
			close(release)
		}
	}()
	ectx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := b.Enter(ectx, "a")
		done <- err
	}()
	select {
	case <-consulted: // the actor is now held in the callback
	case <-ctx.Done():
		t.Fatal("the entry callback was never asked")
	}
	select {
	case err := <-done:
		if !errors.Is(err, messages.ErrTimeout) {
			t.Fatalf("Enter past its deadline: %v, want TIMEOUT", err)
		}
	case <-ctx.Done():
		t.Fatal("Enter did not answer while its handle's actor was busy: it waits for the withdrawal")
	}
	close(release)
	// The handle works on once the callback lets its actor go.
	if _, err := b.Status(ctx); err != nil {
		t.Fatalf("Status after the busy spell: %v", err)
	}
}
