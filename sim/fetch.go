package sim

import (
	"errors"
	"time"

	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/fetchrun"
	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/internal/storeproto"
	"github.com/hoplite-go/hoplite/messages"
)

// fetchSession is one Get on a host: the real FetchProtocol (run against
// the host's store by fetchrun.Fetch), its
// streams carried by the simulated data plane.
type fetchSession struct {
	w      *world
	h      *host
	id     string
	p      *fetchrun.Fetch
	obj    *objState
	stream *stream
	sid    uint64
	// sender is who the current stream reads from; senders every one
	// this Get read from, in order (for the tree and cycle checks).
	sender   *host
	senders  []*host
	begun    time.Duration
	ended    time.Duration
	deadline time.Time
	done     bool
	err      error
	onDone   func(*fetchSession)
	// sum is the checksum of the bytes the Get ended with.
	sum uint64
	// locating is the attempt of the Locate that waits for its answer
	// from locHome (0: none).
	locating uint64
	locHome  *host
	// inline: that answer came with the object's bytes (after streams
	// from senders that failed, if the shard named any first).
	inline bool
}

// locateLost fails the Locate attempt whose shard's home died, once the
// connection's reset is seen.
func (fs *fetchSession) locateLost(attempt uint64) {
	w := fs.w
	w.eng.after(w.p.Detect, func() {
		if fs.done || fs.locating != attempt || !fs.h.alive {
			return
		}
		fs.locating = 0
		fs.step(storeproto.FetchLocateFailed{Attempt: attempt, Err: messages.Errorf(messages.ErrorCode_UNAVAILABLE, "the directory shard's member %s failed", fs.locHome.name)})
	})
}

func (h *host) fetch(id string) *fetchSession {
	for _, f := range h.fetches {
		if f.id == id && !f.done {
			return f
		}
	}
	return nil
}

// get starts a Get of id on h; onDone runs when it ends. A Get of an
// object the node is fetching already waits for that fetch, as the store
// node runs one fetch per object.
func (w *world) get(h *host, id string, onDone func(*fetchSession)) *fetchSession {
	if fs := h.fetch(id); fs != nil {
		prev := fs.onDone
		fs.onDone = func(fs *fetchSession) {
			if prev != nil {
				prev(fs)
			}
			onDone(fs)
		}
		return fs
	}
	fs := &fetchSession{w: w, h: h, id: id, begun: w.eng.now, onDone: onDone}
	if o := h.objs[id]; o != nil && o.complete {
		fs.done, fs.sum, fs.ended = true, o.sum, w.eng.now
		onDone(fs)
		return fs
	}
	fs.deadline = w.now().Add(w.p.Timeout)
	h.fetches = append(h.fetches, fs)
	fs.start()
	return fs
}

// start runs a fresh FetchProtocol for the Get, until its deadline.
func (fs *fetchSession) start() {
	w, h := fs.w, fs.h
	so, _ := h.store.Reserve(fs.id)
	fs.obj = h.obj(fs.id)
	fs.stream, fs.sender = nil, nil
	fs.p = fetchrun.NewFetch(storeproto.FetchConfig{Self: h.ref, Grace: w.p.Grace, Rand: h.rng}, h.store, so, fs.deadline, nil)
	fs.step(storeproto.FetchStart{})
}

// step steps the fetch with ev at the world's now: the simulator's
// driver carries out its Box (fetchDriver), then own what is the
// fetch's own.
func (fs *fetchSession) step(ev any) { fs.own(fetchDriver.step(fs.w, fs, fs.p, ev)) }

// fetchDriver carries out a fetch's Box: a send goes to the shard of the
// object it names (a Locate is a call, lost if the shard's home dies
// before it answers), and the fetch's timer comes back as its event
// unless the fetch ended or its host died. (Set in init: its hooks step
// the fetches it drives.)
var fetchDriver *driver[*world, *fetchSession, any, storeproto.FetchOutput]

func init() {
	fetchDriver = &driver[*world, *fetchSession, any, storeproto.FetchOutput]{
		send: func(w *world, fs *fetchSession, s outbox.Send) {
			to, ok := s.To.(directory.ShardOf)
			if !ok {
				return
			}
			if l, ok := s.Msg.(*messages.Locate); ok {
				// The Locate is a call: if the shard's home dies before it
				// answers (or is dead, the members not knowing yet), the call
				// fails once the connection resets.
				home := w.locateTarget(fs.h, w.shardFor(string(to)))
				fs.locating, fs.locHome = l.GetAttempt(), home
				if !home.alive {
					fs.locateLost(l.GetAttempt())
				}
			}
			w.toShard(fs.h, to, s.Msg, fetchReply{h: fs.h, id: fs.id})
		},
		timer: func(w *world, fs *fetchSession, t outbox.Timer) {
			ft, ok := t.Msg.(storeproto.FetchTimer)
			if !ok {
				return
			}
			w.eng.at(virt(t.At), func() {
				if !fs.done && fs.h.alive {
					fs.step(ft)
				}
			})
		},
	}
}

// own carries out what is the fetch's own in a step's output: a stream
// to cut, one to start, the fetch's end.
func (fs *fetchSession) own(out storeproto.FetchOutput) {
	w := fs.w
	if out.Cut != 0 && fs.stream != nil && fs.sid == out.Cut {
		st, sid := fs.stream, fs.sid
		st.cut()
		w.eng.after(0, func() {
			if !fs.done {
				fs.step(storeproto.FetchStreamEnded{Stream: sid, Err: messages.Errorf(messages.ErrorCode_UNAVAILABLE, "cut")})
			}
		})
	}
	if cmd := out.Stream; cmd != nil {
		fs.startStream(cmd)
	}
	if out.Done {
		fs.finish(out.Err)
	}
}

func (fs *fetchSession) startStream(cmd *storeproto.StreamCommand) {
	w := fs.w
	fs.sid = cmd.ID
	sender := w.hostOf(cmd.Sender)
	fs.sender = sender
	fs.senders = append(fs.senders, sender)
	fs.obj.size = cmd.Size
	fs.obj.writer = fs.p.Writer()
	if fs.obj.written != cmd.Offset {
		// The store's object was rewound or resumed elsewhere: follow it.
		if cmd.Offset < fs.obj.written {
			fs.obj.rewound(cmd.Offset)
		}
		fs.obj.written = cmd.Offset
	}
	sid := cmd.ID
	if sender == nil {
		w.eng.after(w.p.Latency, func() {
			fs.step(storeproto.FetchStreamEnded{Stream: sid, Err: messages.Errorf(messages.ErrorCode_UNAVAILABLE, "no such sender")})
		})
		return
	}
	from := sender.obj(fs.id)
	w.chargeOperation(fs.h, "get "+fs.id)
	w.tracef(fs.h, "streams %s from %s at %d", fs.id, sender.name, cmd.Offset)
	fs.stream = w.openStream(from, fs.h, cmd.Offset, cmd.Size,
		func(n int64, last bool) error {
			if fs.obj.written == cmd.Offset || last {
				w.tracef(fs.h, "%s: chunk at %d from %s, last %v", fs.id, fs.obj.written, sender.name, last)
			}
			if last {
				fs.obj.sum = from.sum
			}
			return fs.obj.advance(n)
		},
		func(err error) {
			if fs.done || fs.sid != sid {
				return
			}
			fs.step(storeproto.FetchStreamEnded{Stream: sid, Err: err})
		})
	fs.stream.limitChunk(cmd.Chunk)
}

func (fs *fetchSession) finish(err error) {
	if fs.done {
		return
	}
	if fs.stream != nil {
		fs.stream.cut()
	}
	if errors.Is(err, messages.ErrReset) && fs.w.now().Before(fs.deadline) {
		// The copy was stale (a Reduce re-created its target): the store
		// node asks again within the same deadline, as it answers a Get
		// whose object settled with RESET.
		fs.start()
		return
	}
	fs.done, fs.err, fs.ended = true, err, fs.w.eng.now
	if err == nil && (fs.stream == nil || fs.inline) {
		// The bytes came with the shard's answer (inline), and the store
		// holds them.
		if o := fs.h.store.Lookup(fs.id); o != nil {
			if sum, ok := inlineSum(o); ok {
				fs.obj.size, fs.obj.written, fs.obj.sum = o.Size(), o.Size(), sum
			}
		}
	}
	if err == nil {
		fs.obj.complete = true
		fs.sum = fs.obj.sum
		fs.obj.wake()
	}
	if fs.onDone != nil {
		fs.onDone(fs)
	}
}

// senderFailed tells the fetches on h that node failed.
func (h *host) senderFailed(node string) {
	for _, fs := range h.fetches {
		if !fs.done && fs.sender != nil && fs.sender.name == node {
			fs.step(storeproto.FetchSenderFailed{Node: node})
		}
	}
}
