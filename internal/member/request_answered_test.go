package member

import (
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/messages"
)

// getRequester is an application actor that asks store with ctx.Request,
// as an application actor would (no watch, no future): each id it is
// sent becomes a Get, and every GetReply it receives goes to replies.
// Anything else it receives goes to others.
type getRequester struct {
	store   *actor.PID
	timeout time.Duration
	replies chan *messages.GetReply
	others  chan any
}

func (g *getRequester) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case string:
		ctx.Request(g.store, &messages.Get{ObjectId: m, TimeoutMs: g.timeout.Milliseconds()})
	case *messages.GetReply:
		g.replies <- m
	case actor.SystemMessage, actor.AutoReceiveMessage:
	default:
		g.others <- m
	}
}

// TestRequestToAKilledStoreNodeIsAnswered: an application actor's Get
// that waits at a store node (its object does not exist yet) is answered
// UNAVAILABLE, marked undelivered, once the store node's member is
// killed: by the requester's own actor system, since the killed member
// answers nothing. Both places an application actor lives are asked
// from: the application's actor system and another member's.
func TestRequestToAKilledStoreNodeIsAnswered(t *testing.T) {
	l := start(t, Config{Nodes: 3})
	const getTimeout = 20 * time.Second
	ready := "ready"
	if err := l.Client(0).Put(deadline(t, 20*time.Second), ready, []byte("here")); err != nil {
		t.Fatal(err)
	}
	type requester struct {
		where string
		g     *getRequester
		pid   *actor.PID
		root  *actor.RootContext
	}
	newRequester := func(where string, system *actor.ActorSystem, spawn func(*actor.Props) *actor.PID) requester {
		// A PID of its own: a PID caches the route of the actor system that
		// used it first (see freshPID).
		g := &getRequester{store: l.StoreNode(2), timeout: getTimeout, replies: make(chan *messages.GetReply, 4), others: make(chan any, 4)}
		return requester{where, g, spawn(actor.PropsFromProducer(func() actor.Actor { return g })), system.Root}
	}
	requesters := []requester{
		newRequester("the application's actor system", l.System(), l.System().Root.Spawn),
		newRequester("member node-1's actor system", l.Member(1).System(), l.Member(1).Spawn),
	}
	for _, r := range requesters {
		r.root.Send(r.pid, "never-put")
		// One sender's messages to one target arrive in order: once the
		// Get of an object that exists is answered, the first Get waits
		// at the store node.
		r.root.Send(r.pid, ready)
		select {
		case rep := <-r.g.replies:
			if rep.GetObjectId() != ready || rep.GetError() != nil {
				t.Fatalf("from %s: first reply %v, want %s's bytes", r.where, rep, ready)
			}
		case m := <-r.g.others:
			t.Fatalf("from %s: %T %v instead of a GetReply", r.where, m, m)
		case <-time.After(getTimeout):
			t.Fatalf("from %s: no reply to the Get of an object that exists", r.where)
		}
	}

	if err := l.Kill(2); err != nil {
		t.Fatal(err)
	}
	// The failure is delivered everywhere when Kill returns; the answer
	// comes with it, long before the Get's own deadline.
	bound := time.After(getTimeout / 2)
	for _, r := range requesters {
		select {
		case rep := <-r.g.replies:
			if rep.GetObjectId() != "never-put" || rep.GetError().GetCode() != messages.ErrorCode_UNAVAILABLE || !messages.IsUndelivered(rep.GetError()) {
				t.Fatalf("from %s: reply %v, want never-put UNAVAILABLE, undelivered", r.where, rep)
			}
		case m := <-r.g.others:
			t.Fatalf("from %s: %T %v instead of a GetReply", r.where, m, m)
		case <-bound:
			t.Fatalf("from %s: no reply to a Get waiting at a killed store node within %v of the kill", r.where, getTimeout/2)
		}
	}
}
