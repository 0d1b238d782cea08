package remote

import (
	"net"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"google.golang.org/grpc"
)

// heldRemoting accepts a connection's stream, says so on accepted, and
// answers nothing until the stream ends: the writer that opened it stays
// in its connect, and so does not stop, until the manager's streams are
// canceled.
type heldRemoting struct {
	UnimplementedRemotingServer
	accepted chan struct{}
}

func (h heldRemoting) Receive(stream Remoting_ReceiveServer) error {
	select {
	case h.accepted <- struct{}{}:
	default:
	}
	<-stream.Context().Done()
	return nil
}

// Hoplite patch: an endpoint asked of the endpoint supervisor once it is
// stopping is refused. A request processed then (one sent by a sender
// that saw the manager still running, or queued behind the supervisor's
// Stop, which as a system message goes first) spawned a writer and a
// watcher that nothing ever stopped: the manager had already stopped
// listening for the endpoint events that stop them, so the supervisor
// waited for them without end and Shutdown gave up after 10 s ("stop
// endpoint supervisor failed: future: timeout"; the chaos test's "Stop
// was still running after 5s", about 1 seed in 1000).
func TestEndpointRequestedWhileTheSupervisorStops(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	held := heldRemoting{accepted: make(chan struct{}, 1)}
	srv := grpc.NewServer()
	RegisterRemotingServer(srv, held)
	go srv.Serve(lis)
	defer srv.Stop()

	system := actor.NewActorSystem()
	cfg := Configure("127.0.0.1", 0)
	cfg.MaxRetryCount = 1 // as a Hoplite member's (internal/member/tls.go)
	r := NewRemote(system, cfg)
	r.Start()
	defer r.Shutdown(false)
	em := r.edpManager

	// A writer in its connect keeps the supervisor stopping (it waits for
	// its children) for as long as the test needs.
	system.Root.Send(actor.NewPID(lis.Addr().String(), "someone"), &Ping{})
	select {
	case <-held.accepted:
	case <-time.After(10 * time.Second):
		t.Fatal("the endpoint writer never connected")
	}

	// As stop does: the endpoint events are no longer heard, then the
	// supervisor stops.
	system.EventStream.Unsubscribe(em.endpointSub)
	stopped := system.Root.StopFuture(em.endpointSupervisor)

	// An endpoint asked for now, while the supervisor waits for the writer.
	// The address is closed: a writer spawned for it fails at once.
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closedAddr := closed.Addr().String()
	closed.Close()
	rst, err := system.Root.RequestFuture(em.endpointSupervisor, closedAddr, 10*time.Second).Result()
	if err != nil {
		t.Fatalf("the stopping supervisor did not answer: %v", err)
	}
	if ep, ok := rst.(*endpoint); ok {
		t.Errorf("the stopping supervisor spawned an endpoint: writer %v, watcher %v", ep.writer, ep.watcher)
	}

	em.cancelStream() // the first writer's connect ends, and it stops
	// StopFuture's own deadline (10 s) bounds the wait.
	if err := stopped.Wait(); err != nil {
		t.Fatalf("the endpoint supervisor did not stop: %v", err)
	}
}
