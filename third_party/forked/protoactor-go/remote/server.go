package remote

import (
	"context"
	"fmt"
	"io/ioutil"
	"log/slog"
	"net"
	"sync/atomic"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/extensions"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"google.golang.org/grpc"
	"google.golang.org/grpc/grpclog"
)

var extensionId = extensions.NextExtensionID()

type Remote struct {
	actorSystem  *actor.ActorSystem
	s            *grpc.Server
	edpReader    *endpointReader
	edpManager   *endpointManager
	config       *Config
	kinds        map[string]*actor.Props
	activatorPid *actor.PID
	blocklist    *BlockList
	rejects      rejectLog // Hoplite patch: batches refused (reader_guard.go)
	// Hoplite patch: peers' messages refused at a full mailbox
	// (reader_guard.go).
	refusedBusy atomic.Int64
	busyLog     rejectLog
	// Hoplite patch: requests sent and not yet answered
	// (pending_requests_hoplite.go).
	pending *pendingRequests
	// Hoplite patch: gRPC's teardown, bounded (close_bounded_hoplite.go).
	teardown teardown
}

func NewRemote(actorSystem *actor.ActorSystem, config *Config) *Remote {
	r := &Remote{
		actorSystem: actorSystem,
		config:      config,
		kinds:       make(map[string]*actor.Props),
		blocklist:   NewBlockList(),
		pending:     newPendingRequests(actorSystem),
		teardown:    defaultTeardown(),
	}
	for k, v := range config.Kinds {
		r.kinds[k] = v
	}

	actorSystem.Extensions.Register(r)

	return r
}

//goland:noinspection GoUnusedExportedFunction
func GetRemote(actorSystem *actor.ActorSystem) *Remote {
	r := actorSystem.Extensions.Get(extensionId)

	return r.(*Remote)
}

// Hoplite patch: grpc's logger is process-global. Upstream set it on
// every Start, which raced with the gRPC servers and clients of the
// members started before (several members in one process under -race).
// Setting it at package init happens before any of them runs.
func init() {
	grpclog.SetLoggerV2(grpclog.NewLoggerV2(ioutil.Discard, ioutil.Discard, ioutil.Discard))
}

func (r *Remote) ExtensionID() extensions.ExtensionID {
	return extensionId
}

func (r *Remote) BlockList() *BlockList { return r.blocklist }

// Start the remote server
func (r *Remote) Start() {
	// Hoplite patch: the accepted connections' keep-alive is the config's.
	lc := net.ListenConfig{KeepAliveConfig: r.config.ListenKeepAlive}
	lis, err := lc.Listen(context.Background(), "tcp", r.config.Address())
	if err != nil {
		// Hoplite patch: %w, so that a port in use is errors.Is(EADDRINUSE).
		panic(fmt.Errorf("failed to listen: %w", err))
	}

	var address string
	if r.config.AdvertisedHost != "" {
		address = r.config.AdvertisedHost
	} else {
		address = lis.Addr().String()
	}

	r.actorSystem.ProcessRegistry.RegisterAddressResolver(r.remoteHandler)
	r.actorSystem.ProcessRegistry.Address = address
	r.Logger().Info("Starting remote with address", slog.String("address", address))

	r.edpManager = newEndpointManager(r)
	r.edpManager.start()

	r.s = grpc.NewServer(r.config.ServerOptions...)
	r.edpReader = newEndpointReader(r)
	RegisterRemotingServer(r.s, r.edpReader)
	r.Logger().Info("Starting Proto.Actor server", slog.String("address", address))
	go r.s.Serve(lis)
}

func (r *Remote) Shutdown(graceful bool) {
	if graceful {
		// TODO: need more graceful
		r.edpReader.suspend(true)
		r.edpManager.stop()

		// For some reason GRPC doesn't want to stop
		// Setup timeout as workaround but need to figure out in the future.
		// TODO: grpc not stopping
		c := make(chan bool, 1)
		go func() {
			r.s.GracefulStop()
			c <- true
		}()

		select {
		case <-c:
			r.Logger().Info("Stopped Proto.Actor server")
		case <-time.After(time.Second * 10):
			r.s.Stop()
			r.Logger().Info("Stopped Proto.Actor server", slog.String("err", "timeout"))
		}
	} else {
		// Hoplite patch: a non-graceful shutdown is what a killed process
		// does: incoming and outgoing connections close at once (upstream
		// stopped only the server, and the endpoints to other members kept
		// delivering this system's messages).
		r.edpReader.suspend(true)
		r.stopServerWithin()
		r.edpManager.stop()
		r.Logger().Info("Killed Proto.Actor server")
	}
}

func (r *Remote) SendMessage(pid *actor.PID, header actor.ReadonlyMessageHeader, message interface{}, sender *actor.PID, serializerID int32) {
	rd := &remoteDeliver{
		header:       header,
		message:      message,
		sender:       sender,
		target:       pid,
		serializerID: serializerID,
	}
	r.edpManager.remoteDeliver(rd)
}

func (r *Remote) Logger() *slog.Logger {
	return r.actorSystem.Logger()
}
