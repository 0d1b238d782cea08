package remote

import (
	"fmt"
	"net"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"google.golang.org/grpc"
)

func defaultConfig() *Config {
	return &Config{
		AdvertisedHost:           "",
		DialOptions:              []grpc.DialOption{grpc.WithInsecure()},
		EndpointWriterBatchSize:  1000,
		EndpointManagerBatchSize: 1000,
		EndpointWriterQueueSize:  1000000,
		EndpointManagerQueueSize: 1000000,
		Kinds:                    make(map[string]*actor.Props),
		MaxRetryCount:            5,
	}
}

func newConfig(options ...ConfigOption) *Config {
	config := defaultConfig()
	for _, option := range options {
		option(config)
	}
	return config
}

// Address returns the address of the remote
func (rc Config) Address() string {
	return fmt.Sprintf("%v:%v", rc.Host, rc.Port)
}

// Configure configures the remote
func Configure(host string, port int, options ...ConfigOption) *Config {
	c := newConfig(options...)
	c.Host = host
	c.Port = port

	return c
}

// Config is the configuration for the remote
type Config struct {
	Host                     string
	Port                     int
	AdvertisedHost           string
	ServerOptions            []grpc.ServerOption
	CallOptions              []grpc.CallOption
	DialOptions              []grpc.DialOption
	EndpointWriterBatchSize  int
	EndpointWriterQueueSize  int
	EndpointManagerBatchSize int
	EndpointManagerQueueSize int
	Kinds                    map[string]*actor.Props
	MaxRetryCount            int
	// RefuseRemoteStop (Hoplite patch) refuses Stop and PoisonPill sent
	// from another process: a system whose actors are stopped only by
	// their own process sets it, so that a peer cannot stop them.
	RefuseRemoteStop bool
	// MaxMessageSize (Hoplite patch), if positive, is the most bytes an
	// endpoint writer sends in one batch: a message that alone encodes
	// to more is not sent (a registered request is answered with its
	// TooLarge reply, anything else is logged and dead-lettered), and a
	// batch is cut before it would pass it. Upstream sent it, gRPC
	// refused the whole batch, and the writer tore the connection down:
	// every request open to that address failed with it. Set it to the
	// gRPC send limit less a margin for the batch's tables.
	MaxMessageSize int
	// MaxQueuedFromRemote (Hoplite patch), if positive, bounds the user
	// messages a local actor may have queued for the endpoint reader to
	// deliver it one more from a peer: past it the message is refused (a
	// registered request is answered with its Busy reply, anything else
	// is dropped), counted (Remote.RefusedBusy) and logged. A peer that
	// sends faster than an actor handles its messages grew that actor's
	// mailbox without bound; messages from the actor's own process are
	// never refused.
	MaxQueuedFromRemote int
	// ListenKeepAlive (Hoplite patch) is the TCP keep-alive of the
	// connections the server accepts; its zero value is Go's (a probe
	// every 15 s of idleness).
	ListenKeepAlive net.KeepAliveConfig
	// MaxQueuedToRemote (Hoplite patch), if positive, bounds the messages
	// an endpoint writer holds for its peer: past it a message is refused
	// (a registered request is answered with its Busy reply, anything
	// else is dead-lettered), counted (Remote.RefusedBusy) and logged. A
	// peer that stopped reading grew the queue without bound.
	MaxQueuedToRemote int
}
