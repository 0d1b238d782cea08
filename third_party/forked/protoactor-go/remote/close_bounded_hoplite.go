package remote

import (
	"log/slog"
	"time"

	"google.golang.org/grpc"
)

// Hoplite patch: a stopping endpoint writer and a killed server wait for
// gRPC's teardown only so long. gRPC's ClientConn.Close waits for its
// resolver's and balancer's callback goroutines, and Server.Stop for
// every connection's reader to leave its socket; under heavy load (the
// chaos test, 56 scheduling pauses of 23.5 s in all on a 2-vCPU VM)
// three writers' Close had not returned after 15 s, so the endpoint
// supervisor's stop, the Remote's Shutdown and the member's Stop waited
// with them. Past the bound the close goes on in the background, where
// it ends whenever gRPC's goroutines run; nothing waits for it and
// nothing reuses what it closes.

// defaultTeardownWait bounds each wait for one part of gRPC's teardown.
const defaultTeardownWait = time.Second

// teardown is how a Remote closes gRPC's parts: gRPC's own calls, and
// the bound; a test replaces them before Start.
type teardown struct {
	closeConn  func(*grpc.ClientConn) error
	stopServer func(*grpc.Server)
	wait       time.Duration
}

func defaultTeardown() teardown {
	return teardown{closeConn: (*grpc.ClientConn).Close, stopServer: (*grpc.Server).Stop, wait: defaultTeardownWait}
}

// closeConnWithin closes an endpoint writer's connection to address,
// waiting at most the bound.
func (r *Remote) closeConnWithin(address string, conn *grpc.ClientConn) {
	closeConn := r.teardown.closeConn
	r.waitBounded("EndpointWriter's client connection close", address, func() error { return closeConn(conn) })
}

// stopServerWithin stops the Remote's server, waiting at most the bound.
func (r *Remote) stopServerWithin() {
	stop, s := r.teardown.stopServer, r.s
	r.waitBounded("server stop", r.actorSystem.Address(), func() error { stop(s); return nil })
}

// waitBounded runs f on a goroutine of its own and waits for it, at most
// the bound; what says what f does, for the log.
func (r *Remote) waitBounded(what, address string, f func() error) {
	done := make(chan error, 1)
	go func() { done <- f() }()
	timer := time.NewTimer(r.teardown.wait)
	defer timer.Stop()
	select {
	case err := <-done:
		if err != nil {
			r.Logger().Error("gRPC teardown failed", slog.String("what", what), slog.String("address", address), slog.Any("error", err))
		}
	case <-timer.C:
		r.Logger().Warn("gRPC teardown still running: left to finish in the background", slog.String("what", what),
			slog.String("address", address), slog.Duration("waited", r.teardown.wait))
	}
}
