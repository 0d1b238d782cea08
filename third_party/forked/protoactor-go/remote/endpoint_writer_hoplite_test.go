package remote

import (
	"net"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"google.golang.org/grpc"
)

// silentRemoting accepts a connection's stream and never answers its
// connect request, as a member whose endpoint reader is suspended (it is
// shutting down) does.
type silentRemoting struct {
	UnimplementedRemotingServer
}

func (silentRemoting) Receive(stream Remoting_ReceiveServer) error {
	<-stream.Context().Done()
	return nil
}

// Hoplite patch: a system that shuts down while one of its endpoint
// writers waits for a peer's answer to its connect request stops at once.
// The writer waited on the stream with no end, so stopping the endpoint
// supervisor (which waits for the writer to stop) timed out after 10 s,
// and a node's Stop with it (the chaos test's "Stop was still running
// after 5s", seen once in a few hundred seeds).
func TestShutdownDuringAnUnansweredConnect(t *testing.T) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	RegisterRemotingServer(srv, silentRemoting{})
	go srv.Serve(lis)
	defer srv.Stop()

	system := actor.NewActorSystem()
	cfg := Configure("127.0.0.1", 0)
	cfg.MaxRetryCount = 1 // as a Hoplite member's (internal/member/tls.go)
	r := NewRemote(system, cfg)
	r.Start()
	// The writer starts connecting on the first message to that address.
	system.Root.Send(actor.NewPID(lis.Addr().String(), "someone"), &Ping{})
	time.Sleep(200 * time.Millisecond) // let it reach the connect request

	done := make(chan struct{})
	go func() {
		r.Shutdown(false)
		close(done)
	}()
	// Well under the 10 s the supervisor's stop waited before giving up.
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown still running after 5 s: the endpoint writer is stuck in its connect")
	}
}

// Hoplite patch: a killed Remote's Shutdown returns within the teardown
// bound even when gRPC's ClientConn.Close and Server.Stop do not return
// (close_bounded_hoplite.go). Without the bound it waited on them: the
// endpoint supervisor's stop for 10 s, the server's stop for ever.
func TestShutdownOutlastsAStuckGRPCTeardown(t *testing.T) {
	peer, _ := startRemoteSystem(t)
	target, parked := spawnTarget(t, peer)

	system := actor.NewActorSystem()
	cfg := Configure("127.0.0.1", 0)
	cfg.MaxRetryCount = 1
	r := NewRemote(system, cfg)
	release := make(chan struct{})
	t.Cleanup(func() { close(release) }) // the real close and stop then run
	closes, stops := make(chan struct{}, 8), make(chan struct{}, 8)
	r.teardown.closeConn = func(c *grpc.ClientConn) error {
		closes <- struct{}{}
		<-release
		return c.Close()
	}
	r.teardown.stopServer = func(s *grpc.Server) {
		stops <- struct{}{}
		<-release
		s.Stop()
	}
	r.teardown.wait = 200 * time.Millisecond
	r.Start()
	// The first message to the peer's address starts a writer's connection.
	system.Root.Send(target, &ListProcessesRequest{Pattern: "hello"})
	select {
	case <-parked:
	case <-time.After(10 * time.Second):
		t.Fatal("the message did not reach the peer")
	}

	done := make(chan struct{})
	go func() {
		r.Shutdown(false)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Shutdown still running after 5 s: it waits on gRPC's teardown")
	}
	for what, ch := range map[string]chan struct{}{"the writer's ClientConn.Close": closes, "the server's Stop": stops} {
		select {
		case <-ch:
		default:
			t.Errorf("%s was never called", what)
		}
	}
}
