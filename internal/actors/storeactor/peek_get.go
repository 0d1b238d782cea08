package storeactor

import (
	"bytes"
	"context"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/messages"
)

// A Get sent to the node as a message (an application actor's, or a
// Client's in another process) of an object the node neither holds nor
// fetches peeks first, as a fast Get does (fastGetter.peek): the shard
// answers a plain inline object's bytes without its actor, and the node
// answers the Get with them and keeps no copy. The peek runs on the
// actors' pooled workers, off the node's goroutine; its end comes back
// to the node as a peekedGet, which answers the Get or goes on with it
// as before (getUntil). A prefetch keeps a copy by definition: it does
// not peek.

// maxPeeks bounds the peeks a node has out at once; past it a Get goes
// the ordinary way, which bounds the Gets it parks.
const maxPeeks = 1024

// peekedGet is a peek's end: the Get it was for and what the shard said.
type peekedGet struct {
	m        *messages.Get
	sender   *actor.PID
	deadline time.Time
	data     []byte
	local    bool // data is the table's own (read-only)
	ok       bool
}

// peekFirst starts m's peek and reports whether it did (the node's
// answer then follows the peek's end).
func (n *StoreNode) peekFirst(ctx actor.Context, m *messages.Get, sender *actor.PID, deadline time.Time) bool {
	id := m.GetObjectId()
	if m.GetPrefetch() || n.fast == nil || len(n.peeks) >= maxPeeks || n.cfg.Store.Lookup(id) != nil || !time.Now().Before(deadline) {
		return false
	}
	p := &peekedGet{m: m, sender: sender, deadline: deadline}
	n.peeks[p] = struct{}{}
	system, self, g := ctx.ActorSystem(), ctx.Self(), n.fast
	callRunner.Schedule(func() {
		pctx, cancel := context.WithDeadline(context.Background(), deadline)
		defer cancel()
		p.data, p.local, p.ok = g.peek(pctx, id)
		system.Root.Send(self, p)
	})
	return true
}

// peeked takes a peek's end: the Get is answered with the bytes, or goes
// on the ordinary way.
func (n *StoreNode) peeked(ctx actor.Context, p *peekedGet) {
	if _, ok := n.peeks[p]; !ok {
		return // answered when the node stopped
	}
	delete(n.peeks, p)
	if !p.ok {
		n.getUntil(ctx, p.m, p.sender, p.deadline)
		return
	}
	data := p.data
	if p.local && !p.m.GetReadOnly() {
		data = bytes.Clone(data)
	}
	if data == nil {
		data = []byte{}
	}
	reply(ctx.ActorSystem(), p.sender, &messages.GetReply{ObjectId: p.m.GetObjectId(), Data: data})
}

// stopPeeks answers the Gets whose peeks are out: the node stops.
func (n *StoreNode) stopPeeks(ctx actor.Context, stopped *messages.Error) {
	for p := range n.peeks {
		reply(ctx.ActorSystem(), p.sender, &messages.GetReply{ObjectId: p.m.GetObjectId(), Error: stopped})
	}
	clear(n.peeks)
}
