package sim

import (
	"time"

	"github.com/hoplite-go/hoplite/directory"
	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/outbox"
)

// shard is one directory shard: the real LocationTable.
type shard struct {
	idx  int
	t    *directory.LocationTable
	tick time.Duration // the Tick armed (0: none)
	// served counts the messages it processed (its load).
	served int64
}

func (w *world) newShards() {
	for i := 0; i < w.p.Shards; i++ {
		w.shards = append(w.shards, &shard{idx: i, t: directory.NewLocationTable(directory.TableConfig{Instance: uint32(i + 1)})})
	}
}

func (w *world) shardFor(id string) *shard {
	return w.shards[directory.ShardIndex(id, len(w.shards))]
}

// shardHost is the host that runs shard s.
func (w *world) shardHost(s *shard) *host { return w.hosts[s.idx%len(w.hosts)] }

// Reply targets the shards answer to (the outbox's opaque To).
type (
	fetchReply struct {
		h  *host
		id string
	}
	// createReply is a root worker waiting for its target's
	// registration: then runs with the shard's answer.
	createReply struct {
		h    *host
		then func(*messages.Error)
	}
	coordReply struct{ r *reduction }
)

// toShard sends msg from a host to the shard of the object it names;
// ctx is who the shard answers. Locates and Subscribes are requests on
// the data plane, as the store nodes and coordinators send them; the
// rest are actor messages.
func (w *world) toShard(from *host, to directory.ShardOf, msg any, ctx any) {
	s := w.shardFor(string(to))
	via := viaActor
	switch msg.(type) {
	case *messages.Locate, *messages.Subscribe:
		via = viaRequest
	}
	w.send(from, w.shardHost(s), qShard, via, func() { w.shardStep(s, msg, ctx) })
}

// shardStep hands one message to the table and carries out its sends.
func (w *world) shardStep(s *shard, msg any, ctx any) {
	s.served++
	now := w.now()
	t := s.t
	var out []outbox.Send
	switch m := msg.(type) {
	case *messages.Locate:
		out = t.Locate(m, ctx, now)
	case *messages.FetchDone:
		out = t.FetchDone(m)
	case *messages.FetchAborted:
		out = t.FetchAborted(m)
	case *messages.CancelLocate:
		out = t.CancelLocate(m)
	case *messages.UnpublishLocation:
		out = t.Unpublish(m)
	case *messages.PublishLocation:
		out = t.Publish(m)
	case *messages.CreateObject:
		out = t.Create(m, ctx)
	case *messages.Subscribe:
		r := ctx.(coordReply).r
		out = t.Subscribe(m, r.id, ctx)
	case *messages.Unsubscribe:
		out = t.Unsubscribe(m, ctx.(coordReply).r.id)
	case *messages.ReleaseTarget:
		out = t.Release(m)
	case nodeFailed:
		out = t.NodeFailed(string(m))
	case tick:
		out = t.Tick(now)
	}
	w.route(w.shardHost(s), out)
	if d := t.NextDeadline(); !d.IsZero() && (s.tick == 0 || virt(d) < s.tick) {
		at := virt(d)
		s.tick = at
		w.eng.at(at, func() {
			if s.tick == at {
				s.tick = 0
				w.shardStep(s, tick{}, nil)
			}
		})
	}
}

type (
	nodeFailed string
	tick       struct{}
)

// route carries out a shard's sends.
func (w *world) route(from *host, out []outbox.Send) {
	for _, snd := range out {
		switch to := snd.To.(type) {
		case fetchReply:
			m, ok := snd.Msg.(*messages.LocateReply)
			if !ok {
				continue
			}
			h, id := to.h, to.id
			w.send(from, h, qStore, viaRequest, func() {
				if fs := h.fetch(id); fs != nil {
					fs.apply(fs.p.Located(m, w.now()))
				}
			})
		case coordReply:
			m, ok := snd.Msg.(*messages.LocationUpdate)
			if !ok {
				continue
			}
			r := to.r
			w.send(from, r.host, qCoord, viaRequest, func() { r.apply(r.r.Located(m, w.now())) })
		case createReply:
			m, ok := snd.Msg.(*messages.CreateObjectReply)
			if !ok || to.then == nil {
				continue
			}
			w.send(from, to.h, qStore, viaActor, func() { to.then(m.GetError()) })
		case *messages.NodeRef:
			// Drops and deletions at store nodes: no scenario here
			// deletes, and a stale copy's drop only ends a copy nobody
			// reads; counted as messages, not acted on.
			w.msgs++
		default:
			w.msgs++
		}
	}
}
