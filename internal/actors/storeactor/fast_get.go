package storeactor

import (
	"bytes"
	"context"
	"sync/atomic"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"go.opentelemetry.io/otel/attribute"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/fastget"
	"github.com/hoplite-go/hoplite/internal/fetchrun"
	"github.com/hoplite-go/hoplite/internal/storeproto"
	"github.com/hoplite-go/hoplite/internal/tracing"
	"github.com/hoplite-go/hoplite/messages"
)

// fastGetter is the fast path of a Get from a Client in the node's
// process of an object the node neither holds nor fetches: the caller's
// goroutine reserves the node's copy, starts its fetch run, and sends
// the run's first Locate to the object's shard itself (through the
// node's Locator: one actor message in process, the data plane across
// members). An answer with the bytes goes to the caller at once; the
// run goes to the node (fastRun), and after it the Locate's end as the
// node's own Locate calls deliver theirs (fetchLocated): the node
// carries on from there exactly as if it had sent that Locate. Only the
// hops that carried nothing (the Get to the node, the Locate's answer
// back to it, the node's answer to the caller) are gone.
//
// Ordering is the node's own fetch's: the copy is reserved in the store before
// the Locate leaves, so a shard that records it at its inline answer
// (directory.LocationTable.inlineReply), a receiver sent to it, and a
// DropObject all find it there, incomplete until the node stores the
// bytes; a drop that comes before the run removes it, and the run then
// ends without storing anything. The bytes come only from the shard's
// answer, which it gives only for a live entry: a Get that starts after
// a completed Delete is answered DELETED by the shard, through the
// ordinary Get. A copy to stream from that a shard named while it moved
// is not streamed from: the run asks the new shard, as a run whose shard
// stopped does, since a partial copy recorded only at the old shard is
// one the new shard never learns of whole, and it answered LOST while
// the copy existed. An inline answer's copy is published again to a
// shard that moved or started over while the copy was reserved
// (fastStored).
type fastGetter struct {
	cfg     *Config
	system  *actor.ActorSystem
	self    *actor.PID
	locator Locator
	// republished counts the Republish requests the node has served: a
	// fast Get notes it before its Locate leaves, and one served since
	// may have found its copy reserved and not yet stored, which a
	// reserved copy of unknown size does not publish (fastStored).
	republished atomic.Uint64
}

// fastRun hands a fast Get's run to the node, with the rest of its
// start's output (its Locate was sent), and the Locate's end (located,
// nil if none was sent) and the copy's publication check (stored, for an
// inline answer), which the node takes in that order. One message
// carries them: each message to an idle node is a wake-up of its
// goroutine.
type fastRun struct {
	run     *fetchRun
	out     storeproto.FetchOutput
	located *fetchLocated
	stored  *fastStored
}

// fastStored follows a fast Get's inline answer to the node, after its
// Locate's end, which stored the copy. getter and republished are the
// fast path that served it and its count of Republish requests served
// when the Get reserved the copy.
type fastStored struct {
	run         *fetchRun
	getter      *fastGetter
	republished uint64
}

// registerFastGet makes this node's fast path available to the Clients
// of its process.
func (n *StoreNode) registerFastGet(ctx actor.Context) {
	n.fast = &fastGetter{cfg: n.cfg, system: ctx.ActorSystem(), self: ctx.Self(), locator: n.locator}
	fastget.Register(ctx.Self(), n.fast)
}

// unregisterFastGet withdraws it: the node stops.
func (n *StoreNode) unregisterFastGet(ctx actor.Context) {
	if n.fast != nil {
		fastget.Unregister(ctx.Self(), n.fast)
	}
}

// Get implements fastget.Getter.
func (g *fastGetter) Get(ctx context.Context, id string, readOnly bool) ([]byte, bool) {
	deadline, ok := ctx.Deadline()
	store := g.cfg.Store
	if !ok || ctx.Err() != nil || directory.ValidateApplicationID(id, g.cfg.MaxObjectIDLen) != nil {
		return nil, false
	}
	obj, created := store.Reserve(id)
	if !created {
		return nil, false // the node holds or fetches a copy: its Get answers
	}
	republished := g.republished.Load()
	run := &fetchRun{id: id, obj: obj}
	_, run.span = tracing.Start(tracing.Parent(ctx), tracing.Fetch)
	if run.span.IsRecording() { // attributes cost allocations: only when traced
		run.span.SetAttributes(attribute.String("hoplite.object", id), attribute.String("hoplite.node", g.cfg.Self.GetNodeId()))
	}
	run.p = fetchrun.NewFetch(fetchConfig(g.cfg, id), store, obj, deadline, observer(g.cfg))
	h := &fastRun{run: run, out: run.p.Start(time.Now())}
	l := takeLocate(&h.out)
	if l == nil {
		g.system.Root.Send(g.self, h)
		return nil, false
	}
	run.attempt = l.GetAttempt()
	located := &fetchLocated{run: run, attempt: l.GetAttempt()}
	if tp := tracing.ParentOf(run.span); tp != "" {
		l = proto.CloneOf(l)
		l.TraceParent = tp
	}
	if shard := g.cfg.ShardFor(id); shard == nil {
		located.err = messages.Errorf(messages.ErrorCode_UNAVAILABLE, "no directory shard for %q", id)
	} else {
		run.shard = shard
		// The call is bounded by the Locate's own timeout and the margin,
		// or by the caller's deadline if that comes first (as it does
		// but for a Get with a long deadline): then ctx bounds it as it
		// is, without a context of its own to make and cancel.
		cctx, cancel := ctx, noCancel
		if limit := time.Duration(l.GetTimeoutMs())*time.Millisecond + locateCallMargin; time.Until(deadline) > limit {
			cctx, cancel = context.WithTimeout(ctx, limit)
		}
		located.reply, located.err = g.locator(cctx, shard, l)
		cancel()
		if located.err != nil && ctx.Err() != nil {
			// The caller returned (canceled, or its own deadline): not
			// the run's failure, and a Get that joined the run's copy
			// meanwhile asks again (StoreNode.answer) instead of taking
			// this caller's end for its own.
			located.err = errFastGetCallerLeft
		}
	}
	if located.err == nil && !located.reply.GetHasInline() && !run.shard.Equal(g.cfg.ShardFor(id)) {
		// The shard moved while it answered: the copy it named and the
		// partial location it recorded are the old shard's. The run asks
		// the new one, as a run whose shard stopped does.
		located.reply, located.err = nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "the directory shard of %q moved", id)
	}
	r, err := located.reply, located.err
	// From here on the run is the node's.
	h.located = located
	if r.GetHasInline() {
		h.stored = &fastStored{run: run, getter: g, republished: republished}
	}
	g.system.Root.Send(g.self, h)
	if err != nil || r.GetError() != nil || !r.GetHasInline() || int64(len(r.GetInlineData())) != r.GetSize() {
		return nil, false
	}
	data := r.GetInlineData()
	if !readOnly {
		data = bytes.Clone(data)
		if data == nil {
			data = []byte{}
		}
	}
	return data, true
}

// takeLocate removes the Locate from out's sends and returns it (nil if
// there is none).
func takeLocate(out *storeproto.FetchOutput) *messages.Locate {
	for i, s := range out.Sends {
		if l, ok := s.Msg.(*messages.Locate); ok {
			out.Sends = append(out.Sends[:i:i], out.Sends[i+1:]...)
			return l
		}
	}
	return nil
}

// fastHandOff takes a fast Get's run over, then its Locate's end, then
// the publication check of its inline answer.
func (n *StoreNode) fastHandOff(ctx actor.Context, m *fastRun) {
	n.fastRun(ctx, m)
	if m.located != nil {
		n.fetchLocated(ctx, m.located)
	}
	if m.stored != nil {
		n.fastStored(ctx, m.stored)
	}
}

// fastRun takes over a fast Get's run; its Locate's end comes next. If
// the node no longer holds the run's copy (a drop removed it) or already
// runs a fetch of it (a restart resumed the copy), the run ends here, and
// that end finds nothing to act on: there is nothing for the run to
// store, or another run stores it.
func (n *StoreNode) fastRun(ctx actor.Context, m *fastRun) {
	run := m.run
	if n.fetches[run.id] != nil || n.cfg.Store.Lookup(run.id) != run.obj {
		run.done = true
		tracing.End(run.span, errFastGetSuperseded)
		return
	}
	n.fetches[run.id] = run
	if run.shard != nil && !actorutil.IsRemote(ctx.ActorSystem(), run.shard) {
		n.watch(ctx, run.shard) // as its own Locates' shards (locate)
	}
	n.drain(ctx, run, m.out)
}

// fastStored publishes the copy a fast Get's inline answer made, to the
// object's shard now, if a shard may not know of it: the answer recorded
// the copy at the shard that gave it (inlineReply), but a shard that
// moved or started over since rebuilt from the nodes' republications,
// and one served while the copy was reserved and not yet stored did not
// carry it (a reserved copy of unknown size is not published). Without,
// that shard would not know of the copy: it could answer LOST while the
// copy exists, and a Delete there would not reach it, so a later Get on
// this node would read it after the Delete completed. A copy the shard
// knows already it takes again, and one of an object deleted meanwhile
// it drops (its tombstone), as any publication.
func (n *StoreNode) fastStored(ctx actor.Context, m *fastStored) {
	run := m.run
	if run.shard == nil || n.cfg.Store.Lookup(run.id) != run.obj {
		return
	}
	shard := n.cfg.ShardFor(run.id)
	if shard == nil {
		return
	}
	if shard.Equal(run.shard) && m.getter == n.fast && m.getter.republished.Load() == m.republished {
		return // the shard that recorded the copy has not started over
	}
	if pub, ok := run.obj.Publication(n.cfg.Self); ok && pub.GetState() == messages.LocationState_COMPLETE {
		ctx.Send(shard, pub)
	}
}

// noCancel is the cancel of a context used as it is.
func noCancel() {}

// errFastGetCallerLeft ends a fast Get's run whose caller returned
// before its Locate was answered.
var errFastGetCallerLeft = messages.Errorf(messages.ErrorCode_CANCELED, "the Get that started this fetch returned before its Locate was answered")

// errFastGetSuperseded ends the span of a fast Get's run that found its
// copy dropped or fetched by another run.
var errFastGetSuperseded = messages.Errorf(messages.ErrorCode_CANCELED, "the copy was dropped or is fetched by another run")
