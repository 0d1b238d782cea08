package shardactor

import (
	"errors"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/messages"
)

// An idle shard wakes itself for nothing; a parked request is answered
// TIMEOUT at its deadline by the shard's own timer, with no other message
// to prompt it.
func TestShardWakesOnlyForDeadlines(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	var ticks atomic.Int32
	shard, err := system.Root.SpawnNamed(NewShardProps(ShardConfig{BeforeReceive: func(_ string, msg any) {
		if _, ok := msg.(directory.Tick); ok {
			ticks.Add(1)
		}
	}}), "shard-test")
	if err != nil {
		t.Fatal(err)
	}
	// Idle: a ticker would have fired about ten times by now.
	idle := system.Root.RequestFuture(shard, CountObjects{}, 5*time.Second)
	if _, err := idle.Result(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	if n := ticks.Load(); n != 0 {
		t.Fatalf("an idle shard woke %d times", n)
	}
	// A live receiver: the shard watches it, and drops what a dead one parked.
	store := system.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	receiver := &messages.NodeRef{NodeId: "n1", Address: store.GetAddress(), ActorId: store.GetId()}
	f := system.Root.RequestFuture(shard, &messages.Locate{ObjectId: "never", Receiver: receiver, TimeoutMs: 100}, 5*time.Second)
	res, err := f.Result()
	if err != nil {
		t.Fatalf("the parked Locate was never answered: %v", err)
	}
	r, ok := res.(*messages.LocateReply)
	if !ok || !errors.Is(messages.ErrOrNil(r.GetError()), messages.ErrTimeout) {
		t.Fatalf("parked Locate answered %v, want TIMEOUT", res)
	}
	if n := ticks.Load(); n < 1 || n > 3 {
		t.Fatalf("the shard woke %d times for one deadline", n)
	}
}

// FailureLog announces each failure once, again after Forget, and holds
// at most maxFailuresRemembered ids: a cluster with churn names every
// failed member anew.
func TestFailureLogIsBounded(t *testing.T) {
	var f FailureLog
	if !f.First("x", "a") || f.First("x", "a") {
		t.Fatal("the first report, then a repeat")
	}
	f.Forget("x", "a")
	if !f.First("x", "a") {
		t.Fatal("a node that came back fails again: its report is new")
	}
	// x's first record (forgotten) is dropped from the window first: it
	// must not take x's newer one with it.
	for i := range maxFailuresRemembered - 1 {
		if !f.First(fmt.Sprintf("n-%d", i), "a") {
			t.Fatalf("n-%d: a new failure not announced", i)
		}
	}
	if f.First("x", "a") {
		t.Fatal("x's newer record was forgotten with its older one")
	}
	for i := range 3 * maxFailuresRemembered {
		f.First(fmt.Sprintf("m-%d", i), "a")
	}
	if len(f.seen) > maxFailuresRemembered || len(f.order) > maxFailuresRemembered {
		t.Fatalf("the log holds %d ids in %d records, at most %d", len(f.seen), len(f.order), maxFailuresRemembered)
	}
	if f.First(fmt.Sprintf("m-%d", 3*maxFailuresRemembered-1), "a") {
		t.Fatal("the latest failure was announced twice")
	}
	if !f.First("x", "a") {
		t.Fatal("a failure thousands of failures old is still remembered")
	}
	f.Close()
	if f.First("new", "a") {
		t.Fatal("a closed log announces failures")
	}
}

// FailureLog keys a failure by incarnation (node id and address): a
// report about a member of another cluster with the same name, at its
// own address, neither hides the real failure of this cluster's member
// of that name nor is hidden by it, in either order.
func TestFailureLogKeysIncarnations(t *testing.T) {
	for _, lateFirst := range []bool{true, false} {
		var f FailureLog
		late, ours := func() bool { return f.First("node-1#1", "127.0.0.1:1") }, func() bool { return f.First("node-1#1", "127.0.0.1:4242") }
		first, second := ours, late
		if lateFirst {
			first, second = late, ours
		}
		if !first() || !second() {
			t.Fatalf("late report first %v: a failure of one incarnation hid another's", lateFirst)
		}
		if late() || ours() {
			t.Fatalf("late report first %v: a repeat was announced", lateFirst)
		}
	}
}
