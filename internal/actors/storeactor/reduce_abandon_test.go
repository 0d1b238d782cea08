package storeactor

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/internal/reduction"
	"github.com/hoplite-go/hoplite/messages"
)

// abandonRig is one store node whose coordinator abandons a sliced
// AllReduce for a tree, as coordinator.replan does: the old gather's
// task, then DropObject of the target, the release of the old run, and
// the new root's task, in that order. Its shard accepts every
// CreateObject and answers nothing else, so a Get of the target that
// the node cannot serve from its store keeps waiting for a location.
type abandonRig struct {
	t      *testing.T
	system *actor.ActorSystem
	store  *objstore.Store
	node   *actor.PID
	self   *messages.NodeRef
	src    []byte
	// The old gather's run stops in AroundReduceOutput until resume is
	// closed, then reports its creation's error on attempted.
	held, resume chan struct{}
	attempted    chan error
	resumeOnce   sync.Once
}

const (
	abandonReduce = "allreduce#1"
	abandonTarget = "sum"
	abandonSize   = 64
)

func newAbandonRig(t *testing.T) *abandonRig {
	t.Helper()
	r := &abandonRig{t: t, self: &messages.NodeRef{NodeId: "node-1"}, store: objstore.NewStore(1 << 20),
		held: make(chan struct{}), resume: make(chan struct{}), attempted: make(chan error, 1)}
	r.system = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}))
	t.Cleanup(r.system.Shutdown)
	t.Cleanup(r.release) // never leave the old run's goroutine held
	shard := r.system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*messages.CreateObject); ok {
			ctx.Respond(&messages.CreateObjectReply{ObjectId: m.GetObjectId()})
		}
	}))
	r.src = make([]byte, abandonSize)
	for i := 0; i < abandonSize; i += 8 {
		binary.LittleEndian.PutUint64(r.src[i:], uint64(i+1))
	}
	o, _, err := r.store.Create("src", abandonSize, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Append(r.src); err != nil {
		t.Fatal(err)
	}
	if err := r.store.Complete(o); err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	cfg := Config{Self: r.self, Store: r.store, ShardFor: func(string) *actor.PID { return shard }, Log: logrus.NewEntry(log)}
	cfg.Hooks.AroundReduceOutput = func(_ string, task *messages.ReduceTask, create func() error) {
		if task.GetGeneration() != 1 {
			_ = create()
			return
		}
		close(r.held)
		<-r.resume // closed by the test, or by its cleanup
		r.attempted <- create()
	}
	r.node = r.system.Root.Spawn(NewProps(cfg))
	return r
}

func (r *abandonRig) release() { r.resumeOnce.Do(func() { close(r.resume) }) }

// wait returns what c delivers, failing the test after a deadline.
func wait[T any](t *testing.T, c <-chan T, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(10 * time.Second):
		t.Fatalf("no %s within 10s", what)
		panic("unreachable")
	}
}

// barrier returns once the store node handled every message sent to it
// before (one sender's messages arrive in order).
func (r *abandonRig) barrier() {
	r.t.Helper()
	if _, err := r.system.Root.RequestFuture(r.node, &messages.NodeStatus{}, 10*time.Second).Result(); err != nil {
		r.t.Fatalf("store node status: %v", err)
	}
}

// startOldGather sends the sliced run's gather of this node (generation
// 1, a copy of the target) and waits until its run is about to create
// its output.
func (r *abandonRig) startOldGather() {
	r.t.Helper()
	r.system.Root.Send(r.node, &messages.ReduceTask{ReduceId: abandonReduce, TargetId: abandonTarget, Op: messages.ReduceOp_SUM,
		Dtype: messages.DType_INT64, Size: abandonSize, Position: 1, Gather: true, OutputId: abandonTarget, Generation: 1, Slices: 1,
		Children: []*messages.ReduceInput{{Node: r.self, ObjectId: reduction.InternalID(abandonReduce, 0, 1)}}})
	wait(r.t, r.held, "start of the old gather's run")
}

// drop and releaseOld send what the coordinator sends a participant when
// it re-plans: the drop of its copy of the target, then the release of
// the old run's workers.
func (r *abandonRig) drop() {
	r.system.Root.Send(r.node, &messages.DropObject{ObjectId: abandonTarget,
		Reason: messages.Errorf(messages.ErrorCode_RESET, "the AllReduce run producing %q was abandoned", abandonTarget)})
}

func (r *abandonRig) releaseOld() {
	r.system.Root.Send(r.node, &messages.ReduceRelease{ReduceId: abandonReduce})
}

// get starts the re-planned run's Get of the target on this node.
func (r *abandonRig) get() *actor.Future {
	return r.system.Root.RequestFuture(r.node, &messages.Get{ObjectId: abandonTarget, Prefetch: true, TimeoutMs: 20000}, 30*time.Second)
}

// newRootServes sends the re-planned tree's root (generation 2), which reduces
// this node's one source into the target, commits its result when it
// reports it done, as its coordinator does, and checks that the Get
// returns and the node holds the new run's result.
func (r *abandonRig) newRootServes(get *actor.Future) {
	r.t.Helper()
	node := r.node
	coord := r.system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*messages.ReduceTaskDone); ok && m.GetError() == nil {
			ctx.Send(node, &messages.ReduceCommit{ReduceId: m.GetReduceId(), Position: m.GetPosition(), Generation: m.GetGeneration(),
				TargetId: abandonTarget})
		}
	}))
	r.system.Root.RequestWithCustomSender(r.node, &messages.ReduceTask{ReduceId: abandonReduce, TargetId: abandonTarget, Op: messages.ReduceOp_SUM,
		Dtype: messages.DType_INT64, Size: abandonSize, Position: 0, Root: true, SourceId: "src", OutputId: abandonTarget, Generation: 2}, coord)
	res, err := get.Result()
	if err != nil {
		r.t.Fatalf("Get of the target: %v", err)
	}
	if e := messages.ErrOrNil(res.(*messages.GetReply).GetError()); e != nil {
		r.t.Fatalf("the new run's Get of the target failed: %v", e)
	}
	o := r.store.Lookup(abandonTarget)
	if o == nil {
		r.t.Fatal("no copy of the target after the new root finished")
	}
	if got, err := o.Bytes(); err != nil || !bytes.Equal(got, r.src) {
		r.t.Fatalf("the target: err %v, equal %v", err, bytes.Equal(got, r.src))
	}
	if rid, gen := o.Producer(); rid != abandonReduce || gen != 2 {
		r.t.Fatalf("the target is produced by %s generation %d, want the new root's (generation 2)", rid, gen)
	}
}

// A worker of an abandoned sliced run whose goroutine reaches its output
// only after its node handled the release (a gather scheduled late on a
// loaded machine) must not create it: the re-planned run's Get of the
// target waits on this node in a placeholder by then, and the old
// gather promoted that placeholder as its copy and then dropped it as
// released, failing the Get with NOT_FOUND (TestSlicedAllReduceParticipantKilled:
// "node-1 could not fetch the result: reduce ... released its output").
func TestAbandonedGatherLeavesTheNewRunsGetAlone(t *testing.T) {
	r := newAbandonRig(t)
	r.startOldGather()
	r.drop()
	r.releaseOld()
	get := r.get()
	r.barrier()
	placeholder := r.store.Lookup(abandonTarget)
	if placeholder == nil || placeholder.Size() >= 0 {
		t.Fatalf("the Get left no placeholder of the target: %v", placeholder)
	}
	r.release()
	if err := wait(t, r.attempted, "end of the old gather's attempt"); !errors.Is(err, messages.ErrCanceled) {
		t.Errorf("the released gather's attempt to create its output: %v, want CANCELED", err)
	}
	if o := r.store.Lookup(abandonTarget); o != placeholder {
		t.Fatalf("the old gather replaced the new run's placeholder (%p, now %p)", placeholder, o)
	}
	if _, _, err := placeholder.Progress(); err != nil {
		t.Fatalf("the old gather failed the new run's placeholder: %v", err)
	}
	r.newRootServes(get)
}

// A worker of an abandoned run that created its copy of the target after
// the coordinator's drop reached its node, but before the release did,
// loses that copy with the release itself, not later in its own actor:
// a Get of the re-planned run that the node handles next must not find
// the old copy (it would wait on it and fail when the worker drops it).
func TestReleaseDropsAnAbandonedGathersCopyAtOnce(t *testing.T) {
	r := newAbandonRig(t)
	r.startOldGather()
	r.drop()
	r.barrier()
	r.release()
	if err := wait(t, r.attempted, "end of the old gather's attempt"); err != nil {
		t.Fatalf("the gather could not create its output before its release: %v", err)
	}
	old := r.store.Lookup(abandonTarget)
	if old == nil {
		t.Fatal("the gather's copy is not in the store")
	}
	r.releaseOld()
	r.barrier()
	if o := r.store.Lookup(abandonTarget); o != nil {
		t.Fatalf("the abandoned gather's copy %p is still in the store after its release was handled", o)
	}
	if _, _, err := old.Progress(); !errors.Is(err, messages.ErrNotFound) {
		t.Fatalf("the abandoned gather's copy ended with %v, want NOT_FOUND (its run is over)", err)
	}
	r.newRootServes(r.get())
}
