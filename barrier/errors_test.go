package barrier_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/barrier"
	"github.com/hoplite-go/hoplite/internal/barrier/policy"
	"github.com/hoplite-go/hoplite/messages"
)

func TestBadOptionsAreInvalidArgument(t *testing.T) {
	l := startCluster(t, 2)
	ctx := deadline(t, 20*time.Second)
	cases := []struct {
		name string
		opts []barrier.Option
		want error
	}{
		{"no max", nil, policy.ErrBadMax},
		{"max 0", []barrier.Option{barrier.Max(0)}, policy.ErrBadMax},
		{"max negative", []barrier.Option{barrier.Max(-3)}, policy.ErrBadMax},
		{"percent 150", []barrier.Option{barrier.Max(4), barrier.MinPercent(150)}, policy.ErrBadPercent},
		{"percent -1", []barrier.Option{barrier.Max(4), barrier.MinPercent(-1)}, policy.ErrBadPercent},
		{"negative timeout", []barrier.Option{barrier.Max(4), barrier.Timeout(-time.Second)}, policy.ErrNegativeDuration},
		{"tiny negative min wait", []barrier.Option{barrier.Max(4), barrier.MinWait(-time.Microsecond)}, policy.ErrNegativeDuration},
		{"negative callback timeout", []barrier.Option{barrier.Max(4), barrier.OnEnter(func(barrier.Consultation) bool { return false }, -time.Second)}, policy.ErrNegativeDuration},
		{"negative holder timeout", []barrier.Option{barrier.Max(4), barrier.Semaphore(1), barrier.HolderTimeout(-time.Second)}, policy.ErrNegativeDuration},
		{"negative takeover", []barrier.Option{barrier.Max(4), barrier.TakeoverAfter(-time.Second)}, policy.ErrNegativeDuration},
		{"semaphore 0", []barrier.Option{barrier.Max(4), barrier.Semaphore(0)}, policy.ErrBadSemaphore},
		{"holder timeout without semaphore", []barrier.Option{barrier.Max(4), barrier.HolderTimeout(time.Second)}, policy.ErrConflictingOption},
		{"semaphore with timeout", []barrier.Option{barrier.Max(4), barrier.Semaphore(1), barrier.Timeout(time.Second)}, policy.ErrConflictingOption},
		{"throttle without interval", []barrier.Option{barrier.Max(4), barrier.Throttle(2, 0)}, policy.ErrBadThrottle},
		{"throttle percent 101", []barrier.Option{barrier.Max(4), barrier.ThrottlePercent(101, time.Second)}, policy.ErrBadPercent},
		{"nil callback", []barrier.Option{barrier.Max(4), barrier.OnEnter(nil, 0)}, policy.ErrConflictingOption},
		{"zero replicas", []barrier.Option{barrier.Max(4), barrier.Replicas(0)}, policy.ErrInvalidOptions},
		{"warmup 1", []barrier.Option{barrier.Max(4), barrier.FireOnKnee(), barrier.KneeWarmup(1)}, policy.ErrBadWarmup},
	}
	for _, c := range cases {
		_, err := barrier.New(ctx, l, "bad", c.opts...)
		if !errors.Is(err, messages.ErrInvalidArgument) || !errors.Is(err, c.want) {
			t.Errorf("%s: %v, want INVALID_ARGUMENT and %v", c.name, err, c.want)
		}
	}
	if _, err := barrier.New(ctx, l, "", barrier.Max(1)); !errors.Is(err, messages.ErrInvalidArgument) {
		t.Errorf("empty name: %v", err)
	}
	if _, err := barrier.New(ctx, l, strings.Repeat("n", 300), barrier.Max(1)); !errors.Is(err, messages.ErrInvalidArgument) {
		t.Errorf("long name: %v", err)
	}
	if _, err := barrier.New(ctx, l, "x", barrier.Max(1), barrier.DefaultWait(0)); !errors.Is(err, messages.ErrInvalidArgument) {
		t.Errorf("zero DefaultWait: %v", err)
	}
	// Nothing was created by the failed calls.
	if _, err := barrier.Open(ctx, l, "bad"); !errors.Is(err, messages.ErrNotFound) {
		t.Errorf("open after failed creates: %v, want NOT_FOUND", err)
	}
}

// The managers validate what reaches them over the network themselves.
func TestManagersRejectBadMessages(t *testing.T) {
	l := startCluster(t, 2)
	root := l.System().Root
	ask := func(node int, msg any) any {
		t.Helper()
		res, err := root.RequestFuture(l.Barriers(node), msg, 5*time.Second).Result()
		if err != nil {
			t.Fatal(err)
		}
		return res
	}
	peer := &messages.BarrierPeer{Address: l.Barriers(0).GetAddress(), Id: l.Barriers(0).GetId()}
	bad := []*messages.BarrierCreate{
		{Name: "raw", Options: &messages.BarrierOptions{MaxParticipants: 0}, Replicas: []*messages.BarrierPeer{peer}},
		{Name: "raw", Options: &messages.BarrierOptions{MaxParticipants: 2, MinPercent: 101}, Replicas: []*messages.BarrierPeer{peer}},
		{Name: "raw", Options: &messages.BarrierOptions{MaxParticipants: 2, TimeoutMs: -5}, Replicas: []*messages.BarrierPeer{peer}},
		{Name: "raw", Options: &messages.BarrierOptions{MaxParticipants: 2, LateMode: 7}, Replicas: []*messages.BarrierPeer{peer}},
		{Name: "raw", Options: nil, Replicas: []*messages.BarrierPeer{peer}},
		{Name: "raw", Options: &messages.BarrierOptions{MaxParticipants: 2}},                                        // no replicas
		{Name: "raw", Options: &messages.BarrierOptions{MaxParticipants: 2}, Replicas: []*messages.BarrierPeer{{}}}, // unnamed
		{Name: "", Options: &messages.BarrierOptions{MaxParticipants: 2}, Replicas: []*messages.BarrierPeer{peer}},
	}
	for i, m := range bad {
		r, ok := ask(0, m).(*messages.BarrierCreated)
		if !ok || !errors.Is(messages.ErrOrNil(r.GetError()), messages.ErrInvalidArgument) {
			t.Errorf("bad create %d: %v", i, r)
		}
	}
	// Replica list naming another host as this one.
	other := &messages.BarrierPeer{Address: l.Barriers(1).GetAddress(), Id: l.Barriers(1).GetId()}
	r := ask(0, &messages.BarrierCreate{Name: "raw", Options: &messages.BarrierOptions{MaxParticipants: 2}, Replicas: []*messages.BarrierPeer{other}}).(*messages.BarrierCreated)
	if !errors.Is(messages.ErrOrNil(r.GetError()), messages.ErrInvalidArgument) {
		t.Errorf("create at the wrong host: %v", r)
	}
	// Unknown barrier.
	if r := ask(0, &messages.BarrierEnter{Name: "nope", Label: "x"}).(*messages.BarrierRefused); !errors.Is(messages.ErrOrNil(r.GetError()), messages.ErrNotFound) {
		t.Errorf("enter unknown: %v", r)
	}
	if r := ask(0, &messages.BarrierRelease{Name: "nope", Label: "x"}).(*messages.BarrierReleased); !errors.Is(messages.ErrOrNil(r.GetError()), messages.ErrNotFound) {
		t.Errorf("release unknown: %v", r)
	}
	if r := ask(0, &messages.BarrierStatus{Name: "nope"}).(*messages.BarrierStatusReply); !errors.Is(messages.ErrOrNil(r.GetError()), messages.ErrNotFound) {
		t.Errorf("status unknown: %v", r)
	}
	// A bad label on a real barrier.
	ctx := deadline(t, 10*time.Second)
	b, err := barrier.New(ctx, l, "real", barrier.Max(2), barrier.Replicas(1))
	if err != nil {
		t.Fatal(err)
	}
	home := l.Barriers(l.IndexOf(b.Replicas()[0]))
	res, err := root.RequestFuture(home, &messages.BarrierEnter{Name: "real", Label: ""}, 5*time.Second).Result()
	if err != nil || !errors.Is(messages.ErrOrNil(res.(*messages.BarrierRefused).GetError()), messages.ErrInvalidArgument) {
		t.Errorf("empty label: %v %v", res, err)
	}
	// Garbage of an unknown type is dropped, and the host still works.
	root.Send(home, "garbage")
	root.Send(home, &messages.BarrierReplicate{Name: "real", FromRank: 99, Op: &messages.BarrierOp{Kind: 42}})
	root.Send(home, &messages.BarrierDecide{Name: "real", Fire: true})
	if s, err := b.Status(ctx); err != nil || s.Fired {
		t.Errorf("status after garbage: %+v %v", s, err)
	}
}

func TestBadCalls(t *testing.T) {
	l := startCluster(t, 3)
	ctx := deadline(t, 20*time.Second)
	if _, err := barrier.Open(ctx, l, "missing"); !errors.Is(err, messages.ErrNotFound) {
		t.Fatalf("open unknown: %v", err)
	}
	b, err := barrier.New(ctx, l, "calls", barrier.Max(2), barrier.Timeout(10*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := barrier.New(ctx, l, "calls", barrier.Max(3)); !errors.Is(err, messages.ErrConflict) {
		t.Fatalf("new with other options: %v", err)
	}
	same, err := barrier.New(ctx, l, "calls", barrier.Max(2), barrier.Timeout(10*time.Millisecond))
	if err != nil {
		t.Fatalf("new with the same options joins: %v", err)
	}
	same.Stop()
	if _, err := barrier.Open(ctx, l, "calls", barrier.Max(2)); !errors.Is(err, messages.ErrInvalidArgument) {
		t.Fatalf("open with barrier options: %v", err)
	}
	if _, err := b.Enter(ctx, ""); !errors.Is(err, messages.ErrInvalidArgument) {
		t.Fatalf("empty label: %v", err)
	}
	if _, err := b.Enter(ctx, strings.Repeat("l", 1000)); !errors.Is(err, messages.ErrInvalidArgument) {
		t.Fatalf("long label: %v", err)
	}
	if _, err := b.Enter(ctx, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Enter(ctx, "a"); !errors.Is(err, messages.ErrConflict) {
		t.Fatalf("duplicate label: %v, want CONFLICT", err)
	}
	if _, err := b.Enter(ctx, "b"); err != nil {
		t.Fatal(err) // late, passes through
	}
	if _, err := b.Enter(ctx, "c"); !errors.Is(err, messages.ErrCapacity) {
		t.Fatalf("more labels than Max: %v, want CAPACITY", err)
	}
	if err := b.Release(ctx, "a"); !errors.Is(err, messages.ErrInvalidArgument) {
		t.Fatalf("release on a barrier that is no semaphore: %v", err)
	}

	sem, err := barrier.New(ctx, l, "sem-calls", barrier.Max(5), barrier.Semaphore(1))
	if err != nil {
		t.Fatal(err)
	}
	if err := sem.Release(ctx, "never"); !errors.Is(err, messages.ErrInvalidArgument) {
		t.Fatalf("release without enter: %v, want INVALID_ARGUMENT", err)
	}
	p, err := sem.Enter(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	waiting := enterAll(t, sem, "y")
	eventually(ctx, t, "y waiting", func() bool { s, err := sem.Status(ctx); return err == nil && s.Entered == 2 })
	if err := sem.Release(ctx, "y"); !errors.Is(err, messages.ErrConflict) {
		t.Fatalf("release of a waiting label: %v, want CONFLICT", err)
	}
	if err := p.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if err := p.Release(ctx); !errors.Is(err, messages.ErrConflict) {
		t.Fatalf("second release: %v, want CONFLICT", err)
	}
	r := <-waiting
	if r.err != nil {
		t.Fatal(r.err)
	}
	// An admission that comes after its Enter gave up is handed back.
	short := deadline(t, 20*time.Millisecond)
	if _, err := sem.Enter(short, "gives-up"); !errors.Is(err, messages.ErrTimeout) {
		t.Fatalf("enter past its deadline: %v, want TIMEOUT", err)
	}
	if err := r.pass.Release(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := sem.Enter(ctx, "after"); err != nil {
		t.Fatalf("the slot of an abandoned admission was not handed back: %v", err)
	}
	if st := sem.Stats(); st.Orphans != 1 {
		t.Fatalf("stats %+v", st)
	}

	// A deadline that passes while waiting is a TIMEOUT.
	slow, err := barrier.New(ctx, l, "slow", barrier.Max(2))
	if err != nil {
		t.Fatal(err)
	}
	short = deadline(t, 20*time.Millisecond)
	if _, err := slow.Enter(short, "a"); !errors.Is(err, messages.ErrTimeout) {
		t.Fatalf("enter past its deadline: %v, want TIMEOUT", err)
	}
}

func TestClosedBarrier(t *testing.T) {
	l := startCluster(t, 3)
	ctx := deadline(t, 20*time.Second)
	b, err := barrier.New(ctx, l, "closing", barrier.Max(3))
	if err != nil {
		t.Fatal(err)
	}
	h, err := barrier.Open(ctx, l, "closing")
	if err != nil {
		t.Fatal(err)
	}
	res := enterAll(t, h, "a")
	eventually(ctx, t, "a waiting", func() bool { s, err := b.Status(ctx); return err == nil && s.Entered == 1 })
	if err := b.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if r := <-res; !errors.Is(r.err, messages.ErrDeleted) {
		t.Fatalf("waiting through a close: %v, want DELETED", r.err)
	}
	if _, err := h.Enter(ctx, "b"); !errors.Is(err, messages.ErrDeleted) {
		t.Fatalf("enter a closed barrier: %v, want DELETED", err)
	}
	if _, err := h.Status(ctx); !errors.Is(err, messages.ErrDeleted) {
		t.Fatalf("status of a closed barrier: %v, want DELETED", err)
	}
	if _, err := barrier.Open(ctx, l, "closing"); !errors.Is(err, messages.ErrDeleted) {
		t.Fatalf("open a closed barrier: %v, want DELETED", err)
	}
	if _, err := barrier.New(ctx, l, "closing", barrier.Max(3)); !errors.Is(err, messages.ErrDeleted) {
		t.Fatalf("recreate a closed barrier: %v, want DELETED", err)
	}
	if _, err := b.Enter(ctx, "c"); !errors.Is(err, messages.ErrCanceled) {
		t.Fatalf("enter through the closing handle: %v, want CANCELED", err)
	}
}
