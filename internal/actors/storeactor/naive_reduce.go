package storeactor

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/reduction/kernel"
	"github.com/hoplite-go/hoplite/messages"
)

// naiveReduce is the baseline without collectives (Config.Naive): the
// caller's node Gets every source itself, reduces the first num to arrive
// here, and Puts the target. It exists to be measured against the tree.
func (n *StoreNode) naiveReduce(ctx actor.Context, m *messages.Reduce) {
	sender, system, self := ctx.Sender(), ctx.ActorSystem(), ctx.Self()
	rctx, cancel := context.WithTimeout(context.Background(), n.cfg.timeout(m.GetTimeoutMs()))
	go func() {
		defer cancel()
		r := &messages.ReduceReply{TargetId: m.GetTargetId(), Plan: &messages.ReducePlan{Shape: "naive-gather"}}
		reduced, err := n.gatherAndReduce(rctx, system, self, m)
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

func (n *StoreNode) gatherAndReduce(ctx context.Context, system *actor.ActorSystem, self *actor.PID, m *messages.Reduce) ([]string, error) {
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
			res, err := actorutil.Request(gctx, system.Root, self, &messages.Get{ObjectId: id, ReadOnly: true, TimeoutMs: actorutil.TimeoutMs(gctx)})
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
	// The target is Put through this node's own mailbox, as the sources
	// were Got: the Put protocol lives in the actor.
	res, err := actorutil.Request(ctx, system.Root, self, &messages.Put{ObjectId: m.GetTargetId(), Data: acc, TimeoutMs: actorutil.TimeoutMs(ctx)})
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
