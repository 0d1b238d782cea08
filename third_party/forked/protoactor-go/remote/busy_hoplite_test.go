package remote

import (
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
)

// Hoplite patch: a peer's requests to an actor whose mailbox is full are
// answered with their Busy reply and counted, not queued: the target's
// mailbox stays within MaxQueuedFromRemote however fast the peer sends,
// and every request gets exactly one answer (served later, or refused
// now).
func TestPeerMessagesToAFullMailboxAreRefused(t *testing.T) {
	old := actor.GetRequestReplies()
	t.Cleanup(func() { actor.SetRequestReplies(old) })
	actor.SetRequestReplies(&actor.RequestReplies{
		Busy: func(request interface{}, target *actor.PID, queued, limit int) (interface{}, bool) {
			m, ok := request.(*ListProcessesRequest)
			if !ok {
				return nil, false
			}
			return &ListProcessesResponse{Pids: []*actor.PID{{Id: "busy:" + m.Pattern}}}, true
		},
	})
	const limit, sent = 4, 20
	// The target system: a slow actor that holds its first message until
	// released, then answers each.
	server := actor.NewActorSystem()
	scfg := Configure("127.0.0.1", 0, WithMaxQueuedFromRemote(limit))
	scfg.MaxRetryCount = 1
	sr := NewRemote(server, scfg)
	sr.Start()
	defer sr.Shutdown(false)
	release := make(chan struct{})
	_, err := server.Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*ListProcessesRequest); ok {
			<-release
			ctx.Respond(&ListProcessesResponse{Pids: []*actor.PID{{Id: "served:" + m.Pattern}}})
		}
	}), "slow")
	if err != nil {
		t.Fatal(err)
	}
	// The requesting system.
	client := actor.NewActorSystem()
	ccfg := Configure("127.0.0.1", 0)
	ccfg.MaxRetryCount = 1
	cr := NewRemote(client, ccfg)
	cr.Start()
	defer cr.Shutdown(false)
	answers := make(chan string, 2*sent)
	slow := actor.NewPID(server.Address(), "slow")
	requester := client.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case string:
			for i := range sent {
				ctx.Request(slow, &ListProcessesRequest{Pattern: fmt.Sprint(i)})
			}
		case *ListProcessesResponse:
			answers <- m.Pids[0].Id
		}
	}))
	client.Root.Send(requester, "go")
	// Refusals come while the slow actor holds its first message: at
	// most limit queue behind it (limit+1 if it had not taken it yet).
	byPattern := map[string]string{}
	refused := 0
	take := func(within time.Duration) bool {
		select {
		case a := <-answers:
			kind, pattern, _ := strings.Cut(a, ":")
			if prev, ok := byPattern[pattern]; ok {
				t.Fatalf("request %s answered twice: %s, then %s", pattern, prev, kind)
			}
			byPattern[pattern] = kind
			if kind == "busy" {
				refused++
			}
			return true
		case <-time.After(within):
			return false
		}
	}
	for refused < sent-limit-1 {
		if !take(10 * time.Second) {
			t.Fatalf("%d requests refused, want at least %d (one held, %d queued)", refused, sent-limit-1, limit)
		}
	}
	for take(200 * time.Millisecond) {
	}
	if len(byPattern) != refused {
		t.Fatalf("a request was served while the slow actor held its first: %v", byPattern)
	}
	close(release)
	for len(byPattern) < sent {
		if !take(10 * time.Second) {
			t.Fatalf("%d of %d requests answered: %v", len(byPattern), sent, byPattern)
		}
	}
	if served := sent - refused; served < limit || served > limit+1 {
		t.Fatalf("%d served, want %d or %d", served, limit, limit+1)
	}
	if got := sr.RefusedBusy(); got != int64(refused) {
		t.Fatalf("RefusedBusy = %d, want %d", got, refused)
	}
}

// Hoplite patch: requests to a peer that does not read queue in its
// endpoint writer only up to MaxQueuedToRemote; past it each is
// answered with its Busy reply at once.
func TestRequestsToAPeerThatDoesNotReadAreBounded(t *testing.T) {
	old := actor.GetRequestReplies()
	t.Cleanup(func() { actor.SetRequestReplies(old) })
	actor.SetRequestReplies(&actor.RequestReplies{
		Busy: func(request interface{}, target *actor.PID, queued, limit int) (interface{}, bool) {
			m, ok := request.(*ListProcessesRequest)
			if !ok {
				return nil, false
			}
			return &ListProcessesResponse{Pids: []*actor.PID{{Id: "busy:" + m.Pattern}}}, true
		},
	})
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	RegisterRemotingServer(srv, silentRemoting{})
	go srv.Serve(lis)
	defer srv.Stop()

	const limit, sent = 5, 40
	system := actor.NewActorSystem()
	cfg := Configure("127.0.0.1", 0, WithMaxQueuedToRemote(limit))
	cfg.MaxRetryCount = 1
	r := NewRemote(system, cfg)
	r.Start()
	defer r.Shutdown(false)
	answers := make(chan string, sent)
	peer := actor.NewPID(lis.Addr().String(), "someone")
	requester := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case string:
			for i := range sent {
				ctx.Request(peer, &ListProcessesRequest{Pattern: fmt.Sprint(i)})
			}
		case *ListProcessesResponse:
			answers <- m.Pids[0].Id
		}
	}))
	system.Root.Send(requester, "go")
	// The writer waits for the peer's connect answer, which never comes:
	// at most limit queue behind it (plus what it took before it began
	// to connect).
	refused := 0
	for refused < sent-2*limit {
		select {
		case a := <-answers:
			if !strings.HasPrefix(a, "busy:") {
				t.Fatalf("answer %q from a peer that answers nothing", a)
			}
			refused++
		case <-time.After(10 * time.Second):
			t.Fatalf("%d requests refused, want at least %d", refused, sent-2*limit)
		}
	}
	if got := r.RefusedBusy(); got < int64(refused) {
		t.Fatalf("RefusedBusy = %d, want at least %d", got, refused)
	}
}

// Hoplite patch: messages that fit one by one but not together are sent
// in batches cut at MaxMessageSize; a batch past gRPC's limit was
// refused whole and the writer tore the connection down.
func TestBatchesAreCutAtTheMessageLimit(t *testing.T) {
	server := actor.NewActorSystem()
	scfg := Configure("127.0.0.1", 0)
	scfg.MaxRetryCount = 1
	sr := NewRemote(server, scfg)
	sr.Start()
	defer sr.Shutdown(false)
	got := make(chan string, 16)
	if _, err := server.Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*ListProcessesRequest); ok {
			got <- m.Pattern[:1]
		}
	}), "inbox"); err != nil {
		t.Fatal(err)
	}
	// gRPC sends at most 2,000 bytes a message; the writer cuts at 1,800.
	client := actor.NewActorSystem()
	ccfg := Configure("127.0.0.1", 0, WithMaxMessageSize(1800),
		WithDialOptions(grpc.WithTransportCredentials(insecure.NewCredentials()), grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(2000))))
	ccfg.MaxRetryCount = 1
	cr := NewRemote(client, ccfg)
	cr.Start()
	defer cr.Shutdown(false)
	inbox := actor.NewPID(server.Address(), "inbox")
	// Sent at once, they reach the writer together: one batch of 3.6 KB
	// unless it is cut.
	for _, p := range []string{"a", "b", "c", "d"} {
		client.Root.Send(inbox, &ListProcessesRequest{Pattern: p + strings.Repeat("x", 900)})
	}
	seen := map[string]bool{}
	for len(seen) < 4 {
		select {
		case p := <-got:
			seen[p] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("delivered %v of 4 messages of 900 bytes", seen)
		}
	}
}
