// Package naive is the baseline without collectives, which the naive
// experiment (experiments.Set.Naive) measures Hoplite against: every Get
// fetches the object from its creator, and a Reduce's caller Gets every
// source itself, reduces the first num to arrive, and Puts the target.
//
// It is part of neither the store node nor the directory. A member of a
// naive cluster gives its directory shards FromCreator as their sender
// policy (directory.TableConfig.Senders), and spawns its store node with
// Middleware, which takes each Reduce before the store node sees it and
// drives it with the node's own ordinary Gets and Put, as any client of
// the node would.
package naive

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/internal/actors/storeactor"
	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/reduction"
	"github.com/hoplite-go/hoplite/internal/reduction/kernel"
	"github.com/hoplite-go/hoplite/messages"
)

// Shape is the plan shape a naive Reduce reports.
const Shape = "naive-gather"

// Config is what the baseline takes of its store node's configuration,
// so that a naive Reduce is refused and timed as the node's own would be.
type Config struct {
	// MaxObjectIDLen bounds the ids a Reduce names (default: the store
	// node's).
	MaxObjectIDLen int
	// DefaultTimeout applies to a Reduce that carries no timeout
	// (default: the store node's).
	DefaultTimeout time.Duration
}

// FromCreator is the Get half of the baseline, a directory sender policy
// (directory.Senders): every receiver fetches from the object's creator,
// however many already do, and waits while the creator's copy is not
// there to choose (a Put not yet registered, or a creator that failed it).
func FromCreator(_ string, copies []directory.Copy) (string, bool) {
	for _, c := range copies {
		if c.Creator {
			return c.Node, true
		}
	}
	return "", false
}

// Middleware returns the receiver middleware that serves every Reduce
// sent to a store node with the naive baseline; every other message
// goes on to the node.
func Middleware(cfg Config) actor.ReceiverMiddleware {
	if cfg.MaxObjectIDLen <= 0 {
		cfg.MaxObjectIDLen = storeactor.DefaultMaxObjectIDLen
	}
	if cfg.DefaultTimeout <= 0 {
		cfg.DefaultTimeout = storeactor.DefaultRequestTimeout
	}
	return func(next actor.ReceiverFunc) actor.ReceiverFunc {
		return func(c actor.ReceiverContext, env *actor.MessageEnvelope) {
			m, ok := env.Message.(*messages.Reduce)
			if !ok {
				next(c, env)
				return
			}
			serve(cfg, c.ActorSystem(), c.Self(), env.Sender, m)
		}
	}
}

func serve(cfg Config, system *actor.ActorSystem, self, sender *actor.PID, m *messages.Reduce) {
	if err := reduction.ValidateReduce(m, cfg.MaxObjectIDLen); err != nil {
		reply(system, sender, &messages.ReduceReply{TargetId: m.GetTargetId(), Error: err})
		return
	}
	if m.GetKnee() != nil {
		reply(system, sender, &messages.ReduceReply{TargetId: m.GetTargetId(),
			Error: messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "reduce: the naive baseline has no knee policy; give num_objects")})
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), directory.Timeout(m.GetTimeoutMs(), cfg.DefaultTimeout))
	go func() {
		defer cancel()
		r := &messages.ReduceReply{TargetId: m.GetTargetId(), Plan: &messages.ReducePlan{Shape: Shape}}
		reduced, err := gatherAndReduce(ctx, system, self, m)
		if err != nil {
			r.Error = messages.AsError(err)
		} else {
			r.ReducedIds = reduced
			for _, id := range m.GetSourceIds() {
				if !slices.Contains(reduced, id) {
					r.UnreducedIds = append(r.UnreducedIds, id)
				}
			}
		}
		reply(system, sender, r)
	}()
}

func reply(system *actor.ActorSystem, to *actor.PID, r *messages.ReduceReply) {
	if to != nil {
		system.Root.Send(to, r)
	}
}

// gatherAndReduce Gets every source through node, reduces the first num
// that arrive whole, and Puts the target through node.
func gatherAndReduce(ctx context.Context, system *actor.ActorSystem, node *actor.PID, m *messages.Reduce) ([]string, error) {
	type got struct {
		id   string
		data []byte
		err  error
	}
	gctx, stop := context.WithCancel(ctx)
	defer stop()
	results := make(chan got, len(m.GetSourceIds()))
	for _, id := range m.GetSourceIds() {
		go func() {
			res, err := actorutil.Request(gctx, system.Root, node, &messages.Get{ObjectId: id, ReadOnly: true, TimeoutMs: actorutil.TimeoutMs(gctx)})
			g := got{id: id, err: err}
			if gr, ok := res.(*messages.GetReply); ok {
				g.data, g.err = gr.GetData(), messages.ErrOrNil(gr.GetError())
			}
			results <- g
		}()
	}
	num := int(m.GetNumObjects())
	var acc []byte
	var reduced, missing []string
	for range m.GetSourceIds() {
		g := <-results
		if g.err != nil {
			missing = append(missing, g.id)
			if len(m.GetSourceIds())-len(missing) < num {
				return nil, messages.Errorf(messages.AsError(g.err).GetCode(), "naive reduce: sources missing: %s (%v)", strings.Join(missing, ", "), g.err)
			}
			continue
		}
		if err := kernel.Validate(m.GetOp(), m.GetDtype(), int64(len(g.data))); err != nil {
			return nil, err
		}
		if acc == nil {
			acc = append(make([]byte, 0, len(g.data)), g.data...)
		} else if len(g.data) != len(acc) {
			return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "naive reduce: %q has %d bytes, expected %d", g.id, len(g.data), len(acc))
		} else if err := kernel.Accumulate(m.GetOp(), m.GetDtype(), acc, g.data); err != nil {
			return nil, err
		}
		reduced = append(reduced, g.id)
		if len(reduced) == num {
			break
		}
	}
	if len(reduced) < num {
		return nil, fmt.Errorf("naive reduce: only %d of %d sources", len(reduced), num)
	}
	res, err := actorutil.Request(ctx, system.Root, node, &messages.Put{ObjectId: m.GetTargetId(), Data: acc, TimeoutMs: actorutil.TimeoutMs(ctx)})
	if err != nil {
		return nil, err
	}
	pr, ok := res.(*messages.PutReply)
	if !ok {
		return nil, messages.Errorf(messages.ErrorCode_INTERNAL, "unexpected reply %T to Put", res)
	}
	if err := messages.ErrOrNil(pr.GetError()); err != nil {
		return nil, err
	}
	return reduced, nil
}
