package member

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/experiments"
	"github.com/hoplite-go/hoplite/internal/testhooks"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/messages"
)

// The project's choice for a Reduce whose coordinator fails (README,
// "Failures and recovery"): a coordinator that crashes is stopped by its
// shard, not restarted, and the Reduce fails at once with UNAVAILABLE,
// leaving no partial target; the caller may retry with the same target
// id. A coordinator lost with its member (the target shard's host) is
// started again by the caller's store node at the shard's new home. These
// tests crash the coordinator itself and kill the node that hosts it.

// coordinatorFailure is one such scenario: a Reduce of 3 of {a, b, c}
// from node-0, a chain (degree 1) a → b → c. a and b exist (on node-1
// and node-2); c's Put on node-3 stalls after its first chunk, so the
// root runs on node-3 and has written part of the target when the
// failure comes.
type coordinatorFailure struct {
	l       *Local
	target  string
	ids     []string
	data    map[string][]byte
	release func() // lets c's Put finish
	cput    chan error
	done    chan error // the Reduce's answer
}

const coordFailChunk = 32 << 10

// coordinatorFailureCluster starts the cluster; hook (may be nil) runs in
// every coordinator.
func coordinatorFailureCluster(t *testing.T, nodes int, target string, hook func(reduce string, msg any), opts ...func(*Config)) *coordinatorFailure {
	f := &coordinatorFailure{target: target, ids: []string{"a", "b", "c"}, data: map[string][]byte{},
		cput: make(chan error, 1), done: make(chan error, 1)}
	hold := make(chan struct{})
	cfg := Config{exp: experiments.Set{ReduceDegree: 1}, Nodes: nodes, ChunkSize: coordFailChunk, hooks: testhooks.Set{Coordinator: hook}}
	for _, o := range opts {
		o(&cfg)
	}
	cfg.hooks.Store.BeforePutChunk = func(_, id string, off int64) {
		if id == "c" && off > 0 {
			<-hold
		}
	}
	f.l = start(t, cfg)
	var once sync.Once
	f.release = func() { once.Do(func() { close(hold) }) }
	t.Cleanup(f.release) // before Stop (cleanups run last first)
	for i, id := range f.ids {
		f.data[id] = int64s(uint64(i+1), 8*coordFailChunk/8)
	}
	return f
}

// begin starts the Reduce and c's stalled Put and returns once some node
// holds a partial copy of the target: the failure that follows hits a
// Reduce in flight.
func (f *coordinatorFailure) begin(t *testing.T, ctx context.Context) {
	t.Helper()
	for i, id := range f.ids[:2] {
		if err := f.l.Client(i+1).Put(ctx, id, f.data[id]); err != nil {
			t.Fatal(err)
		}
	}
	rctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	go func() {
		defer cancel()
		_, err := f.l.Client(0).Reduce(rctx, f.target, f.ids, 3, messages.ReduceOp_SUM, messages.DType_INT64)
		f.done <- err
	}()
	go func() { f.cput <- f.l.Client(3).Put(ctx, "c", f.data["c"]) }()
	eventually(t, 10*time.Second, "the root's partial copy of the target", func() bool {
		select {
		case err := <-f.done:
			t.Fatalf("the Reduce returned before its root ran: %v", err)
		default:
		}
		for i := range f.l.Nodes() {
			if f.l.Store(i).Lookup(f.target) != nil {
				return true
			}
		}
		return false
	})
}

// expectUnavailable waits for the Reduce's answer. The Reduce's own
// deadline is 30 s and the test's context ends first: an answer that
// comes at all, with UNAVAILABLE rather than TIMEOUT, is one that did not
// wait for the deadline.
func (f *coordinatorFailure) expectUnavailable(t *testing.T, ctx context.Context) {
	t.Helper()
	select {
	case err := <-f.done:
		if !errors.Is(err, messages.ErrUnavailable) {
			t.Fatalf("Reduce after its coordinator failed: %v, want UNAVAILABLE", err)
		}
	case <-ctx.Done():
		t.Fatal("the Reduce did not answer after its coordinator failed: it waits for its deadline")
	}
}

// expectClean checks that no live node keeps a copy of the target and the
// directory does not know it, then reduces into the same target again.
func (f *coordinatorFailure) expectClean(t *testing.T, ctx context.Context) {
	t.Helper()
	f.release()
	if err := <-f.cput; err != nil {
		t.Fatalf("put c: %v", err)
	}
	eventually(t, 10*time.Second, "no partial copy of the target on any live node", func() bool {
		for i := range f.l.Nodes() {
			if f.l.Alive(i) && f.l.Store(i).Lookup(f.target) != nil {
				return false
			}
		}
		return true
	})
	var last error
	var info *messages.ObjectInfo
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("the directory's last answer about the target: %v, %v", info, last)
		}
	})
	eventually(t, 10*time.Second, "the directory to forget the target", func() bool {
		qctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		info, last = f.l.Client(0).Info(qctx, f.target, false)
		return errors.Is(last, messages.ErrNotFound)
	})
	rep, err := f.l.Client(0).Reduce(ctx, f.target, f.ids, 3, messages.ReduceOp_SUM, messages.DType_INT64)
	if err != nil {
		t.Fatalf("a second Reduce into the same target: %v", err)
	}
	if got := slices.Sorted(slices.Values(rep.GetReducedIds())); !slices.Equal(got, f.ids) {
		t.Fatalf("second Reduce reduced %v, want %v", got, f.ids)
	}
	got, err := f.l.Client(3).Get(ctx, f.target)
	if err != nil {
		t.Fatal(err)
	}
	want := chaosReduceBytes(messages.ReduceOp_SUM, [][]byte{f.data["a"], f.data["b"], f.data["c"]})
	if !bytes.Equal(got, want) {
		t.Fatal("the second Reduce's target is not a+b+c")
	}
}

// TestCoordinatorPanicFailsReduce: the coordinator panics in the middle
// of a Reduce, while its root writes the target.
func TestCoordinatorPanicFailsReduce(t *testing.T) {
	const reason = "injected coordinator crash"
	var arm, crashed atomic.Bool
	f := coordinatorFailureCluster(t, 4, "tgt", func(reduce string, msg any) {
		switch msg.(type) {
		case actor.SystemMessage, actor.AutoReceiveMessage:
			return // the crash is on a message of the Reduce (the next one: a resubscription tick at the latest)
		}
		if strings.HasPrefix(reduce, "tgt#") && arm.Load() && crashed.CompareAndSwap(false, true) {
			panic(reason)
		}
	})
	stopped := make(chan struct{}, 1)
	sub := f.l.System().EventStream.Subscribe(func(e any) {
		if ev, ok := e.(*actor.SupervisorEvent); ok && ev.Directive == actor.StopDirective && fmt.Sprint(ev.Reason) == reason {
			select {
			case stopped <- struct{}{}:
			default:
			}
		}
	})
	t.Cleanup(func() { f.l.System().EventStream.Unsubscribe(sub) })
	ctx := deadline(t, 20*time.Second)
	f.begin(t, ctx)
	arm.Store(true)
	f.expectUnavailable(t, ctx)
	if !crashed.Load() {
		t.Fatal("the Reduce failed, but not by the injected crash")
	}
	select {
	case <-stopped:
	case <-ctx.Done():
		t.Fatal("no SupervisorEvent stopped the crashed coordinator")
	}
	f.expectClean(t, ctx)
}

// expectSum waits for the Reduce's answer, which must be a success, and
// checks that the target holds a+b+c; what names the coordinator's fault.
func (f *coordinatorFailure) expectSum(t *testing.T, ctx context.Context, what string) {
	t.Helper()
	select {
	case err := <-f.done:
		if err != nil {
			t.Fatalf("Reduce after its coordinator's %s: %v, want success", what, err)
		}
	case <-ctx.Done():
		t.Fatalf("the Reduce did not answer after its coordinator's %s", what)
	}
	got, err := f.l.Client(3).Get(ctx, f.target)
	if err != nil {
		t.Fatal(err)
	}
	want := chaosReduceBytes(messages.ReduceOp_SUM, [][]byte{f.data["a"], f.data["b"], f.data["c"]})
	if !bytes.Equal(got, want) {
		t.Fatal("the target is not a+b+c")
	}
}

// TestCoordinatorHostKilledReduceResumes: the node that hosts the
// target's shard, and so the coordinator, is killed while the root
// writes the target; the caller and the sources live elsewhere. The
// Reduce starts again at the shard's new home: the dead attempt's partial
// target goes, and the Reduce answers with a+b+c once c's Put finishes.
func TestCoordinatorHostKilledReduceResumes(t *testing.T) {
	const nodes = 5
	target := idOnNode("tgt", 4, nodes, nodes) // node-4 holds no source and is not the caller
	f := coordinatorFailureCluster(t, nodes, target, nil)
	ctx := deadline(t, 20*time.Second)
	if host := f.l.NodeOf(f.l.Shard(directory.ShardIndex(target, nodes)).GetAddress()); host != 4 {
		t.Fatalf("target's shard is on node %d, want node-4", host)
	}
	f.begin(t, ctx)
	if err := f.l.Kill(4); err != nil {
		t.Fatal(err)
	}
	f.release()
	if err := <-f.cput; err != nil {
		t.Fatalf("put c: %v", err)
	}
	f.expectSum(t, ctx, "host was killed")
}

// TestCoordinatorShardCrashedReduceResumes: the target's directory
// shard crashes (and restarts, rebuilt) while the root writes the
// target, and takes the coordinator, its child, with it. The coordinator
// tells the caller it stopped with its shard, and the caller's node
// starts the Reduce again there: it answers with a+b+c once c's Put
// finishes (chaos seed 78 under load, where a shard moving away from a
// restarted member failed an AllReduce UNAVAILABLE).
func TestCoordinatorShardCrashedReduceResumes(t *testing.T) {
	const nodes = 5
	target := idOnNode("tgt", 4, nodes, nodes)
	stopped := make(chan struct{})
	var once sync.Once
	hook := func(_ string, msg any) {
		if _, ok := msg.(*actor.Stopping); ok {
			once.Do(func() { close(stopped) })
		}
	}
	f := coordinatorFailureCluster(t, nodes, target, hook, func(c *Config) { c.hooks.Shard = chaosCrashHook })
	ctx := deadline(t, 20*time.Second)
	f.begin(t, ctx)
	sendIn(f.l, f.l.Shard(directory.ShardIndex(target, nodes)), chaosCrash{})
	select {
	case <-stopped: // the first attempt's coordinator stops with its shard
	case <-ctx.Done():
		t.Fatal("the coordinator did not stop when its shard crashed")
	}
	f.release()
	if err := <-f.cput; err != nil {
		t.Fatalf("put c: %v", err)
	}
	f.expectSum(t, ctx, "shard crashed")
}

// A coordinator that crashes in Started, before its Reduction exists,
// still answers the caller (UNAVAILABLE, not a wait for the deadline) and
// frees the target: the same Reduce then succeeds.
func TestCoordinatorPanicInStartedFailsReduce(t *testing.T) {
	cfg := Config{Nodes: 3, ChunkSize: 32 << 10}
	once := make(chan struct{}, 1)
	once <- struct{}{}
	cfg.hooks.Coordinator = func(_ string, msg any) {
		if _, ok := msg.(*actor.Started); ok {
			select {
			case <-once:
				panic("fault injection: coordinator crash in Started")
			default:
			}
		}
	}
	l := start(t, cfg)
	ctx := deadline(t, 30*time.Second)
	data := int64s(1, 8<<10)
	if err := l.Client(1).Put(ctx, "a", data); err != nil {
		t.Fatal(err)
	}
	rctx, cancel := contextWithTimeout(ctx, 10*time.Second)
	defer cancel()
	if _, err := l.Client(0).Reduce(rctx, "t", []string{"a"}, 1, messages.ReduceOp_SUM, messages.DType_INT64); !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("reduce whose coordinator crashed in Started: %v, want UNAVAILABLE", err)
	}
	if _, err := l.Client(0).Reduce(ctx, "t", []string{"a"}, 1, messages.ReduceOp_SUM, messages.DType_INT64); err != nil {
		t.Fatalf("the same Reduce again: %v, want success (the target was freed)", err)
	}
	got, err := l.Client(2).Get(ctx, "t")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("get target: %v (equal %v)", err, bytes.Equal(got, data))
	}
}
