package barrier

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/barrier/handle"
	"github.com/hoplite-go/hoplite/internal/barrier/participant"
	"github.com/hoplite-go/hoplite/internal/barrier/replica"
	"github.com/hoplite-go/hoplite/messages"
)

const maxReplicas = replica.MaxReplicas

var policyOptions = replica.PolicyOptions

// Cluster is what the API needs of a cluster: *cluster.Local,
// *cluster.Member (any member of a process cluster) and
// *cluster.BarrierClient (a process outside the cluster) have it.
type Cluster interface {
	// System is the actor system the handles' actors run in.
	System() *actor.ActorSystem
	// BarrierHosts lists the barrier hosts of the live members.
	BarrierHosts(ctx context.Context) ([]MemberHost, error)
	// ParticipantProps makes a handle's participant actor, which talks
	// to the replicas for it (the cluster's wiring supplies the actor, so
	// that this API imports no actor shell).
	ParticipantProps(cfg participant.Config) *actor.Props
}

// MemberHost is one cluster member's barrier host.
type MemberHost struct {
	// Member is the member's cluster id.
	Member string
	// PID is its barrier host actor.
	PID *actor.PID
}

// ErrCatchUp is returned (wrapped) by Enter when the label arrived after
// the barrier fired and the barrier was made with CatchUp (the paper's
// CATCH_UP exception): it did not pass.
var ErrCatchUp = errors.New("barrier: arrived after the fire: catch up")

// Barrier is a handle on one barrier. It is safe for concurrent use: many
// goroutines may Enter different labels through one handle.
type Barrier struct {
	name      string
	sys       *actor.ActorSystem
	pid       *actor.PID // this handle's participant actor
	members   []string   // the replicas' members, primary first
	opts      *messages.BarrierOptions
	host      string
	wait      time.Duration
	ids       atomic.Uint64
	stopped   atomic.Bool
	counters  *participant.Counters
	gone      chan struct{} // closed when the handle's actor stopped
	semaphore bool
}

// Pass is a label that passed the barrier.
type Pass struct {
	Label, Host string
	// Late: the label arrived after the fire and passed anyway
	// (pass-through, the paper's LATE_FIRE).
	Late bool
	// Reason the barrier fired: max, timeout, percent, knee, forced
	// ("semaphore" on a semaphore barrier; empty when Late).
	Reason string
	b      *Barrier
}

// Release leaves a semaphore barrier's critical section, letting the next
// label in. On other barriers it does nothing.
func (p *Pass) Release(ctx context.Context) error {
	if p == nil || !p.b.semaphore {
		return nil
	}
	return p.b.Release(ctx, p.Label)
}

// Stats counts what a handle's actor ignored.
type Stats struct {
	// Duplicates: outcomes received again for a label already answered
	// (a new primary re-sends what the old one decided).
	Duplicates int64
	// Conflicts: a second outcome of another kind for an answered label.
	// Never expected.
	Conflicts int64
	// Orphans: outcomes for labels nobody waits for (a canceled Enter).
	Orphans int64
	// TimedOut: semaphore holders of this handle presumed failed.
	TimedOut int64
}

// Status is a barrier's state as its acting primary sees it.
type Status struct {
	Entered int
	Fired   bool
	Reason  string
	// Passed lists the labels that passed, in order.
	Passed []Passage
	// Epoch grows at each takeover; Primary (a member id) answered.
	Epoch   uint64
	Primary string
}

// Passage is one label that passed.
type Passage struct {
	Label, Host string
	Late        bool
	At          time.Time // when the primary released it
}

// New creates barrier name with opts (Max is required) and returns a
// handle on it; this handle is the barrier's controller: its OnEnter and
// OnFailure callbacks run. If the barrier exists with the same options
// and New has no callbacks, New joins it; other options fail with
// CONFLICT, a closed barrier with DELETED.
func New(ctx context.Context, c Cluster, name string, opts ...Option) (*Barrier, error) {
	cfg := newConfig(opts)
	if err := replica.CheckName(name); err != nil {
		return nil, err
	}
	wire, err := cfg.options()
	if err != nil {
		return nil, err
	}
	ctx, cancel := withWait(ctx, cfg.wait)
	defer cancel()
	found, err := find(ctx, c, name)
	switch {
	case err == nil:
		return join(c, name, cfg, wire, found)
	case !errors.Is(err, messages.ErrNotFound):
		return nil, err
	}
	hosts, err := c.BarrierHosts(ctx)
	if err != nil {
		return nil, err
	}
	live := Placement(name, hosts)
	if len(live) == 0 {
		return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "no live member for barrier %q", name)
	}
	all := live
	live = live[:min(cfg.replicas, len(live))]
	b := newHandle(c, name, cfg, wire)
	create := &messages.BarrierCreate{Name: name, Options: wire, Controller: replica.Peer(b.pid)}
	for _, h := range live {
		create.Replicas = append(create.Replicas, replica.Peer(h.PID))
		create.ReplicaMembers = append(create.ReplicaMembers, h.Member)
	}
	fanout := cfg.fanout
	if !cfg.fanoutSet {
		fanout = -1 // by the cluster's size
	}
	create.Tree = treeShape(all, create.Replicas, wire, fanout)
	res, err := ask(ctx, c.System().Root, live[0].PID, create)
	if err == nil {
		created, ok := res.(*messages.BarrierCreated)
		switch {
		case !ok:
			err = messages.Errorf(messages.ErrorCode_INTERNAL, "unexpected reply %T to BarrierCreate", res)
		case created.GetError() != nil:
			err = created.GetError()
		case created.GetExisted() && (cfg.onEnter != nil || cfg.onFailure != nil):
			err = messages.Errorf(messages.ErrorCode_CONFLICT, "barrier %q was created meanwhile by another controller", name)
		default:
			b.setup(created)
			if !created.GetExisted() {
				createBackups(c, create)
			}
			return b, nil
		}
	}
	b.Stop()
	return nil, err
}

// createBackups asks the backups' hosts to create their replicas, as the
// primary did when it answered. A primary that dies right after its
// answer may not have sent its own requests, and a barrier without
// backups dies with it; the handle's requests are sent before any later
// request of its own, and a host that has the replica ignores them.
func createBackups(c Cluster, create *messages.BarrierCreate) {
	for rank := 1; rank < len(create.GetReplicas()); rank++ {
		b := proto.Clone(create).(*messages.BarrierCreate)
		b.Rank, b.FromPrimary = int32(rank), true
		c.System().Root.Send(replica.PeerPID(create.GetReplicas()[rank]), b)
	}
}

// Open returns a handle on an existing barrier (NOT_FOUND if there is
// none, DELETED if it closed). Only Host and DefaultWait apply.
func Open(ctx context.Context, c Cluster, name string, opts ...Option) (*Barrier, error) {
	cfg := newConfig(opts)
	if err := replica.CheckName(name); err != nil {
		return nil, err
	}
	if cfg.shaped {
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "Open takes only Host and DefaultWait; barrier options belong to New")
	}
	if cfg.wait <= 0 {
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "DefaultWait=%v must be positive", cfg.wait)
	}
	ctx, cancel := withWait(ctx, cfg.wait)
	defer cancel()
	found, err := find(ctx, c, name)
	if err != nil {
		return nil, err
	}
	return join(c, name, cfg, found.GetOptions(), found)
}

func join(c Cluster, name string, cfg *config, wire *messages.BarrierOptions, found *messages.BarrierCreated) (*Barrier, error) {
	if !proto.Equal(wire, found.GetOptions()) {
		return nil, messages.Errorf(messages.ErrorCode_CONFLICT, "barrier %q exists with other options", name)
	}
	if cfg.onEnter != nil || cfg.onFailure != nil {
		return nil, messages.Errorf(messages.ErrorCode_CONFLICT, "barrier %q exists: its callbacks belong to its creator (use Open)", name)
	}
	b := newHandle(c, name, cfg, found.GetOptions())
	b.setup(found)
	return b, nil
}

// find asks every live member at once for the barrier (one round trip,
// not one per member: a cluster may have many, and the barrier's
// replicas need not be where the placement puts the name now).
func find(ctx context.Context, c Cluster, name string) (*messages.BarrierCreated, error) {
	hosts, err := c.BarrierHosts(ctx)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // the other asks stop once one found it
	pids := make([]*actor.PID, len(hosts))
	for i, h := range hosts {
		pids[i] = h.PID
	}
	answers := actorutil.RequestAll(ctx, c.System().Root, pids, &messages.BarrierOpen{Name: name}, handle.ReaskEvery)
	var last error = messages.Errorf(messages.ErrorCode_NOT_FOUND, "no barrier %q", name)
	var stop error // an answer that decides unless another member has it
	for range hosts {
		a := <-answers
		created, err := openAnswer(a.Msg, a.Err)
		switch {
		case err == nil:
			return created, nil
		case errors.Is(err, messages.ErrTimeout) || errors.Is(err, messages.ErrCanceled):
			if stop == nil {
				stop = err
			}
		case errors.Is(err, messages.ErrNotFound):
			last = err
		case errors.Is(err, messages.ErrUnavailable):
			// that member is going away; another replica may answer
		default:
			if stop == nil {
				stop = err // DELETED, INTERNAL: unless a replica has it
			}
		}
	}
	if stop != nil {
		return nil, stop
	}
	return nil, last
}

// openAnswer is one host's answer to BarrierOpen: the barrier, or why not.
func openAnswer(res any, err error) (*messages.BarrierCreated, error) {
	if err != nil {
		return nil, err
	}
	created, ok := res.(*messages.BarrierCreated)
	if !ok {
		return nil, messages.Errorf(messages.ErrorCode_INTERNAL, "unexpected reply %T to BarrierOpen", res)
	}
	return created, messages.ErrOrNil(created.GetError())
}

// ask requests msg of pid until it answers or ctx ends, asking again
// after handle.ReaskEvery, then less often: one request, or its answer,
// lost in transit (a connection that broke under load) otherwise failed
// the whole New or Open with TIMEOUT at its deadline, although every
// member lived (chaos seed 14). An answer to any of the asks counts: on a
// loaded machine a round trip takes longer than ReaskEvery, and asks that
// each waited only that long for their own answer never got one. Open is
// read-only, and a host answers a creator's repeated create as it
// answered the first (replica.Replica.Created).
func ask(ctx context.Context, root *actor.RootContext, pid *actor.PID, msg proto.Message) (any, error) {
	return actorutil.RequestEvery(ctx, root, pid, msg, handle.ReaskEvery)
}

func newHandle(c Cluster, name string, cfg *config, wire *messages.BarrierOptions) *Barrier {
	b := &Barrier{name: name, sys: c.System(), opts: wire, host: cfg.host, wait: cfg.wait,
		counters: &participant.Counters{}, gone: make(chan struct{}), semaphore: wire.GetSemaphore() != nil}
	b.pid = b.sys.Root.Spawn(c.ParticipantProps(participant.Config{Name: name, OnEnter: cfg.onEnter,
		OnFailure: cfg.onFailure, Counters: b.counters, Gone: b.gone}))
	return b
}

func (b *Barrier) setup(created *messages.BarrierCreated) {
	s := participant.Setup{Max: int(created.GetOptions().GetMaxParticipants()), Semaphore: created.GetOptions().GetSemaphore() != nil,
		Tree: created.GetTree()}
	for _, p := range created.GetReplicas() {
		s.Replicas = append(s.Replicas, replica.PeerPID(p))
	}
	b.members = append(b.members, created.GetReplicaMembers()...)
	b.sys.Root.Send(b.pid, s)
}

// Name is the barrier's name.
func (b *Barrier) Name() string { return b.name }

// Replicas lists the members hosting the barrier's managers, primary
// first.
func (b *Barrier) Replicas() []string { return append([]string(nil), b.members...) }

// Stats counts what this handle ignored.
func (b *Barrier) Stats() Stats {
	return Stats{Duplicates: b.counters.Dup.Load(), Conflicts: b.counters.Conflict.Load(),
		Orphans: b.counters.Orphan.Load(), TimedOut: b.counters.TimedOut.Load()}
}

// Enter enters label and waits until it passes (the barrier fires, or on
// a semaphore barrier the label is admitted). It fails with ErrCatchUp
// (wrapped) for a late label of a CatchUp barrier, with UNAVAILABLE at
// once when every replica lost the barrier's state (each manager crashed
// and restarted empty, and none that held the state was left to give it
// back; no replica without it leads, so the barrier cannot go on), and
// with typed errors otherwise. An Enter whose context ends has still
// entered the barrier
// (on a semaphore, the handle gives back the slot if it is admitted
// later).
func (b *Barrier) Enter(ctx context.Context, label string) (*Pass, error) {
	if err := replica.CheckLabel(label, b.host); err != nil {
		return nil, err
	}
	if b.stopped.Load() {
		return nil, b.errStopped()
	}
	ctx, cancel := withWait(ctx, b.wait)
	defer cancel()
	id := b.ids.Add(1)
	ch := make(chan participant.EnterResult, 1)
	b.sys.Root.Send(b.pid, participant.EnterRequest{ID: id, Label: label, Host: b.host, Reply: ch})
	select {
	case r := <-ch:
		return b.passOrError(label, r)
	case <-ctx.Done():
	}
	// Withdraw the waiter. An outcome that raced the deadline is returned
	// rather than dropped: on a semaphore it holds a slot. (One that comes
	// later finds no waiter, and the handle gives such a slot back.) The
	// withdrawal waits at most withdrawWait: on a busy machine the
	// handle's actor took 1.5 s to get to it, and the call answered that
	// long past its deadline (chaos seed 15 under load). Past that the
	// caller has its TIMEOUT, and a goroutine sees the withdrawal through:
	// an outcome that came before it is given back there.
	if !b.stopped.Load() {
		withdrawn := make(chan struct{})
		b.sys.Root.Send(b.pid, participant.CancelRequest{ID: id, Label: label, Done: withdrawn})
		t := time.NewTimer(withdrawWait)
		defer t.Stop()
		select {
		case <-withdrawn:
		case <-b.gone: // the handle's actor stopped meanwhile
		case <-t.C:
			go b.giveBackLate(label, ch, withdrawn)
			return nil, deadlineError(ctx, "barrier %q: %q did not pass", b.name, label)
		}
	}
	select {
	case r := <-ch:
		return b.passOrError(label, r)
	default:
	}
	return nil, deadlineError(ctx, "barrier %q: %q did not pass", b.name, label)
}

// withdrawWait bounds how long an Enter whose context ended waits for its
// waiter to be withdrawn before it answers.
const withdrawWait = 100 * time.Millisecond

// giveBackLate waits until an abandoned Enter's waiter is withdrawn (or
// the handle's actor stopped) and releases the slot of an outcome that
// reached it first: nobody is there to take it, and on a semaphore it
// would hold a holder's place until the holder timeout.
func (b *Barrier) giveBackLate(label string, ch <-chan participant.EnterResult, withdrawn <-chan struct{}) {
	select {
	case <-withdrawn:
	case <-b.gone:
		return
	}
	select {
	case r := <-ch:
		if pass, err := b.passOrError(label, r); err == nil && !pass.Late {
			ctx, cancel := context.WithTimeout(context.Background(), b.wait)
			defer cancel()
			_ = pass.Release(ctx)
		}
	default:
	}
}

func (b *Barrier) passOrError(label string, r participant.EnterResult) (*Pass, error) {
	switch {
	case r.Err != nil:
		return nil, r.Err
	case r.Kind == participant.CatchUp:
		return nil, fmt.Errorf("%w: %q on barrier %q", ErrCatchUp, label, b.name)
	}
	return &Pass{Label: label, Host: b.host, Late: r.Kind == participant.Late, Reason: r.Reason, b: b}, nil
}

// Release tells a semaphore barrier that label left the critical section.
// A label that never entered, or a barrier that is no semaphore, fails
// with INVALID_ARGUMENT; a label still waiting with CONFLICT; a holder
// already timed out with TIMEOUT, and a second Release of a label with
// CONFLICT. The handle asks every second until a primary answers (a backup
// that took over may not have heard the first time), and a primary
// answers a repeat of the Release that committed as it did the first.
func (b *Barrier) Release(ctx context.Context, label string) error {
	if err := replica.CheckLabel(label, ""); err != nil {
		return err
	}
	res, err := b.call(ctx, func(id uint64, rank int32) proto.Message {
		return &messages.BarrierRelease{Name: b.name, Label: label, RequestId: id, ToRank: rank}
	})
	if err != nil {
		return err
	}
	r, ok := res.(*messages.BarrierReleased)
	if !ok {
		return messages.Errorf(messages.ErrorCode_INTERNAL, "unexpected reply %T to BarrierRelease", res)
	}
	return messages.ErrOrNil(r.GetError())
}

// Status asks the acting primary for the barrier's state.
func (b *Barrier) Status(ctx context.Context) (Status, error) {
	res, err := b.call(ctx, func(id uint64, rank int32) proto.Message {
		return &messages.BarrierStatus{Name: b.name, RequestId: id, ToRank: rank}
	})
	if err != nil {
		return Status{}, err
	}
	r, ok := res.(*messages.BarrierStatusReply)
	if !ok {
		return Status{}, messages.Errorf(messages.ErrorCode_INTERNAL, "unexpected reply %T to BarrierStatus", res)
	}
	if err := messages.ErrOrNil(r.GetError()); err != nil {
		return Status{}, err
	}
	s := Status{Entered: int(r.GetEntered()), Fired: r.GetFired(), Reason: r.GetReason(), Epoch: r.GetEpoch(), Primary: r.GetPrimary()}
	for _, p := range r.GetPassed() {
		s.Passed = append(s.Passed, Passage{Label: p.GetLabel(), Host: p.GetHost(), Late: p.GetLate(), At: time.Unix(0, p.GetAtUnixNano())})
	}
	return s, nil
}

// Hosts maps every label that passed to its host (the paper's getHosts).
func (b *Barrier) Hosts(ctx context.Context) (map[string]string, error) {
	s, err := b.Status(ctx)
	if err != nil {
		return nil, err
	}
	m := make(map[string]string, len(s.Passed))
	for _, p := range s.Passed {
		m[p.Label] = p.Host
	}
	return m, nil
}

// Close closes the barrier for everyone: waiting labels fail with
// DELETED, and so does every later call. It also stops this handle.
// It returns once every live replica applied the close, so that no
// replica answers the barrier open afterwards (Open anywhere answers
// DELETED); a replica whose member the cluster declared failed (its
// failure notice was delivered and accepted) is not waited for. A live replica that does not
// acknowledge within the barrier's TakeoverAfter makes it fail with
// TIMEOUT: the barrier is closed, but that replica may answer it open
// until it hears the close.
func (b *Barrier) Close(ctx context.Context) error {
	res, err := b.call(ctx, func(id uint64, rank int32) proto.Message {
		return &messages.BarrierClose{Name: b.name, RequestId: id, ToRank: rank}
	})
	if err != nil {
		return err
	}
	b.Stop()
	r, ok := res.(*messages.BarrierClosed)
	if !ok {
		return messages.Errorf(messages.ErrorCode_INTERNAL, "unexpected reply %T to BarrierClose", res)
	}
	return messages.ErrOrNil(r.GetError())
}

// Stop stops this handle (not the barrier) and returns once its actor
// stopped: its waiting calls fail with CANCELED and later calls fail at
// once. The managers see its participant fail: OnFailure hears of its
// labels still due a release, and its semaphore slots are freed.
func (b *Barrier) Stop() {
	if b.stopped.CompareAndSwap(false, true) {
		_ = b.sys.Root.StopFuture(b.pid).Wait()
	}
}

func (b *Barrier) errStopped() error {
	return messages.Errorf(messages.ErrorCode_CANCELED, "barrier %q: handle stopped", b.name)
}

// call sends a request built per replica and waits for the primary's
// answer.
func (b *Barrier) call(ctx context.Context, build func(id uint64, rank int32) proto.Message) (proto.Message, error) {
	if b.stopped.Load() {
		return nil, b.errStopped()
	}
	ctx, cancel := withWait(ctx, b.wait)
	defer cancel()
	id := b.ids.Add(1)
	ch := make(chan proto.Message, 1)
	b.sys.Root.Send(b.pid, participant.CallRequest{ID: id, Build: build, Reply: ch})
	select {
	case r := <-ch:
		if r == nil {
			return nil, b.errStopped()
		}
		return r, nil
	case <-ctx.Done():
		b.sys.Root.Send(b.pid, participant.CancelRequest{ID: id})
		return nil, deadlineError(ctx, "barrier %q: no answer", b.name)
	}
}

// withWait gives ctx a deadline if it has none.
func withWait(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, d)
}

func deadlineError(ctx context.Context, format string, args ...any) error {
	code := messages.ErrorCode_TIMEOUT
	if errors.Is(ctx.Err(), context.Canceled) {
		code = messages.ErrorCode_CANCELED
	}
	return messages.Errorf(code, format+": %v", append(args, ctx.Err())...)
}
