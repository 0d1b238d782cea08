package storeactor

import (
	"context"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/internal/actors/shardactor"
	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/messages"
)

// Locator carries a fetch's Locate to the object's directory shard and
// returns the shard's answer (the inline bytes, a sender to stream from,
// or the shard's error), or why there is none. ctx bounds the call, and
// ending it withdraws the Locate at the shard. The cluster's asks a shard
// on its own member in process (internal/actors/shardactor.LocateHere) and one on
// another member on the data plane (CallLocate); how it travels is the
// Locator's business, not the fetch's.
type Locator func(ctx context.Context, shard *actor.PID, l *messages.Locate) (*messages.LocateReply, error)

// requestLocate is the Locator of a node without one: an actor message
// to the shard (internal/actors/shardactor.RequestLocate).
func requestLocate(system *actor.ActorSystem) Locator {
	return func(ctx context.Context, pid *actor.PID, l *messages.Locate) (*messages.LocateReply, error) {
		return shardactor.RequestLocate(ctx, system.Root, pid, l)
	}
}

// callLocate asks the shard for l with locate on the actors' pooled
// workers (callRunner), bounded by the Locate's own timeout and a
// margin for the shard's answer at that deadline, and hands its end to
// the store node self as a fetchLocated of run; the returned cancel
// hangs it up. l is the protocol's: it builds each Locate anew and keeps
// no reference to it.
//
// A Locate and its answer are most of a small Get's latency: on the data
// plane across two processes an inline Get took 0.93x the time of one
// whose Locate was an actor message.
func callLocate(system *actor.ActorSystem, self *actor.PID, locate Locator, pid *actor.PID, l *messages.Locate, run *fetchRun) context.CancelFunc {
	attempt := l.GetAttempt()
	cctx, cancel := context.WithTimeout(context.Background(), time.Duration(l.GetTimeoutMs())*time.Millisecond+locateCallMargin)
	callRunner.Schedule(func() {
		defer cancel()
		reply, err := locate(cctx, pid, l)
		system.Root.Send(self, &fetchLocated{run: run, attempt: attempt, reply: reply, err: err})
	})
	return cancel
}

// callRunner runs the Locate calls on the actors' pooled worker
// goroutines (actorutil.Dispatcher) rather than a fresh goroutine each,
// whose stack the call and the reply's decoding would grow again every
// time.
var callRunner = actorutil.Dispatcher

// locateCallMargin is how long a Locate call waits past the timeout it
// gives the shard.
const locateCallMargin = time.Second
