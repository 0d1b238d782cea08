package remote

import (
	"context"
	"errors"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
)

// guardedSystem is a started remote system with one actor, "inbox", that
// forwards the patterns of the ListProcessesRequests it receives.
type guardedSystem struct {
	system *actor.ActorSystem
	remote *Remote
	got    chan string
}

func startGuardedSystem(t testing.TB, opts ...ConfigOption) *guardedSystem {
	t.Helper()
	system := actor.NewActorSystem()
	cfg := Configure("127.0.0.1", 0, append([]ConfigOption{
		// Nothing leaves the machine: a message naming another address
		// (a hostile batch's PIDs) is never dialed.
		WithDialOptions(grpc.WithTransportCredentials(insecure.NewCredentials()),
			grpc.WithContextDialer(func(context.Context, string) (net.Conn, error) {
				return nil, errors.New("this test dials nothing")
			})),
	}, opts...)...)
	cfg.MaxRetryCount = 1
	r := NewRemote(system, cfg)
	r.Start()
	t.Cleanup(func() { r.Shutdown(false) })
	g := &guardedSystem{system: system, remote: r, got: make(chan string, 64)}
	_, err := system.Root.SpawnNamed(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*ListProcessesRequest); ok {
			g.got <- m.Pattern
		}
	}), "inbox")
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// connect opens a Receive stream to the system as a peer would, and
// completes its connect request.
func (g *guardedSystem) connect(t *testing.T) Remoting_ReceiveClient {
	t.Helper()
	conn, err := grpc.Dial(g.system.Address(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	t.Cleanup(cancel)
	stream, err := NewRemotingClient(conn).Receive(ctx)
	if err != nil {
		t.Fatal(err)
	}
	err = stream.Send(&RemoteMessage{MessageType: &RemoteMessage_ConnectRequest{ConnectRequest: &ConnectRequest{
		ConnectionType: &ConnectRequest_ServerConnection{ServerConnection: &ServerConnection{SystemId: "peer", Address: "127.0.0.1:1"}},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := stream.Recv(); err != nil {
		t.Fatalf("connect response: %v", err)
	}
	return stream
}

func batchMessage(b *MessageBatch) *RemoteMessage {
	return &RemoteMessage{MessageType: &RemoteMessage_MessageBatch{MessageBatch: b}}
}

func mustMarshal(t testing.TB, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// goodBatch delivers pattern to the inbox.
func goodBatch(t testing.TB, addr, pattern string) *MessageBatch {
	return &MessageBatch{
		TypeNames: []string{"hoplite.protoactor.remote.ListProcessesRequest"},
		Targets:   []*actor.PID{{Address: addr, Id: "inbox"}},
		Envelopes: []*MessageEnvelope{{MessageData: mustMarshal(t, &ListProcessesRequest{Pattern: pattern})}},
	}
}

// malformedBatches are batches a hostile peer can send; each ended the
// process before the reader checked them (index out of range, nil
// dereference), or acted on a PID the peer left out.
func malformedBatches(t testing.TB, addr string) map[string]*MessageBatch {
	inbox := []*actor.PID{{Address: addr, Id: "inbox"}}
	data := mustMarshal(t, &ListProcessesRequest{Pattern: "bad"})
	names := []string{"hoplite.protoactor.remote.ListProcessesRequest"}
	return map[string]*MessageBatch{
		"target index 7, no targets": {TypeNames: names, Envelopes: []*MessageEnvelope{{Target: 7, MessageData: data}}},
		"negative target":            {TypeNames: names, Targets: inbox, Envelopes: []*MessageEnvelope{{Target: -1, MessageData: data}}},
		"sender index past senders":  {TypeNames: names, Targets: inbox, Envelopes: []*MessageEnvelope{{Sender: 3, MessageData: data}}},
		"negative sender":            {TypeNames: names, Targets: inbox, Envelopes: []*MessageEnvelope{{Sender: -2, MessageData: data}}},
		"type index past names":      {TypeNames: names, Targets: inbox, Envelopes: []*MessageEnvelope{{TypeId: 5, MessageData: data}}},
		"no type names":              {Targets: inbox, Envelopes: []*MessageEnvelope{{MessageData: data}}},
		"unknown type name":          {TypeNames: []string{"no.such.Type"}, Targets: inbox, Envelopes: []*MessageEnvelope{{MessageData: data}}},
		"unknown serializer":         {TypeNames: names, Targets: inbox, Envelopes: []*MessageEnvelope{{SerializerId: 9, MessageData: data}}},
		"negative serializer":        {TypeNames: names, Targets: inbox, Envelopes: []*MessageEnvelope{{SerializerId: -1, MessageData: data}}},
		"bytes that do not decode":   {TypeNames: names, Targets: inbox, Envelopes: []*MessageEnvelope{{MessageData: []byte{0xff, 0xff, 0xff}}}},
		"Terminated of nobody": {TypeNames: []string{"hoplite.protoactor.actor.Terminated"}, Targets: inbox,
			Envelopes: []*MessageEnvelope{{MessageData: mustMarshal(t, &actor.Terminated{})}}},
		"Watch by nobody": {TypeNames: []string{"hoplite.protoactor.actor.Watch"}, Targets: inbox,
			Envelopes: []*MessageEnvelope{{MessageData: mustMarshal(t, &actor.Watch{})}}},
	}
}

// Hoplite patch: a malformed batch closes its stream and is counted; the
// system goes on serving other streams.
func TestMalformedBatchesCloseTheirStreamOnly(t *testing.T) {
	g := startGuardedSystem(t)
	addr := g.system.Address()
	n := int64(0)
	for name, bad := range malformedBatches(t, addr) {
		t.Run(name, func(t *testing.T) {
			stream := g.connect(t)
			if err := stream.Send(batchMessage(bad)); err != nil {
				t.Fatal(err)
			}
			// The reader ends the stream: Recv fails rather than blocking
			// until the test's deadline.
			for {
				_, err := stream.Recv()
				if err != nil {
					if status.Code(err) == codes.DeadlineExceeded {
						t.Fatal("the stream stayed open after a malformed batch")
					}
					break
				}
			}
			n++
			if got := g.remote.RejectedBatches(); got != n {
				t.Fatalf("RejectedBatches = %d, want %d", got, n)
			}
			// A good batch on a new stream is delivered.
			good := g.connect(t)
			if err := good.Send(batchMessage(goodBatch(t, addr, name))); err != nil {
				t.Fatal(err)
			}
			select {
			case got := <-g.got:
				if got != name {
					t.Fatalf("delivered %q, want %q", got, name)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("a good batch after a malformed one was not delivered")
			}
		})
	}
}

// Hoplite patch: a system that refuses remote stops keeps its actors when
// a peer sends them Stop or PoisonPill.
func TestRemoteStopRefused(t *testing.T) {
	g := startGuardedSystem(t, WithRefuseRemoteStop())
	addr := g.system.Address()
	inbox := []*actor.PID{{Address: addr, Id: "inbox"}}
	for _, typ := range []struct {
		name string
		msg  proto.Message
	}{{"hoplite.protoactor.actor.Stop", &actor.Stop{}}, {"hoplite.protoactor.actor.PoisonPill", &actor.PoisonPill{}}} {
		stream := g.connect(t)
		err := stream.Send(batchMessage(&MessageBatch{TypeNames: []string{typ.name}, Targets: inbox,
			Envelopes: []*MessageEnvelope{{MessageData: mustMarshal(t, typ.msg)}}}))
		if err != nil {
			t.Fatal(err)
		}
		for {
			if _, err := stream.Recv(); err != nil {
				break
			}
		}
	}
	if got := g.remote.RejectedBatches(); got != 2 {
		t.Fatalf("RejectedBatches = %d, want 2", got)
	}
	good := g.connect(t)
	if err := good.Send(batchMessage(goodBatch(t, addr, "still here"))); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.got:
	case <-time.After(10 * time.Second):
		t.Fatal("the inbox stopped: a remote Stop reached it")
	}
}

// Hoplite patch: the diagnostics calls answer Unimplemented; upstream
// panicked in them, and gRPC does not recover a handler's panic.
func TestDiagnosticsCallsAnswerUnimplemented(t *testing.T) {
	g := startGuardedSystem(t)
	conn, err := grpc.Dial(g.system.Address(), grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c := NewRemotingClient(conn)
	if _, err := c.ListProcesses(ctx, &ListProcessesRequest{}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("ListProcesses: %v, want Unimplemented", err)
	}
	if _, err := c.GetProcessDiagnostics(ctx, &GetProcessDiagnosticsRequest{}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("GetProcessDiagnostics: %v, want Unimplemented", err)
	}
}

// FuzzMessageBatch hands any batch a peer can encode to the reader's
// batch handling, without its recover: a panic is a bug to fix, not one
// to rely on the recover for. Every PID address in the batch is its own
// system's or one this test's dialer refuses, so nothing is dialed.
func FuzzMessageBatch(f *testing.F) {
	g := startGuardedSystem(f)
	addr := g.system.Address()
	f.Add(mustMarshal(f, goodBatch(f, addr, "seed")))
	for _, b := range malformedBatches(f, addr) {
		f.Add(mustMarshal(f, b))
	}
	reader := g.remote.edpReader
	f.Fuzz(func(t *testing.T, data []byte) {
		var b MessageBatch
		if proto.Unmarshal(data, &b) != nil {
			return
		}
		err := reader.onMessageBatch(&b, "")
		var malformed *MalformedError
		if err != nil && !errors.As(err, &malformed) {
			t.Fatalf("a refused batch's error is %T (%v), not *MalformedError", err, err)
		}
		for len(g.got) > 0 {
			<-g.got
		}
	})
}
