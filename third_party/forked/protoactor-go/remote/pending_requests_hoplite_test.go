package remote

import (
	"strings"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
)

// The tests below register a request type of their own: a
// ListProcessesRequest whose Pattern is the request's key, answered by a
// GetProcessDiagnosticsResponse naming the same key; the undeliverable
// reply is a ListProcessesResponse whose one PID names the key and the
// target, so that it cannot be mistaken for the target's own answer.
func registerTestReplies(t *testing.T) {
	t.Helper()
	old := actor.GetRequestReplies()
	t.Cleanup(func() { actor.SetRequestReplies(old) })
	actor.SetRequestReplies(&actor.RequestReplies{
		Undeliverable: func(request interface{}, target *actor.PID, why string) (interface{}, bool) {
			m, ok := request.(*ListProcessesRequest)
			if !ok {
				return nil, false
			}
			return &ListProcessesResponse{Pids: []*actor.PID{{Address: target.GetAddress(), Id: "undelivered:" + m.Pattern}}}, true
		},
		Request: func(request interface{}) (actor.ReplyKey, time.Duration, bool) {
			m, ok := request.(*ListProcessesRequest)
			if !ok {
				return actor.ReplyKey{}, 0, false
			}
			return actor.ReplyKey{Kind: "List", ID: m.Pattern}, time.Minute, true
		},
		Reply: func(reply interface{}) (actor.ReplyKey, bool) {
			if id := undeliveredKey(reply); id != "" {
				return actor.ReplyKey{Kind: "List", ID: id}, true
			}
			m, ok := reply.(*GetProcessDiagnosticsResponse)
			if !ok {
				return actor.ReplyKey{}, false
			}
			return actor.ReplyKey{Kind: "List", ID: m.DiagnosticsString}, true
		},
	})
}

// startRemoteSystem starts an actor system with a remote on a free port
// of 127.0.0.1. Its remote is shut down as a killed process's would be
// (connections closed at once) by the test or at its end.
func startRemoteSystem(t *testing.T) (*actor.ActorSystem, *Remote) {
	t.Helper()
	system := actor.NewActorSystem()
	cfg := Configure("127.0.0.1", 0)
	cfg.MaxRetryCount = 1
	r := NewRemote(system, cfg)
	r.Start()
	t.Cleanup(func() { r.Shutdown(false) })
	return system, r
}

// answers is what a requester actor received, in order.
type answers chan interface{}

// spawnRequester spawns an actor in system that sends each
// ListProcessesRequest it is sent to target as a request (itself the
// sender) and passes every other message it receives to the channel.
func spawnRequester(t *testing.T, system *actor.ActorSystem, target *actor.PID) (*actor.PID, answers) {
	t.Helper()
	got := make(answers, 16)
	pid := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *ListProcessesRequest:
			ctx.Request(target, m)
		case actor.SystemMessage, actor.AutoReceiveMessage:
		default:
			got <- m
		}
	}))
	return pid, got
}

// spawnTarget spawns "node" in system: it answers a request whose
// pattern starts with "answer" and keeps every other one unanswered,
// telling parked of each request it received.
func spawnTarget(t *testing.T, system *actor.ActorSystem) (*actor.PID, chan string) {
	t.Helper()
	parked := make(chan string, 16)
	pid, err := system.Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*ListProcessesRequest); ok {
			if strings.HasPrefix(m.Pattern, "answer") {
				ctx.Respond(&GetProcessDiagnosticsResponse{DiagnosticsString: m.Pattern})
			}
			parked <- m.Pattern
		}
	}), "node")
	if err != nil {
		t.Fatal(err)
	}
	return pid, parked
}

func (a answers) next(t *testing.T, what string) interface{} {
	t.Helper()
	select {
	case m := <-a:
		return m
	case <-time.After(10 * time.Second):
		t.Fatalf("no answer %s within 10s", what)
		return nil
	}
}

// undeliveredKey is the key an undeliverable reply names, "" for any
// other message.
func undeliveredKey(m interface{}) string {
	r, ok := m.(*ListProcessesResponse)
	if !ok || len(r.Pids) != 1 {
		return ""
	}
	return strings.TrimPrefix(r.Pids[0].Id, "undelivered:")
}

// Hoplite patch: a request delivered to a process that dies before it
// answers is answered by the requester's own system, with the registered
// undeliverable reply, once the target's address terminates.
func TestRequestToAProcessThatDiesIsAnswered(t *testing.T) {
	registerTestReplies(t)
	requesterSystem, _ := startRemoteSystem(t)
	targetSystem, targetRemote := startRemoteSystem(t)
	target, parked := spawnTarget(t, targetSystem)
	requester, got := spawnRequester(t, requesterSystem, target)

	requesterSystem.Root.Send(requester, &ListProcessesRequest{Pattern: "wait"})
	select {
	case <-parked:
	case <-time.After(10 * time.Second):
		t.Fatal("the request did not reach its target")
	}
	targetRemote.Shutdown(false)
	m := got.next(t, "to a request whose target's process died")
	if undeliveredKey(m) != "wait" {
		t.Fatalf("answer %T %v, want the undeliverable reply to \"wait\"", m, m)
	}
	// The cluster's failure notice for the same address comes later.
	requesterSystem.EventStream.Publish(&EndpointTerminatedEvent{Address: target.Address})
	select {
	case m := <-got:
		t.Fatalf("a second answer %T %v", m, m)
	case <-time.After(200 * time.Millisecond):
	}
}

// Hoplite patch: a request its target answered gets no second answer
// when the target's process dies; one still waiting does.
func TestAnsweredRequestsGetNoSecondAnswer(t *testing.T) {
	registerTestReplies(t)
	requesterSystem, _ := startRemoteSystem(t)
	targetSystem, targetRemote := startRemoteSystem(t)
	target, parked := spawnTarget(t, targetSystem)
	requester, got := spawnRequester(t, requesterSystem, target)

	requesterSystem.Root.Send(requester, &ListProcessesRequest{Pattern: "answer-1"})
	if m, ok := got.next(t, "from the target").(*GetProcessDiagnosticsResponse); !ok || m.DiagnosticsString != "answer-1" {
		t.Fatalf("answer %T %v, want the target's", m, m)
	}
	<-parked
	requesterSystem.Root.Send(requester, &ListProcessesRequest{Pattern: "wait"})
	<-parked
	targetRemote.Shutdown(false)
	m := got.next(t, "to the request still waiting")
	if undeliveredKey(m) != "wait" {
		t.Fatalf("answer %T %v, want the undeliverable reply to \"wait\"", m, m)
	}
	requesterSystem.EventStream.Publish(&EndpointTerminatedEvent{Address: target.Address})
	select {
	case m := <-got:
		t.Fatalf("a second answer %T %v (the answered request was answered again)", m, m)
	case <-time.After(200 * time.Millisecond):
	}
}

// Hoplite patch: a request to an actor that does not run, in a live
// process, is answered by that process's dead letters with the registered
// undeliverable reply (upstream: a DeadLetterResponse, which a requester
// waiting for its reply type does not expect), and only once: the
// target's process dying afterwards adds no second answer.
func TestDeadLetteredRequestIsAnsweredOnce(t *testing.T) {
	registerTestReplies(t)
	requesterSystem, _ := startRemoteSystem(t)
	targetSystem, targetRemote := startRemoteSystem(t)
	gone := actor.NewPID(targetSystem.Address(), "no-such-actor")
	requester, got := spawnRequester(t, requesterSystem, gone)

	requesterSystem.Root.Send(requester, &ListProcessesRequest{Pattern: "gone"})
	m := got.next(t, "to a request to an actor that does not run")
	if undeliveredKey(m) != "gone" {
		t.Fatalf("answer %T %v, want the undeliverable reply to \"gone\"", m, m)
	}
	targetRemote.Shutdown(false)
	requesterSystem.EventStream.Publish(&EndpointTerminatedEvent{Address: gone.Address})
	select {
	case m := <-got:
		t.Fatalf("a second answer %T %v", m, m)
	case <-time.After(200 * time.Millisecond):
	}
}

// Hoplite patch: a request to an address that never answers the connect
// (nothing listens there) gets the registered undeliverable reply, not a
// DeadLetterResponse, and only once: the failed connect terminates the
// address, which answers the requests remembered for it, before the
// writer drops the request.
func TestRequestToAnUnreachableAddress(t *testing.T) {
	registerTestReplies(t)
	requesterSystem, _ := startRemoteSystem(t)
	requester, got := spawnRequester(t, requesterSystem, actor.NewPID("127.0.0.1:1", "node"))
	requesterSystem.Root.Send(requester, &ListProcessesRequest{Pattern: "nobody"})
	m := got.next(t, "to a request to an address nothing listens on")
	if undeliveredKey(m) != "nobody" {
		t.Fatalf("answer %T %v, want the undeliverable reply to \"nobody\"", m, m)
	}
	select {
	case m := <-got:
		t.Fatalf("a second answer %T %v", m, m)
	case <-time.After(200 * time.Millisecond):
	}
}

// Hoplite patch: the bookkeeping itself. A reply from the target's
// address ends the oldest request of its key there; a request answered
// by the termination of its address drops its target's late reply; a
// new request of the same key to that address gets its reply delivered.
func TestPendingRequestsMatchReplies(t *testing.T) {
	registerTestReplies(t)
	system := actor.NewActorSystem()
	p := newPendingRequests(system)
	sender := system.NewLocalPID("requester")
	a, b := actor.NewPID("10.0.0.1:1", "node"), actor.NewPID("10.0.0.2:1", "node")
	req := &ListProcessesRequest{Pattern: "x"}
	reply := &GetProcessDiagnosticsResponse{DiagnosticsString: "x"}

	p.sent(a, req, sender)
	p.sent(a, req, sender) // the same key twice: two replies expected
	p.sent(b, req, sender)
	if drop := p.replied(a.Address, sender, reply); drop {
		t.Fatal("the first reply from a was dropped")
	}
	p.terminated(a.Address) // answers the second request to a
	if drop := p.replied(a.Address, sender, reply); !drop {
		t.Fatal("a's late reply to a request its termination answered was delivered: a second answer")
	}
	if drop := p.replied(b.Address, sender, reply); drop {
		t.Fatal("b's reply was dropped")
	}
	p.terminated(a.Address)
	p.sent(a, req, sender) // asked again after the termination's answer
	if drop := p.replied(a.Address, sender, reply); drop {
		t.Fatal("the reply to a request sent after its address terminated was dropped")
	}
	if n := p.count.Load(); n != 0 {
		t.Fatalf("%d requests still remembered", n)
	}
	// Other messages are not remembered, and a sender of another
	// process is not this system's to answer.
	p.sent(a, &GetProcessDiagnosticsRequest{}, sender)
	p.sent(a, req, actor.NewPID("10.0.0.3:1", "someone"))
	if n := p.count.Load(); n != 0 {
		t.Fatalf("%d requests remembered, want none", n)
	}
}

// BenchmarkPendingRequest is what remembering costs a request that goes
// to another process: its send and its reply's arrival, with 1000 other
// requests open. A message of a type nothing registered pays one call
// that returns at once.
func BenchmarkPendingRequest(b *testing.B) {
	old := actor.GetRequestReplies()
	b.Cleanup(func() { actor.SetRequestReplies(old) })
	actor.SetRequestReplies(&actor.RequestReplies{
		Request: func(request interface{}) (actor.ReplyKey, time.Duration, bool) {
			m, ok := request.(*ListProcessesRequest)
			return actor.ReplyKey{Kind: "List", ID: m.GetPattern()}, time.Minute, ok
		},
		Reply: func(reply interface{}) (actor.ReplyKey, bool) {
			m, ok := reply.(*GetProcessDiagnosticsResponse)
			return actor.ReplyKey{Kind: "List", ID: m.GetDiagnosticsString()}, ok
		},
	})
	system := actor.NewActorSystem()
	p := newPendingRequests(system)
	target := actor.NewPID("10.0.0.1:1", "node")
	for i := range 1000 {
		p.sent(target, &ListProcessesRequest{Pattern: "other"}, system.NewLocalPID("open"+string(rune('a'+i%26))))
	}
	sender := system.NewLocalPID("requester")
	req := &ListProcessesRequest{Pattern: "x"}
	reply := &GetProcessDiagnosticsResponse{DiagnosticsString: "x"}
	b.ReportAllocs()
	for b.Loop() {
		p.sent(target, req, sender)
		p.replied(target.Address, sender, reply)
	}
}
