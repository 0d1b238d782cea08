package member

import (
	"bytes"
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/hoplite-go/hoplite/events"
	"github.com/hoplite-go/hoplite/messages"
)

// stopLog records the cluster's warnings, to tell whether Kill had to
// give up waiting for a node to stop (it then warns and goes on as if it
// had: the node's data and data plane are gone, but its actors live on).
func stopLog(cfg *Config) func() bool {
	log, hook := logtest.NewNullLogger()
	log.SetLevel(logrus.WarnLevel)
	cfg.Log = log
	return func() bool {
		for _, e := range hook.AllEntries() {
			if strings.Contains(e.Message, "did not stop in time") {
				return true
			}
		}
		return false
	}
}

// nodeFailures lists the NodeFailed events about node.
func nodeFailures(evs *eventLog, node string) []*events.NodeFailed {
	var out []*events.NodeFailed
	for _, e := range eventsOf[*events.NodeFailed](evs) {
		if e.Node == node {
			out = append(out, e)
		}
	}
	return out
}

// TestKillAnnouncesEveryKillOnce: nobody announces a Kill by hand; the
// survivors detect it through the member failure path, and by the time
// Kill returns every live member has published events.NodeFailed about
// it exactly once on its own EventStream, and the application's stream
// has it exactly once. An idle member (no copy, no request: nothing
// watches it) is detected as surely as one that holds copies, and a
// restarted member's next failure is a new one.
func TestKillAnnouncesEveryKillOnce(t *testing.T) {
	l := start(t, Config{Nodes: 4, ChunkSize: 32 << 10})
	evs := recordEvents(t, l)
	perMember := map[string]*eventLog{}
	for i := range 4 {
		perMember[l.Member(i).ID()] = recordEventsOf(t, l.Member(i).System())
	}
	ctx := deadline(t, 20*time.Second)
	check := func(failed string) {
		t.Helper()
		if got := nodeFailures(evs, failed); len(got) != 1 {
			t.Fatalf("%d NodeFailed events about %s on the application's stream, want 1: %+v", len(got), failed, got)
		}
		for i := range l.Nodes() {
			if !l.Alive(i) {
				continue
			}
			m := l.Member(i)
			if got := nodeFailures(perMember[m.ID()], failed); len(got) != 1 {
				t.Fatalf("%s published %d NodeFailed events about %s, want 1: %+v", m.ID(), len(got), failed, got)
			}
		}
	}

	// node-3 never holds or asks for anything.
	if err := l.Kill(3); err != nil {
		t.Fatal(err)
	}
	check("node-3")

	// node-2 holds a copy: shards watch it.
	data := randomBytes(1, 256<<10)
	if err := l.Client(0).Put(ctx, "x", data); err != nil {
		t.Fatal(err)
	}
	if got, err := l.Client(2).Get(ctx, "x"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("get on node-2: %v", err)
	}
	if err := l.Kill(2); err != nil {
		t.Fatal(err)
	}
	check("node-2")

	// New incarnations (node-2#1, node-3#1) fail again: new failures.
	for _, i := range []int{2, 3} {
		if err := l.Restart(i); err != nil {
			t.Fatal(err)
		}
		perMember[l.Member(i).ID()] = recordEventsOf(t, l.Member(i).System())
	}
	if got, err := l.Client(2).Get(ctx, "x"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("get on the restarted node-2: %v", err)
	}
	for _, i := range []int{2, 3} {
		if err := l.Kill(i); err != nil {
			t.Fatal(err)
		}
	}
	check("node-2#1")
	check("node-3#1")

	// Nothing comes late: a round trip through every shard later, still
	// one announcement per failure.
	for i := range 2 {
		if _, err := l.Client(i).Get(ctx, "x"); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Kill(1); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"node-1", "node-2", "node-3", "node-2#1", "node-3#1"} {
		check(f)
	}
}

// TestKillDuringStoreNodeRestart: a node is killed while its store node
// actor, which just crashed, waits for its supervisor's backoff restart.
// The restart comes in while the actor stops (its Stopping hook waits for
// it); Proto.Actor would restart the actor instead of stopping it, and
// the killed node's store node would live on: no Terminated for its
// watchers (a Reduce waiting to repair its tree hangs), and a Kill that
// waits out the stop timeout. Kill must leave no actor of the node alive.
func TestKillDuringStoreNodeRestart(t *testing.T) {
	const chunk = 32 << 10
	const warmups = 8 // earlier crashes: the backoff grows (10 ms each), and Kill has time to come first
	hold := make(chan struct{})
	var armed atomic.Bool
	var restarts, starts, crashes atomic.Int32
	cfg := Config{Nodes: 3, ChunkSize: chunk}
	stuck := stopLog(&cfg)
	cfg.hooks.Store.BeforeFetchChunk = func(node, id string, off int64) {
		if node == "node-2" && off > 0 {
			<-hold // the store node has a copy running when it stops
		}
	}
	cfg.hooks.Store.BeforeReceive = func(node string, msg any) {
		if node != "node-2" {
			return
		}
		switch msg.(type) {
		case crash:
			crashes.Add(1)
		case *actor.Started:
			starts.Add(1)
		case *actor.Stopping:
			if armed.Load() {
				// Hold the stop until the backoff restart was sent (its
				// SupervisorEvent is published just before).
				end := time.Now().Add(5 * time.Second)
				for restarts.Load() < warmups+1 && time.Now().Before(end) {
					time.Sleep(time.Millisecond)
				}
				time.Sleep(20 * time.Millisecond)
			}
		}
		crashHook(node, msg)
	}
	l := start(t, cfg)
	t.Cleanup(func() { close(hold) }) // before Stop
	// Node 2's own events: a killed member's last events never reach
	// the application's stream (a killed process tells nobody).
	node2, sys2 := l.StoreNode(2), l.Member(2).System()
	sub := sys2.EventStream.Subscribe(func(e any) {
		if ev, ok := e.(*actor.SupervisorEvent); ok && ev.Directive == actor.RestartDirective && ev.Child.Equal(node2) {
			restarts.Add(1)
		}
	})
	t.Cleanup(func() { sys2.EventStream.Unsubscribe(sub) })
	ctx := deadline(t, 30*time.Second)
	if err := l.Client(0).Put(ctx, "big", randomBytes(3, 8*chunk)); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = l.Client(2).Get(ctx, "big") }() // stalls after its first chunk
	eventually(t, 10*time.Second, "node-2's fetch of big", func() bool {
		o := l.Store(2).Lookup("big")
		if o == nil {
			return false
		}
		w, _, _ := o.Progress()
		return w > 0
	})
	store := l.StoreNode(2)
	for k := range warmups {
		sendIn(l, store, crash{})
		eventually(t, 10*time.Second, "node-2's store node restarted", func() bool { return starts.Load() >= int32(k+2) })
	}
	armed.Store(true)
	sendIn(l, store, crash{})
	eventually(t, 10*time.Second, "the last crash", func() bool { return crashes.Load() == warmups+1 })
	if err := l.Kill(2); err != nil {
		t.Fatal(err)
	}
	if restarts.Load() < warmups+1 {
		t.Fatal("the backoff restart did not come while the store node stopped: the test did not set up the race")
	}
	if stuck() {
		t.Fatal("Kill waited out the stop timeout: the restarted store node kept node-2 from stopping")
	}
	waitTerminated(ctx, t, l, store, "the killed node's store node is still alive: it was restarted while it stopped")
}

// TestKillWhileStoreNodeTakesATask: a store node that is stopping still
// handles messages while its children stop, and a reduce task that comes
// then starts a worker nobody tells to stop. The node must stop all the
// same (the worker's coordinator would otherwise never hear that the
// node failed).
func TestKillWhileStoreNodeTakesATask(t *testing.T) {
	const chunk = 32 << 10
	hold := make(chan struct{})
	inStopping, sent := make(chan struct{}), make(chan struct{})
	var armed atomic.Bool
	cfg := Config{Nodes: 3, ChunkSize: chunk}
	stuck := stopLog(&cfg)
	cfg.hooks.Store.BeforeFetchChunk = func(node, id string, off int64) {
		if node == "node-2" && off > 0 {
			<-hold // a copy is running while the node stops
		}
	}
	cfg.hooks.Store.BeforeReceive = func(node string, msg any) {
		if _, ok := msg.(*actor.Stopping); ok && node == "node-2" && armed.CompareAndSwap(true, false) {
			close(inStopping)
			select { // the task is queued before the node goes on stopping
			case <-sent:
			case <-time.After(5 * time.Second):
			}
		}
	}
	l := start(t, cfg)
	t.Cleanup(func() { close(hold) }) // before Stop
	ctx := deadline(t, 30*time.Second)
	if err := l.Client(0).Put(ctx, "big", randomBytes(4, 8*chunk)); err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = l.Client(2).Get(ctx, "big") }()
	eventually(t, 10*time.Second, "node-2's fetch of big", func() bool {
		o := l.Store(2).Lookup("big")
		if o == nil {
			return false
		}
		w, _, _ := o.Progress()
		return w > 0
	})
	coordinator := l.System().Root.Spawn(actor.PropsFromFunc(func(actor.Context) {})) // stays alive
	defer l.System().Root.Stop(coordinator)
	store := l.StoreNode(2)
	armed.Store(true)
	killed := make(chan error, 1)
	go func() { killed <- l.Kill(2) }()
	select {
	case <-inStopping:
	case <-ctx.Done():
		t.Fatal("node-2's store node never stopped")
	}
	task := &messages.ReduceTask{ReduceId: "r#1", TargetId: "r", Op: messages.ReduceOp_SUM, Dtype: messages.DType_INT64,
		Size: 8 * chunk, Root: true, SourceId: "big", OutputId: "r", TimeoutMs: 30_000, Generation: 1}
	l.Member(2).System().Root.RequestWithCustomSender(store, task, coordinator) // from inside: the network is cut first
	close(sent)
	if err := <-killed; err != nil {
		t.Fatal(err)
	}
	if stuck() {
		t.Fatal("Kill waited out the stop timeout: the worker started while the store node stopped kept node-2 from stopping")
	}
	waitTerminated(ctx, t, l, store, "the killed node's store node is still alive: a worker it started while stopping keeps it")
}

// waitTerminated fails the test unless pid is gone (its watchers told)
// before ctx ends: a watch, not the registry, says it truly stopped.
func waitTerminated(ctx context.Context, t *testing.T, l *Local, pid *actor.PID, why string) {
	t.Helper()
	gone := make(chan struct{})
	// Watched from the actor's own system: from another one, a killed
	// member's actors look terminated as soon as its network is cut.
	sys := systemOf(l, pid)
	pid = freshPID(pid)
	watcher := sys.Root.Spawn(actor.PropsFromFunc(func(c actor.Context) {
		switch m := c.Message().(type) {
		case *actor.Started:
			c.Watch(pid)
		case *actor.Terminated:
			if m.GetWho().Equal(pid) {
				close(gone)
			}
		}
	}))
	defer sys.Root.Stop(watcher)
	select {
	case <-gone:
	case <-ctx.Done():
		t.Fatal(why)
	}
}
