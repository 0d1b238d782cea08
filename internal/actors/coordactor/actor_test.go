package coordactor

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/internal/netmodel/estimator"
	"github.com/hoplite-go/hoplite/internal/reduction"
	"github.com/hoplite-go/hoplite/messages"
)

// fakeShard is the coordinator's parent: it spawns it, and answers every
// Subscribe with the source's one complete copy. With stopped set it
// watches the coordinator and calls stopped once when it ends.
type fakeShard struct {
	props   *actor.Props
	holders map[string]*messages.NodeRef
	size    int64
	stopped func()
	once    sync.Once
}

func (s *fakeShard) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		pid := ctx.Spawn(s.props)
		if s.stopped != nil {
			ctx.Watch(pid)
		}
	case *messages.Subscribe:
		if n := s.holders[m.GetObjectId()]; n != nil {
			ctx.Respond(&messages.LocationUpdate{ObjectId: m.GetObjectId(), Size: s.size, Node: n, State: messages.LocationState_COMPLETE})
		}
	case *actor.Terminated:
		if s.stopped != nil {
			s.once.Do(s.stopped) // the coordinator, as the shard's child and as watched
		}
	}
}

// spawnSumReduce starts the coordinator of a SUM of the sources ids
// (1 MiB each, on holders' nodes, called from src-0's) under a
// fakeShard, with cfg's Reduce and estimator, and waits for its answer,
// which must be a success. stopped, if set, is called when the
// coordinator ends.
func spawnSumReduce(t *testing.T, system *actor.ActorSystem, cfg ActorConfig, holders map[string]*messages.NodeRef, ids []string, stopped func()) {
	t.Helper()
	replies := make(chan *messages.ReduceReply, 1)
	requester := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if r, ok := ctx.Message().(*messages.ReduceReply); ok {
			replies <- r
		}
	}))
	var shardPID *actor.PID
	var mu sync.Mutex
	cfg.ShardFor = func(string) *actor.PID {
		mu.Lock()
		defer mu.Unlock()
		return shardPID
	}
	start := &messages.StartReduce{Reduce: &messages.Reduce{TargetId: "sum", SourceIds: ids, NumObjects: int32(len(ids)),
		Op: messages.ReduceOp_SUM, Dtype: messages.DType_FLOAT32, TimeoutMs: 10_000}, Caller: holders["src-0"]}
	props := NewProps(cfg, "sum#1", start, requester, nil)
	mu.Lock()
	shardPID = system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &fakeShard{props: props, holders: holders, size: 1 << 20, stopped: stopped}
	}))
	mu.Unlock()
	successful(t, replies)
}

// successful waits up to 10 s for a ReduceReply and fails the test
// unless it is one without an error.
func successful(t *testing.T, replies <-chan *messages.ReduceReply) *messages.ReduceReply {
	t.Helper()
	select {
	case r := <-replies:
		if err := messages.ErrOrNil(r.GetError()); err != nil {
			t.Fatalf("reduce: %v", err)
		}
		return r
	case <-time.After(10 * time.Second):
		t.Fatal("no ReduceReply")
		return nil
	}
}

// fakeStore runs a Reduce's tasks at once, except that the position that
// streams a whole source (and so measures the link) reports its Done,
// with the measurement, only after the others: as a report that crosses
// another connection than the root's does, and arrives after it.
type fakeStore struct {
	name     string
	late     time.Duration
	releases chan<- release
	// confirmAfter delays the answer to a ReduceCommit; confirmed is set
	// as it goes (shared by every fake store of a test, if set).
	confirmAfter time.Duration
	confirmed    *atomic.Bool
}

// release is a ReduceRelease a fake store node received.
type release struct {
	node string
	m    *messages.ReduceRelease
	// confirmed: a commit's answer had gone out when it arrived.
	confirmed bool
}

func (f *fakeStore) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *messages.ReduceTaskBatch:
		ts, _ := reduction.BatchTasks(m)
		for _, t := range ts {
			f.run(ctx, t)
		}
	case *messages.ReduceTask:
		f.run(ctx, m)
	case *messages.ReduceRelease:
		f.releases <- release{f.name, m, f.confirmed != nil && f.confirmed.Load()}
	case *messages.ReduceCommit:
		answer := &messages.ReduceCommitted{ReduceId: m.GetReduceId(), TargetId: m.GetTargetId(), Whole: true, NodeId: f.name}
		if f.confirmAfter == 0 {
			ctx.Respond(answer)
			return
		}
		system, to := ctx.ActorSystem(), ctx.Sender()
		time.AfterFunc(f.confirmAfter, func() {
			f.confirmed.Store(true)
			system.Root.Send(to, answer)
		})
	}
}

func (f *fakeStore) run(ctx actor.Context, t *messages.ReduceTask) {
	coord := ctx.Sender()
	ctx.Send(coord, &messages.ReduceTaskStarted{ReduceId: t.GetReduceId(), Position: t.GetPosition(), Generation: t.GetGeneration()})
	done := &messages.ReduceTaskDone{ReduceId: t.GetReduceId(), Position: t.GetPosition(), Generation: t.GetGeneration()}
	for _, in := range t.GetChildren() {
		if in.GetComplete() {
			done.MeasuredBytes, done.MeasuredNs = 1<<20, int64(20*time.Millisecond)
			system := ctx.ActorSystem()
			time.AfterFunc(f.late, func() { system.Root.Send(coord, done) })
			return
		}
	}
	ctx.Send(coord, done)
}

// spawnFakeStores spawns n fake store nodes n0, n1, ... made by mk, and
// returns the sources src-0, src-1, ... each held by its node, and their
// ids in order.
func spawnFakeStores(t *testing.T, system *actor.ActorSystem, n int, mk func(name string) *fakeStore) (map[string]*messages.NodeRef, []string) {
	t.Helper()
	holders := map[string]*messages.NodeRef{}
	var ids []string
	for i := range n {
		name := fmt.Sprintf("n%d", i)
		pid, err := system.Root.SpawnNamed(actor.PropsFromProducer(func() actor.Actor { return mk(name) }), "store-"+name)
		if err != nil {
			t.Fatal(err)
		}
		id := fmt.Sprintf("src-%d", i)
		ids = append(ids, id)
		holders[id] = &messages.NodeRef{NodeId: name, Address: pid.GetAddress(), ActorId: pid.GetId()}
	}
	return holders, ids
}

// A member that measured no bandwidth coordinates a Reduce whose
// measuring position reports after the root: the nodes, released
// without a B, get the measured one in a second release. Before, the
// late report went to the dead letters and no member but the measuring
// one ever learned B from a Reduce (TestProcessReduceSpreadsBandwidth
// failed so under load).
func TestLateMeasurementReachesTheReleasedNodes(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	const sources = 3
	releases := make(chan release, 16)
	holders, ids := spawnFakeStores(t, system, sources, func(name string) *fakeStore {
		return &fakeStore{name: name, late: 100 * time.Millisecond, releases: releases}
	})
	estimator := estimator.New(100*time.Microsecond, 0) // no sample yet
	spawnSumReduce(t, system, ActorConfig{Reduce: reduction.Config{ForceDegree: 1, InlineLimit: 64 << 10}, Estimator: estimator}, holders, ids, nil)
	// The chain's two tasks' nodes are released (the leaf's source is read
	// where it lies, and its node runs no task): blind first, then with B.
	released, withB := map[string]bool{}, map[string]bool{}
	deadline := time.After(10 * time.Second)
	for len(released) < sources-1 || len(withB) < len(released) {
		select {
		case r := <-releases:
			released[r.node] = true
			if r.m.GetBandwidth() > 0 {
				withB[r.node] = true
			}
		case <-deadline:
			t.Fatalf("nodes released %v, of which with a bandwidth %v; want every released node to get B (the late measurement)", released, withB)
		}
	}
	if _, b, _, n := estimator.Estimate(); n != 1 || b <= 0 {
		t.Fatalf("the coordinator's member has B = %v from %d samples, want the one late measurement", b, n)
	}
}

// A successful answer waits for its commit's confirmation, and the
// releases that keep the target, which tell the caller nothing, wait
// behind it: sent before it, a Reduce of 1,024 sources had its answer
// wait behind 2,048 releases and unsubscriptions in the simulator. Every
// release arrives after the root's node confirmed its commit (delayed
// here by 200 ms), where before it came with the commit.
func TestReleasesFollowTheHeldAnswer(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	const sources = 3
	releases := make(chan release, 16)
	confirmed := &atomic.Bool{}
	holders, ids := spawnFakeStores(t, system, sources, func(name string) *fakeStore {
		return &fakeStore{name: name, releases: releases, confirmAfter: 200 * time.Millisecond, confirmed: confirmed}
	})
	spawnSumReduce(t, system, ActorConfig{Reduce: reduction.Config{ForceDegree: 1, InlineLimit: 64 << 10},
		Estimator: estimator.New(100*time.Microsecond, 0)}, holders, ids, nil)
	if !confirmed.Load() {
		t.Fatal("answered before the commit was confirmed")
	}
	deadline := time.After(10 * time.Second)
	for n := 0; n < sources-1; n++ {
		select {
		case r := <-releases:
			if !r.confirmed || !r.m.GetKeepTarget() {
				t.Fatalf("%s released (keep target %v) before the commit was confirmed", r.node, r.m.GetKeepTarget())
			}
		case <-deadline:
			t.Fatalf("%d of %d nodes released", n, sources-1)
		}
	}
}
