package processtest

import (
	"context"
	"net/http"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/remote"
)

// TestProcessMalformedRemoteMessages: batches a hostile peer sends to a
// member's remote port (indices past their tables, a type nobody
// registered, a serializer that does not exist, a Terminated of nobody,
// a Stop of its store node) and the diagnostics calls each fail that
// peer's stream or call; the member keeps its objects and keeps serving,
// and counts what it refused. Each batch ended the process before the
// endpoint reader checked it.
func TestProcessMalformedRemoteMessages(t *testing.T) {
	t.Parallel()
	bin := hopliteBinary(t)
	slots, seeds := memberSlots(t, 2)
	a := startNode(t, bin, slots[0], seeds)
	b := startNode(t, bin, slots[1], seeds)
	a.waitStarted(t, 60*time.Second)
	b.waitStarted(t, 60*time.Second)
	c := newTestClient(t)
	c.converge(t, a, b)
	data := randomBytes(54, 1<<20)
	putRetry(t, c.of(a), "held-by-a", data)

	store := a.store()
	targets := []*actor.PID{{Address: a.address, Id: store.Id}}
	payload := func(m proto.Message) []byte {
		b, err := proto.Marshal(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	pid := []string{"hoplite.protoactor.actor.PID"}
	bad := map[string]*remote.MessageBatch{
		"target index 7, no targets": {TypeNames: pid, Envelopes: []*remote.MessageEnvelope{{Target: 7}}},
		"sender index past senders":  {TypeNames: pid, Targets: targets, Envelopes: []*remote.MessageEnvelope{{Sender: 4}}},
		"type index past names":      {TypeNames: pid, Targets: targets, Envelopes: []*remote.MessageEnvelope{{TypeId: 3}}},
		"unknown type":               {TypeNames: []string{"no.such.Type"}, Targets: targets, Envelopes: []*remote.MessageEnvelope{{}}},
		"unknown serializer":         {TypeNames: pid, Targets: targets, Envelopes: []*remote.MessageEnvelope{{SerializerId: 77}}},
		"Terminated of nobody": {TypeNames: []string{"hoplite.protoactor.actor.Terminated"}, Targets: targets,
			Envelopes: []*remote.MessageEnvelope{{MessageData: payload(&actor.Terminated{})}}},
		"Stop of the store node": {TypeNames: []string{"hoplite.protoactor.actor.Stop"}, Targets: targets,
			Envelopes: []*remote.MessageEnvelope{{MessageData: payload(&actor.Stop{})}}},
	}

	conn, err := grpc.Dial(a.address, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	rc := remote.NewRemotingClient(conn)
	for name, batch := range bad {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		stream, err := rc.Receive(ctx)
		if err != nil {
			t.Fatalf("%s: open a stream: %v", name, err)
		}
		err = stream.Send(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_ConnectRequest{ConnectRequest: &remote.ConnectRequest{
			ConnectionType: &remote.ConnectRequest_ServerConnection{ServerConnection: &remote.ServerConnection{SystemId: "hostile", Address: "127.0.0.1:1"}}}}})
		if err == nil {
			_, err = stream.Recv()
		}
		if err != nil {
			t.Fatalf("%s: connect: %v", name, err)
		}
		if err := stream.Send(&remote.RemoteMessage{MessageType: &remote.RemoteMessage_MessageBatch{MessageBatch: batch}}); err != nil {
			t.Fatalf("%s: send: %v", name, err)
		}
		for err == nil {
			_, err = stream.Recv()
		}
		if status.Code(err) == codes.DeadlineExceeded {
			t.Fatalf("%s: the member kept the stream open", name)
		}
		cancel()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := rc.ListProcesses(ctx, &remote.ListProcessesRequest{}); status.Code(err) != codes.Unimplemented {
		t.Fatalf("ListProcesses: %v, want Unimplemented", err)
	}

	select {
	case <-a.exited:
		t.Fatalf("the member exited: %v\n%s", a.exitErr, tail(a.stderr.String(), 20))
	default:
	}
	// Still serving, its store node running: its object crosses to b, and
	// it takes a new one.
	getExact(t, c.of(b), "held-by-a", data)
	putRetry(t, c.of(a), "after-the-batches", data[:4096])
	getExact(t, c.of(b), "after-the-batches", data[:4096])
	code, m := scrape(t, a, "/metrics")
	if code != http.StatusOK {
		t.Fatalf("/metrics: %d", code)
	}
	if got := sample(m, "hoplite_remote_rejected_batches_total", ""); got != float64(len(bad)) {
		t.Fatalf("hoplite_remote_rejected_batches_total = %v, want %d", got, len(bad))
	}
}
