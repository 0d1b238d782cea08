package opentracing

import (
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor/middleware/propagator"
)

func TracingMiddleware() actor.SpawnMiddleware {
	return propagator.New().
		WithItselfForwarded().
		WithSpawnMiddleware(SpawnMiddleware()).
		WithSenderMiddleware(SenderMiddleware()).
		WithReceiverMiddleware(ReceiverMiddleware()).
		SpawnMiddleware
}
