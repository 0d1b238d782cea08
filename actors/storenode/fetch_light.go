package storenode

import (
	"context"
	"errors"
	"math/rand/v2"
	"sync/atomic"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/directory"
	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/outbox"
	"github.com/hoplite-go/hoplite/storenode"
)

// lightFetch is a fetch the store node runs itself, without a fetch
// session, while its one Locate is on the data plane. Most fetches of a
// small object end with that Locate: the shard answers with the inline
// bytes (or says the object is gone), and the protocol stores them in
// the same step. A session would add a spawn, its Started and Stop
// rounds, two more runs of a mailbox (each on a fresh goroutine whose
// stack grows) and the store node's fetchEnded and Terminated
// (BenchmarkInlineGetRemoteShard, 7 interleaved runs: CPU per Get 39.3
// -> 35.2 us, p50 25.5 -> 22.3 us without them). Anything else (an answer that names a
// sender to stream from, an UNAVAILABLE to retry after a backoff, a
// timeout, or no answer within watchDelay, when a session would watch
// the shard) is handed to a session that adopts the protocol where it
// is (adopt), so streams, retries, watches and timers keep one shell.
//
// Its Locate names this store node as reply_to: an answer that names a
// sender comes as an actor message, ordered with the shard's later
// DropObject to this node (see the directory's callReply), and is passed
// to the session. A light fetch is this actor's state; the store's
// object survives a restart of the actor, which resumes it in a session
// as it does the copies of the sessions it stopped.
type lightFetch struct {
	p        *storenode.Fetch
	obj      *storenode.Object
	deadline *atomic.Int64 // unix nanos, as fetchState's
	shard    *actor.PID
	// attempt is the Locate on the data plane; cancel hangs it up (nil
	// once it ended).
	attempt uint64
	cancel  context.CancelFunc
	// timers are the protocol's timers for that Locate (its deadline),
	// armed by a session that adopts the fetch while it waits.
	timers []outbox.Timer
	// due hands the fetch to a session when the Locate is still
	// unanswered after watchDelay (or at its deadline, if sooner).
	due *time.Timer
	// session is the session that adopted the fetch: late answers go to
	// it.
	session *actor.PID
}

// lightLocated is the end of a light fetch's Locate on the data plane:
// the answer, an error, or forwarded (the answer comes as an actor
// message).
type lightLocated struct {
	lf        *lightFetch
	attempt   uint64
	reply     *messages.LocateReply
	err       error
	forwarded bool
}

// locateEnded hands the end of the light fetch's Locate to its store node.
func (lf *lightFetch) locateEnded(r locateEnd) any {
	return &lightLocated{lf: lf, attempt: r.attempt, reply: r.reply, err: r.err, forwarded: r.forwarded}
}

// lightDue: a light fetch's Locate is still unanswered after watchDelay.
type lightDue struct{ lf *lightFetch }

// adoption is a light fetch a session takes over, with the output of the
// protocol's last step, which the session carries out.
type adoption struct {
	lf    *lightFetch
	out   storenode.FetchOutput
	taken atomic.Bool // a session restarted after a panic starts anew
}

func newAdoptedFetchProps(cfg *Config, a *adoption) *actor.Props {
	return actorutil.Props(func() actor.Actor {
		return &fetchSession{cfg: cfg, id: a.lf.obj.ID(), obj: a.lf.obj, deadline: a.lf.deadline, adopt: a}
	})
}

// adopted takes over a light fetch: its protocol, and its Locate if that
// is still waiting, as if this session had sent it (its answer comes
// through the store node). A Locate that waited watchDelay already is
// watched at once.
func (f *fetchSession) adopted(ctx actor.Context, a *adoption) storenode.FetchOutput {
	lf := a.lf
	f.p = lf.p
	if lf.cancel != nil && f.p.Waiting() == "locate" {
		key := actorutil.Key(lf.shard)
		f.calls[lf.attempt] = lf.cancel
		f.shards[key] = lf.attempt
		f.shardWatch[key] = nil
		ctx.Watch(lf.shard)
		for _, t := range lf.timers {
			f.arm(ctx, t.At, t.Msg.(storenode.FetchTimer))
		}
	}
	return a.out
}

// startLight starts the fetch of obj, which Reserve just created, as a
// light fetch; it reports false when its Locate cannot go on the data
// plane (the caller starts a session instead).
func (n *StoreNode) startLight(ctx actor.Context, obj *storenode.Object, deadline time.Time) bool {
	caller := n.cfg.Transport
	if caller == nil || n.cfg.LocateAt == nil {
		return false
	}
	shard := n.cfg.ShardFor(obj.ID())
	if shard == nil {
		return false
	}
	addr := n.cfg.LocateAt(shard)
	if addr == "" {
		return false
	}
	fc := fetchConfig(n.cfg, obj.ID())
	// Answers to every light fetch come to this actor: attempts that
	// cannot meet those of an earlier fetch of the same object.
	fc.FirstAttempt = rand.Uint64() &^ (1<<32 - 1)
	d := new(atomic.Int64)
	d.Store(deadline.UnixNano())
	lf := &lightFetch{obj: obj, deadline: d, shard: shard, p: storenode.NewFetch(fc, n.cfg.Store, obj, deadline, observer(n.cfg))}
	now := time.Now()
	out := lf.p.Start(now)
	l, ok := onlyLocate(out)
	if !ok {
		n.lightStep(ctx, lf, out)
		return true
	}
	n.light[obj.ID()] = lf
	self := ctx.Self()
	lf.attempt = l.GetAttempt()
	lf.cancel = callLocate(ctx.ActorSystem(), self, caller, addr,
		&messages.NodeRef{NodeId: n.cfg.Self.GetNodeId(), Address: self.GetAddress(), ActorId: self.GetId()}, l, lf)
	lf.timers = out.Timers
	wait := watchDelay
	for _, t := range out.Timers {
		wait = min(wait, t.At.Sub(now))
	}
	system, self := ctx.ActorSystem(), ctx.Self()
	lf.due = time.AfterFunc(wait, func() { system.Root.Send(self, &lightDue{lf: lf}) })
	return true
}

// onlyLocate returns the Locate of a step that sends that alone and arms
// only its deadline, as the protocol's first step does.
func onlyLocate(out storenode.FetchOutput) (*messages.Locate, bool) {
	if out.Done || out.Stream != nil || len(out.Watch) != 0 || len(out.Sends) != 1 || len(out.Timers) != 1 {
		return nil, false
	}
	l, ok := out.Sends[0].Msg.(*messages.Locate)
	return l, ok
}

// callRunner runs light fetches' Locate calls on the actors' pooled
// worker goroutines (actorutil.Dispatcher) rather than a fresh goroutine
// each, whose stack the call and the reply's decoding would grow again
// every time.
var callRunner = actorutil.Dispatcher

// lightLocated takes the end of a light fetch's Locate on the data plane.
func (n *StoreNode) lightLocated(ctx actor.Context, m *lightLocated) {
	lf := m.lf
	if lf.session != nil {
		// Adopted: the session waits for it.
		switch {
		case m.forwarded:
		case m.err != nil:
			ctx.Send(lf.session, &locateUnsent{attempt: m.attempt, err: m.err})
		default:
			ctx.Send(lf.session, m.reply)
		}
		return
	}
	if n.light[lf.obj.ID()] != lf || m.attempt != lf.attempt {
		return // from before a restart of this actor
	}
	lf.cancel = nil // the call ended and released its context
	if m.forwarded {
		return
	}
	if m.err != nil {
		n.lightStep(ctx, lf, lf.p.LocateFailed(m.attempt, m.err, time.Now()))
		return
	}
	n.lightStep(ctx, lf, lf.p.Located(m.reply, time.Now()))
}

// locateReply takes an answer to a light fetch's Locate that came as an
// actor message (it names a sender).
func (n *StoreNode) locateReply(ctx actor.Context, m *messages.LocateReply) {
	lf := n.light[m.GetObjectId()]
	if lf == nil {
		return // its fetch ended (or this actor restarted since)
	}
	if lf.session != nil {
		ctx.Send(lf.session, m)
		return
	}
	if m.GetAttempt() != lf.attempt {
		return
	}
	n.lightStep(ctx, lf, lf.p.Located(m, time.Now()))
}

// lightDue hands a light fetch whose Locate is still unanswered to a
// session, which watches the shard.
func (n *StoreNode) lightDue(ctx actor.Context, m *lightDue) {
	if lf := m.lf; lf.session == nil && n.light[lf.obj.ID()] == lf {
		n.adopt(ctx, lf, storenode.FetchOutput{})
	}
}

// lightStep carries out a step of a light fetch: one that ends it here
// (the inline bytes are stored, or it failed) sends what it asks of the
// directory; any other is the start of an adopting session.
func (n *StoreNode) lightStep(ctx actor.Context, lf *lightFetch, out storenode.FetchOutput) {
	if !out.Done || out.Stream != nil {
		n.adopt(ctx, lf, out)
		return
	}
	id := lf.obj.ID()
	for _, s := range out.Sends {
		if _, ok := s.Msg.(*messages.CancelLocate); ok {
			// A Locate on the data plane is withdrawn by hanging up (see
			// fetchSession.cancelLocate).
			if lf.cancel != nil {
				lf.cancel()
				lf.cancel = nil
			}
			continue
		}
		if to, ok := s.To.(directory.ShardOf); ok {
			if pid := n.cfg.ShardFor(string(to)); pid != nil {
				ctx.Send(pid, s.Msg)
			}
		}
	}
	if out.Err != nil && !errors.Is(out.Err, messages.ErrCanceled) {
		n.cfg.Log.WithFields(logrus.Fields{"object": id, "error": out.Err}).Debug("fetch failed")
	}
	n.endLight(lf)
}

// adopt hands a light fetch to a new session, which carries out out.
func (n *StoreNode) adopt(ctx actor.Context, lf *lightFetch, out storenode.FetchOutput) {
	if lf.due != nil {
		lf.due.Stop()
	}
	pid := ctx.Spawn(newAdoptedFetchProps(n.cfg, &adoption{lf: lf, out: out}))
	n.fetches[lf.obj.ID()] = &fetchState{pid: pid, deadline: lf.deadline}
	lf.session = pid
	// Kept until the session ends: answers to its Locate come here.
	n.light[lf.obj.ID()] = lf
}

// endLight forgets a light fetch that ended here.
func (n *StoreNode) endLight(lf *lightFetch) {
	if lf.due != nil {
		lf.due.Stop()
	}
	if n.light[lf.obj.ID()] == lf {
		delete(n.light, lf.obj.ID())
	}
}

// sessionEnded forgets the light fetch that session pid adopted.
func (n *StoreNode) sessionEnded(id string, pid *actor.PID) {
	if lf := n.light[id]; lf != nil && samePID(lf.session, pid) {
		delete(n.light, id)
	}
}

// stopLight ends the light fetches' Locates and timers: this actor stops
// or restarts (a restarted one resumes the fetches in sessions).
func (n *StoreNode) stopLight() {
	for id, lf := range n.light {
		if lf.session == nil {
			if lf.due != nil {
				lf.due.Stop()
			}
			if lf.cancel != nil {
				lf.cancel()
			}
		}
		delete(n.light, id)
	}
}
