package remote

import (
	"net"

	"google.golang.org/grpc"
)

// WithListenKeepAlive (Hoplite patch) sets the TCP keep-alive of the
// connections the server accepts (Config.ListenKeepAlive).
func WithListenKeepAlive(ka net.KeepAliveConfig) ConfigOption {
	return func(config *Config) {
		config.ListenKeepAlive = ka
	}
}

type ConfigOption func(config *Config)

// WithEndpointWriterBatchSize sets the batch size for the endpoint writer
func WithEndpointWriterBatchSize(batchSize int) ConfigOption {
	return func(config *Config) {
		config.EndpointWriterBatchSize = batchSize
	}
}

// WithEndpointWriterQueueSize sets the queue size for the endpoint writer
func WithEndpointWriterQueueSize(queueSize int) ConfigOption {
	return func(config *Config) {
		config.EndpointWriterQueueSize = queueSize
	}
}

// WithEndpointManagerBatchSize sets the batch size for the endpoint manager
func WithEndpointManagerBatchSize(batchSize int) ConfigOption {
	return func(config *Config) {
		config.EndpointManagerBatchSize = batchSize
	}
}

// WithEndpointManagerQueueSize sets the queue size for the endpoint manager
func WithEndpointManagerQueueSize(queueSize int) ConfigOption {
	return func(config *Config) {
		config.EndpointManagerQueueSize = queueSize
	}
}

// WithDialOptions sets the dial options for the remote
func WithDialOptions(options ...grpc.DialOption) ConfigOption {
	return func(config *Config) {
		config.DialOptions = options
	}
}

// WithServerOptions sets the server options for the remote
func WithServerOptions(options ...grpc.ServerOption) ConfigOption {
	return func(config *Config) {
		config.ServerOptions = options
	}
}

// WithCallOptions sets the call options for the remote
func WithCallOptions(options ...grpc.CallOption) ConfigOption {
	return func(config *Config) {
		config.CallOptions = options
	}
}

// WithAdvertisedHost sets the advertised host for the remote
func WithAdvertisedHost(address string) ConfigOption {
	return func(config *Config) {
		config.AdvertisedHost = address
	}
}

// WithKinds adds the kinds to the remote
func WithKinds(kinds ...*Kind) ConfigOption {
	return func(config *Config) {
		for _, k := range kinds {
			config.Kinds[k.Kind] = k.Props
		}
	}
}

// WithRefuseRemoteStop (Hoplite patch) refuses Stop and PoisonPill from
// other processes: the batch that carries one is refused, counted and
// its stream closed (see Remote.RejectedBatches).
func WithRefuseRemoteStop() ConfigOption {
	return func(config *Config) {
		config.RefuseRemoteStop = true
	}
}

// WithMaxMessageSize (Hoplite patch) bounds what an endpoint writer sends
// in one batch (see Config.MaxMessageSize).
func WithMaxMessageSize(n int) ConfigOption {
	return func(config *Config) {
		config.MaxMessageSize = n
	}
}

// WithMaxQueuedFromRemote (Hoplite patch) bounds the queue a peer's
// messages may grow in a local actor's mailbox (see
// Config.MaxQueuedFromRemote).
func WithMaxQueuedFromRemote(n int) ConfigOption {
	return func(config *Config) {
		config.MaxQueuedFromRemote = n
	}
}

// WithMaxQueuedToRemote (Hoplite patch) bounds the messages an endpoint
// writer holds for its peer (see Config.MaxQueuedToRemote).
func WithMaxQueuedToRemote(n int) ConfigOption {
	return func(config *Config) {
		config.MaxQueuedToRemote = n
	}
}
