package shardactor

import (
	"cmp"
	"crypto/rand"
	"encoding/binary"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/events"
	"github.com/hoplite-go/hoplite/internal/actors/coordactor"
	"github.com/hoplite-go/hoplite/internal/actors/shell"
	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/inlineindex"
	"github.com/hoplite-go/hoplite/internal/membername"
	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/internal/reduction"
	"github.com/hoplite-go/hoplite/messages"
)

// ShardConfig configures a directory shard actor.
type ShardConfig struct {
	Table directory.TableConfig
	Log   *logrus.Entry
	// NewCoordinator returns the props of the coordinator of one Reduce
	// (injected so the directory does not depend on the coordinator).
	// shardStopped reports whether the shard that spawned it has stopped
	// or is restarting (see messages.ReduceReply.shard_stopped).
	NewCoordinator func(reduceID string, start *messages.StartReduce, requester *actor.PID, shardStopped func() bool) *actor.Props
	// Index and Count place this shard among all shards (for Republish).
	Index, Count int
	// Nodes lists the live store nodes, asked to republish what they hold
	// whenever the shard (re)starts: its state is soft.
	Nodes func() []*messages.NodeRef
	// Failures makes NodeFailed published once per failure, not once per
	// shard that saw it.
	Failures *FailureLog
	// BeforeReceive runs before each message (fault injection: a hook that
	// panics crashes the shard).
	BeforeReceive func(shard string, msg any)
	// Rebuilt marks a shard started on a new host after its old host
	// failed (it announces ShardRebuilt from its first start).
	Rebuilt bool
	// Moved marks a shard that placement moved here from a live member
	// (one joined, rejoined or left): nothing failed, so it announces no
	// ShardRebuilt, but its table starts empty as a rebuilt one does. What
	// only the former table knew (an object lost there, a deletion no
	// store node remembers) comes back from the former host's Keeper,
	// unless the former host's store node went meanwhile, or the former
	// table's last losses crossed this start; so its table is amnesic as
	// a rebuilt one's, a caution its successors do not inherit: a Delete
	// of an id it does not know succeeds rather than claim that the
	// object never existed. A shard of a member's first placement has no
	// former owner known even when it moved from a live member (the
	// member joined or rejoined): the Keepers' republication tells its
	// table whether an earlier table of the shard forgot objects (it
	// started over after a failure), and what it had marked lost.
	Moved bool
	// Keeper, if set, is the store node of the shard's member: its table
	// tells it what no store node would republish to the shard's next
	// table (ids it marked lost, deletions of ids no node held, its
	// amnesia), and it republishes that to the shard wherever the shard
	// moves (directory.TableConfig.Keeper).
	Keeper *messages.NodeRef
	// Host is the member id hosting the shard: ShardRebuilt's Host, and
	// the shard's name in events, logs and errors is "<Host>/shard-<j>"
	// (without it: the parent actor's id, and the shard's actor id).
	Host string
	// LossGrace, if set, is the grace of an object's doubt that starts now
	// (directory.LossGraceFor the members' measured round trip, as the
	// member measures it); the table's LossGrace stays its floor.
	LossGrace func() time.Duration
	// RepublishWait bounds how long RebuildQuery counts the store nodes
	// that have not republished yet (DefaultRepublishWait if 0). Whether a
	// copy is the last is never decided before every one of them answered
	// or failed, however long that takes.
	RepublishWait time.Duration
}

// CountObjects asks a shard (in the same process) how many objects it
// knows; it answers ObjectCount. Metrics read it.
type CountObjects struct{}

// ObjectCount answers CountObjects: the objects, and the subscribers
// with a subscription here.
type ObjectCount struct{ Objects, Subscribers int }

// FailureLog remembers which node failures were already announced: the
// last maxFailuresRemembered of them. Node ids name incarnations and are
// never reused, so a long-lived cluster with churn would otherwise keep
// one entry per member that ever failed. An id forgotten that way can be
// announced again by a report that comes after thousands of other
// failures; delivering a failure twice is harmless (its cleanup is
// idempotent), growing without bound is not.
//
// A failure is keyed by the incarnation, node id and actor system
// address (as revoke.ID keys a notice by subject and IncarnationEpoch of
// the address): one name may belong to members of two clusters (embedded
// clusters name theirs node-0, node-1, … in every process), and a report
// about the other's member must not make the real failure of this
// cluster's member of that name look like a repeat.
//
// A directory shard's report is a suspicion (Suspect): its Terminated
// also comes when a connection to a live member merely broke. The
// member's own failure path confirms a failure (First); a suspicion it
// never confirmed goes when the node proves alive (Refute), so that its
// real failure later is announced again.
type FailureLog struct {
	mu     sync.Mutex
	seen   map[incarnation]failureSeen
	order  []failureRecord // the records, oldest first (Forget leaves its record here)
	seq    uint64
	closed bool
}

// failureSeen is the record of one incarnation's failure.
type failureSeen struct {
	seq       uint64 // the sequence number of its record in order
	suspected bool   // a shard's report the member's failure path has not confirmed
}

// incarnation is one member incarnation: its id and address.
type incarnation struct{ node, address string }

// failureRecord is one First that returned true.
type failureRecord struct {
	node incarnation
	seq  uint64
}

// maxFailuresRemembered bounds FailureLog, like the failure broadcast's
// window of notice ids (revoke).
const maxFailuresRemembered = 4096

// Close stops all reports: the cluster is shutting down, and nodes that
// stop now have not failed.
func (f *FailureLog) Close() {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.closed = true
}

// First reports whether this is the first report of the failure of node
// listening at address (its actor system's) since Forget(node, address):
// the member's failure path confirms it (a shard's suspicion of it, if
// any, was announced already and is confirmed now).
func (f *FailureLog) First(node, address string) bool {
	return f.report(node, address, false)
}

// Suspect is First for a directory shard's report: a suspicion, which
// Refute takes back if the member's failure path has not confirmed it.
func (f *FailureLog) Suspect(node, address string) bool {
	return f.report(node, address, true)
}

func (f *FailureLog) report(node, address string, suspicion bool) bool {
	if f == nil {
		return true
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.seen == nil {
		f.seen = map[incarnation]failureSeen{}
	}
	key := incarnation{node, address}
	if r, ok := f.seen[key]; ok || f.closed {
		if ok && !suspicion {
			r.suspected = false
			f.seen[key] = r
		}
		return false
	}
	f.seq++
	f.seen[key] = failureSeen{seq: f.seq, suspected: suspicion}
	f.order = append(f.order, failureRecord{key, f.seq})
	if len(f.order) > maxFailuresRemembered {
		old := f.order[0]
		f.order = slices.Delete(f.order, 0, 1)
		if f.seen[old.node].seq == old.seq { // not forgotten and recorded again since
			delete(f.seen, old.node)
		}
	}
	return true
}

// Suspected reports whether a shard's suspicion of node at address stands
// unconfirmed.
func (f *FailureLog) Suspected(node, address string) bool {
	if f == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.seen[incarnation{node, address}].suspected
}

// Refute takes back a shard's suspicion of node at address that the
// member's failure path has not confirmed: the node proved alive (it
// answered a question asked after the report). It reports whether there
// was one.
func (f *FailureLog) Refute(node, address string) bool {
	if f == nil {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	key := incarnation{node, address}
	if r, ok := f.seen[key]; ok && r.suspected {
		delete(f.seen, key)
		return true
	}
	return false
}

// Left records that node (at address) leaves on purpose: its store
// stops, and that is no failure, so no report of it is announced (as if
// it had been already).
func (f *FailureLog) Left(node, address string) { f.First(node, address) }

// Forget lets a node (at address) that came back be reported again when
// it fails.
func (f *FailureLog) Forget(node, address string) {
	if f == nil {
		return
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.seen, incarnation{node, address})
}

// Shard is the actor that owns one directory.LocationTable. Its state is soft: after
// a restart it starts empty and store nodes republish what they hold and
// which ids they saw deleted.
type Shard struct {
	cfg   ShardConfig
	table *directory.LocationTable
	// inline is the table's inlineindex.Index, registered for the Locates
	// answered without the shard (inline_locate.go).
	inline *inlineindex.Index
	// timer wakes the shard at the table's next deadline (the Tick the
	// table's Box asks for), so an idle shard costs nothing; a ticker
	// every 20 ms on each of a member's shards was a quarter of an idle
	// member's CPU.
	timer   shell.Timer
	watched map[string]string // store node PID -> node id, watched for Terminated
	locates locateSpans       // traced Locates not answered yet
	starts  *atomic.Int32     // shared by the shard's incarnations
	// republishing holds the store nodes (by PID key) asked to republish
	// at this start that have neither answered RepublishDone nor failed:
	// while one may still send copies, the table cannot tell whether a
	// copy it knows is the last, and LOST is not answered from it.
	// republishUntil bounds only what RebuildQuery reports.
	republishing   map[string]*messages.NodeRef
	republishUntil time.Time
	// asked holds every store node (by PID key) asked to republish to
	// this table: at its start, or when it came into the member's view
	// later (see watchStores).
	asked map[string]bool
	// gone is set when this incarnation stops or restarts; its
	// coordinators read it (see NewCoordinator).
	gone atomic.Bool
	// coordinators are the running Reduces' coordinators (children), by
	// reduce id.
	coordinators map[string]*actor.PID
	// deferred are the Reduces asked for while republishing (bounded by
	// maxDeferredReduces): they start once it is over.
	deferred []deferredReduce
	// republished: every store node asked has answered or failed, and the
	// table was told (directory.Republished).
	republished bool
	// forgot: this table started over after a failure (see started);
	// notedAmnesic: the Keeper was told that it, or an earlier table, forgot.
	forgot       bool
	notedAmnesic bool
	// senders send the Republish requests, one per store node, so that a
	// DeadLetterResponse names the node that was not running.
	senders actorutil.Senders
	// probing holds the store nodes (by PID key) that spoke again after
	// this member's shards suspected them failed, asked NodeStatus and not
	// answered yet: only an answer to a question asked after the
	// suspicion shows the node alive (a message it sent before it died can
	// come after its Terminated).
	probing map[string]bool
	// subscribers are the subscribers (by PID key) with a subscription
	// here, watched: one that stops without unsubscribing (a coordinator
	// whose member died, a peer that went) is dropped from the table.
	subscribers map[string]*actor.PID
	// covered are the subscribers (by PID key) on another member whose
	// store node this shard watches (watchedAt): that watch stands for
	// theirs. A remote watch is a Watch message, a Terminated when the
	// coordinator stops and an Unwatch at its Unsubscribe, three of the
	// four control messages a small Reduce's coordinator costs each of
	// its sources' shards; the store node's watch ends when the
	// connection to the subscriber's process does (or that member's store
	// stops, its coordinators with it), and a coordinator that stops
	// while its member lives unsubscribes as it stops.
	covered map[string]bool
	// watchedAt counts the watched store nodes by actor system address.
	watchedAt map[string]int
	// nodeWatchers are the coordinators (children) told of a watched
	// store node's end, by the node's PID key (coordactor.WatchNode).
	nodeWatchers map[string][]*actor.PID
}

// DefaultRepublishWait is ShardConfig.RepublishWait's default.
const DefaultRepublishWait = 5 * time.Second

// WatchStores tells a shard (in process) that the live store nodes
// changed: it watches those of ShardConfig.Nodes it does not watch yet.
// A shard watches every store node live at its start; one that joins
// later would otherwise be watched at its first Locate or copy here, a
// remote Watch inside that node's first small Get of an object on this
// shard.
type WatchStores struct{}

// TableOpened tells a shard's Keeper (its member's store node, in
// process) that Table, a table of shard Shard, runs on this member:
// until it hands over (TableHandedOver), the Keeper holds its answer to
// a Republish of that shard from any other table (the shard's next home
// by another member's view), for this table may still mark losses only
// it knows.
type TableOpened struct {
	Shard int32
	Table *actor.PID
}

// TableHandedOver tells a shard's Keeper that the table of shard Shard
// on this member stopped, and LostIDs are the ids it held in doubt: no
// copy of them may be whole, and only the table knew they existed. The
// Keeper keeps them as lost (as it keeps a table's losses) and passes
// them to the Republish it held.
type TableHandedOver struct {
	Shard   int32
	Table   *actor.PID
	LostIDs []string
}

// RebuildQuery asks a shard (in process) how far its rebuild is; it
// answers RebuildStatus. A shard that just started still expects the
// copies of every store node it asked to republish: they arrive later as
// publications, which a caller that wants a quiet directory (the embedded
// cluster's start) must not mistake for its own traffic.
type RebuildQuery struct{}

// RebuildStatus answers RebuildQuery: Pending store nodes have not
// answered the shard's republish request yet (0 once RepublishWait has
// passed since it started: the caller only waits for a quiet directory).
type RebuildStatus struct{ Pending int }

// NewShardProps returns the props of a directory shard actor.
func NewShardProps(cfg ShardConfig) *actor.Props {
	if cfg.Log == nil {
		cfg.Log = logrus.NewEntry(logrus.StandardLogger())
	}
	starts := new(atomic.Int32)
	// A coordinator that crashes is stopped, not restarted: its Reduce
	// fails with a clear error (the caller may retry) instead of resuming
	// half-remembered state.
	stopCoordinator := actor.NewOneForOneStrategy(0, 0, func(any) actor.Directive { return actor.StopDirective })
	return actorutil.Props(func() actor.Actor { return &Shard{cfg: cfg, starts: starts} },
		actor.WithSupervisor(stopCoordinator))
}

// Receive implements actor.Actor.
func (s *Shard) Receive(ctx actor.Context) {
	if h := s.cfg.BeforeReceive; h != nil {
		msg := ctx.Message()
		switch m := msg.(type) {
		case servedLocate:
			msg = m.locate // the hook sees a Locate as it came, on either path
		case servedSubscribe:
			msg = m.sub // and a Subscribe
		case servedGroup:
			for _, sub := range m.subs[:max(len(m.subs)-1, 0)] {
				h(ctx.Self().GetId(), sub) // and each of a group's
			}
			if len(m.subs) > 0 {
				msg = m.subs[len(m.subs)-1]
			}
		}
		h(ctx.Self().GetId(), msg)
	}
	now := time.Now()
	var out outbox.Box // a refusal of the shard's own: carried last
	switch m := ctx.Message().(type) {
	case *actor.Started:
		s.started(ctx)
		return
	case *actor.Restarting:
		s.closeInline(ctx.Self())
		s.endLocateSpans("", "", "shard restarting")
		s.stopping(ctx, "directory shard restarting")
		return
	case *actor.Stopping:
		s.closeInline(ctx.Self())
		s.endLocateSpans("", "", "shard stopping")
		s.handOver(ctx)
		s.stopping(ctx, "directory shard stopping")
		return
	case *actor.Terminated:
		s.terminated(ctx, m, now)
	case directory.Tick:
		if f := s.cfg.LossGrace; f != nil {
			// A doubt's grace starts at a Tick: measured as late as that.
			s.table.SetLossGrace(f())
		}
		s.step(ctx, now, m)
	case *messages.CreateObject:
		s.watch(ctx, m.GetCreator())
		s.step(ctx, now, directory.Create{Req: m, ReplyTo: ctx.Sender()})
	case *messages.PublishLocation:
		s.watch(ctx, m.GetNode())
		s.step(ctx, now, m)
	case *messages.UnpublishLocation:
		s.step(ctx, now, m)
	case *messages.ReportLost:
		if n := len(s.republishing); n > 0 {
			// Whether this is the last copy is not known before every store
			// node has republished: a leaving member asking now was told
			// "lost" of an object another member held (its publication
			// still on the way), or NOT_FOUND of its own. It retries.
			out.Send(ctx.Sender(), &messages.ReportLostReply{ObjectId: m.GetObjectId(),
				Error: messages.Errorf(messages.ErrorCode_UNAVAILABLE, "directory shard %s is rebuilding: %d store nodes have not republished yet", s.name(ctx), n)})
			break
		}
		s.step(ctx, now, directory.ReportLost{Req: m, ReplyTo: ctx.Sender()})
	case *messages.RepublishDone:
		delete(s.republishing, actorutil.Key(m.GetNode().PID()))
		s.republishedAll(ctx)
	case RebuildQuery:
		ctx.Respond(RebuildStatus{Pending: s.pending(now)})
		return
	case WatchStores:
		s.watchStores(ctx, now)
	case *messages.Locate:
		s.watch(ctx, m.GetReceiver())
		s.traceLocate(m, ctx.Sender())
		s.step(ctx, now, directory.Locate{Req: m, ReplyTo: ctx.Sender()})
	case servedLocate:
		s.watch(ctx, m.locate.GetReceiver())
		s.traceLocate(m.locate, m.reply)
		s.step(ctx, now, directory.Locate{Req: m.locate, ReplyTo: m.reply})
	case *messages.CancelLocate:
		s.endLocateSpans(m.GetObjectId(), m.GetReceiver().GetNodeId(), "withdrawn")
		s.step(ctx, now, m)
	case AbandonLocate:
		s.abandonLocateSpans(m.ObjectID, m.ReplyTo)
		s.step(ctx, now, directory.AbandonLocate{ID: m.ObjectID, ReplyTo: m.ReplyTo})
	case *messages.FetchDone:
		s.step(ctx, now, m)
	case *messages.FetchAborted:
		s.step(ctx, now, m)
	case *messages.DeleteObject:
		if len(s.republishing) > 0 {
			// Answered now, naming the store nodes not heard from (its
			// caller asks them to drop their copies), rather than after
			// the slowest of them (see directory's DeleteNaming).
			s.step(ctx, now, directory.DeleteNaming{Req: m, ReplyTo: ctx.Sender(), Pending: s.pendingNodes()})
			break
		}
		s.step(ctx, now, directory.Delete{Req: m, ReplyTo: ctx.Sender()})
	case *messages.Tombstones:
		s.step(ctx, now, m)
		s.noteAmnesia(ctx) // an earlier table's may be this one's now
	case *messages.Subscribe:
		if ctx.Sender() == nil {
			s.dropped(ctx, "subscribe without a sender")
			return
		}
		s.subscribe(ctx, now, ctx.Sender(), m, false)
	case servedSubscribe:
		m.done <- s.subscribe(ctx, now, m.subscriber, m.sub, true)
	case servedGroup:
		m.done <- s.subscribeGroup(ctx, now, m.subscriber, m.subs)
	case *messages.Unsubscribe:
		s.unsubscribe(ctx, now, m)
	case *coordactor.WatchNode:
		s.watchFor(ctx, m)
		return
	case *messages.QueryObject:
		s.step(ctx, now, directory.Query{Req: m, ReplyTo: ctx.Sender()})
	case CountObjects:
		ctx.Respond(ObjectCount{Objects: s.table.Known(), Subscribers: len(s.subscribers)})
		return
	case *messages.ListObjects:
		s.list(ctx, m)
		return
	case *messages.StartReduce:
		s.startReduce(ctx, m, ctx.Sender(), now)
		return
	case *messages.CancelReduce:
		s.cancelReduce(ctx, m)
		return
	case *messages.ReleaseTarget:
		s.step(ctx, now, m)
	case actor.SystemMessage, actor.AutoReceiveMessage:
		return
	case *messages.NodeStatusReply:
		s.proved(ctx, m.GetNode())
		return
	case *actor.DeadLetterResponse:
		// A Republish request to a store node that died meanwhile: its
		// copies are gone, and the failure path says so.
		delete(s.republishing, actorutil.Key(m.Target))
		delete(s.probing, actorutil.Key(m.Target))
		s.republishedAll(ctx)
	default:
		s.dropped(ctx, "unknown message")
		return
	}
	s.deliver(ctx, out)
	s.startDeferred(ctx)
}

// subscribe pushes the object's locations to the subscriber (a Reduce
// coordinator) from now on. Stepped on inline (a Subscribe that came on
// the data plane), what the table sends is split first: every update
// carrying inline bytes is the answer returned, and nothing goes as a
// message (inlineDrive, see answerInline); otherwise all of it goes as
// messages and the answer is nil.
func (s *Shard) subscribe(ctx actor.Context, now time.Time, subscriber *actor.PID, m *messages.Subscribe, inline bool) *messages.SubscribeAnswer {
	key := actorutil.Key(subscriber)
	ev := directory.Subscribe{Req: s.duringRebuild(m), Key: key, To: subscriber}
	var answer *messages.SubscribeAnswer
	if inline {
		o, _ := inlineDrive.StepAt(ctx, s, answering{s.table}, now, ev)
		answer = o.Answer
	} else {
		s.step(ctx, now, ev)
	}
	s.noteSubscriber(ctx, key, subscriber)
	return answer
}

// subscribeGroup is subscribe for a grouped SubscribeBatch's Subscribes
// to this shard (servedGroup), stepped together with nothing between
// them: the updates carrying inline bytes are the answer, as for one
// Subscribe; the others go to the subscriber as one LocationUpdateBatch
// (groupUpdates), in the order the table made them, before any update
// a later message makes.
func (s *Shard) subscribeGroup(ctx actor.Context, now time.Time, subscriber *actor.PID, subs []*messages.Subscribe) *messages.SubscribeAnswer {
	key := actorutil.Key(subscriber)
	answer := &messages.SubscribeAnswer{}
	var box outbox.Box
	for _, m := range subs {
		o := answering{s.table}.Step(now, directory.Subscribe{Req: s.duringRebuild(m), Key: key, To: subscriber})
		answer.Updates = append(answer.Updates, o.Answer.GetUpdates()...)
		box.Merge(o.Box)
	}
	box.Sends = groupUpdates(box.Sends, key)
	s.deliver(ctx, box)
	s.noteSubscriber(ctx, key, subscriber)
	return answer
}

// duringRebuild is m as the table takes it now. While the shard is
// rebuilt, a copy the table does not know yet may still be republished
// (as for ReportLost): whether the object is lost is answered to a later
// resubscription, once the rebuild is over, and the subscription itself
// holds now.
func (s *Shard) duringRebuild(m *messages.Subscribe) *messages.Subscribe {
	if m.GetLocatedBefore() && len(s.republishing) > 0 {
		return &messages.Subscribe{ObjectId: m.GetObjectId(), OnceBelow: m.GetOnceBelow()}
	}
	return m
}

// noteSubscriber watches a subscriber the table now has, once.
func (s *Shard) noteSubscriber(ctx actor.Context, key string, subscriber *actor.PID) {
	if _, ok := s.subscribers[key]; !ok && s.table.Subscribed(key) {
		s.subscribers[key] = subscriber
		if a := subscriber.GetAddress(); a != ctx.Self().GetAddress() && s.watchedAt[a] > 0 {
			s.covered[key] = true
		} else {
			ctx.Watch(subscriber)
		}
	}
}

func (s *Shard) unsubscribe(ctx actor.Context, now time.Time, m *messages.Unsubscribe) {
	if ctx.Sender() == nil {
		return
	}
	key := actorutil.Key(ctx.Sender())
	s.step(ctx, now, directory.Unsubscribe{Req: m, Key: key})
	s.unwatchIdleSubscriber(ctx, key)
}

// unwatchIdleSubscriber stops watching a subscriber that follows nothing
// here any more.
func (s *Shard) unwatchIdleSubscriber(ctx actor.Context, key string) {
	if pid, ok := s.subscribers[key]; ok && !s.table.Subscribed(key) {
		delete(s.subscribers, key)
		if s.covered[key] {
			delete(s.covered, key)
			return
		}
		ctx.Unwatch(pid)
	}
}

func (s *Shard) list(ctx actor.Context, m *messages.ListObjects) {
	if ctx.Sender() != nil {
		ctx.Respond(s.table.List(m))
	}
}

func (s *Shard) started(ctx actor.Context) {
	tc := s.cfg.Table
	// A table that started over after a failure forgot what the one
	// before knew; one moved from a live member only may not have heard
	// it all yet (the former table's last losses can cross its start),
	// and is amnesic as a caution its successors need not share.
	forgot := s.starts.Load() > 0 || s.cfg.Rebuilt
	tc.Amnesic = forgot || s.cfg.Moved
	// Every table here is told Republished (republishedAll): until then
	// the copies of objects that exist may still be on their way, however
	// the shard came to start, and a Delete waits for them.
	tc.AwaitRepublish = true
	tc.Instance = tableInstance()
	tc.Inline = s.openInline(ctx.Self())
	if s.cfg.Keeper != nil {
		tc.Keeper = s.cfg.Keeper
	}
	s.table = directory.NewLocationTable(tc)
	s.notedAmnesic, s.forgot = false, forgot
	if s.cfg.Keeper != nil {
		ctx.Send(s.cfg.Keeper.PID(), TableOpened{Shard: int32(s.cfg.Index), Table: ctx.Self()})
	}
	s.noteAmnesia(ctx)
	s.watched = map[string]string{}
	s.republishing = map[string]*messages.NodeRef{}
	s.asked = map[string]bool{}
	s.probing = map[string]bool{}
	s.subscribers = map[string]*actor.PID{}
	s.covered = map[string]bool{}
	s.watchedAt = map[string]int{}
	s.nodeWatchers = map[string][]*actor.PID{}
	s.republished = false
	s.republishUntil = time.Now().Add(cmp.Or(s.cfg.RepublishWait, DefaultRepublishWait))
	first := s.starts.Add(1) == 1 && !s.cfg.Rebuilt
	if s.cfg.Nodes != nil {
		// Soft state: whatever the store nodes hold, and the ids they
		// know were deleted, come back to us.
		// A request, so the copies come back to this shard even before the
		// nodes' shard tables point here (the shard may just have moved).
		//
		// Every live store node is watched now rather than at its first
		// Locate or copy here: a remote Watch is a gRPC message and a run
		// of the node's mailbox, which would otherwise fall inside the
		// first small Get each node makes of an object on this shard
		// (seven of them in a 1 KiB broadcast to 7 whose object's shard
		// is new to them).
		for _, n := range s.cfg.Nodes() {
			s.askRepublish(ctx, n)
			s.watch(ctx, n)
		}
	}
	if !first {
		// Info, not Warn: ShardRebuilt tells it, and a shard also
		// rebuilds when placement moves it to a member that joined.
		s.cfg.Log.WithField("shard", s.name(ctx)).Info("directory shard rebuilt from the store nodes")
		host := s.cfg.Host
		if host == "" {
			host = ctx.Parent().GetId()
		}
		ctx.ActorSystem().EventStream.Publish(&events.ShardRebuilt{Shard: s.name(ctx), Host: host})
	}
	// With no store node to wait for, the table has every copy now (it
	// holds a Delete until then).
	s.republishedAll(ctx)
}

// noteAmnesia tells the Keeper, once per table, that objects of the
// shard were forgotten (this table started over after a failure, or an
// earlier one had: directory.LocationTable.Forgot): the shard's next
// table, wherever it starts, is amnesic too.
func (s *Shard) noteAmnesia(ctx actor.Context) {
	if s.cfg.Keeper == nil || s.notedAmnesic || !(s.forgot || s.table.Forgot()) {
		return
	}
	s.notedAmnesic = true
	ctx.Send(s.cfg.Keeper.PID(), &messages.Tombstones{Amnesic: true, Shard: int32(s.cfg.Index)})
}

// handOver tells the Keeper, as the shard stops (it moved away, or its
// member stops), what only this table knew and had not kept there yet:
// the ids in doubt (directory.LocationTable.Doubts), as lost. The Keeper
// holds its answer to the shard's next table's Republish until this
// arrives, so that table learns them before it answers a Delete.
func (s *Shard) handOver(ctx actor.Context) {
	if s.cfg.Keeper == nil || s.table == nil {
		return
	}
	ctx.Send(s.cfg.Keeper.PID(), TableHandedOver{Shard: int32(s.cfg.Index), Table: ctx.Self(), LostIDs: s.table.Doubts()})
}

// name is this shard as events, logs and errors write it: "<member
// id>/shard-<j>" (package membername), Host being its member.
func (s *Shard) name(ctx actor.Context) string { return membername.Of(s.cfg.Host, ctx.Self().GetId()) }

// stopping fails the parked requests: the table is about to be lost, and
// their requesters retry against the restarted (or moved) shard instead
// of waiting for their deadlines.
func (s *Shard) stopping(ctx actor.Context, why string) {
	// Before the coordinators stop with it: they tell their callers to
	// start the Reduce again at the shard's home, and so are the Reduces
	// that waited for the rebuild told.
	s.gone.Store(true)
	for _, d := range s.deferred {
		if d.sender != nil {
			ctx.Send(d.sender, &messages.ReduceReply{TargetId: d.start.GetReduce().GetTargetId(), ShardStopped: true,
				Error: messages.Errorf(messages.ErrorCode_UNAVAILABLE, "%s before the Reduce started", why)})
		}
	}
	s.deferred = nil
	s.step(ctx, time.Now(), directory.FailWaiters{Err: messages.Errorf(messages.ErrorCode_UNAVAILABLE, "%s", why)})
	s.timer.Stop()
	s.senders.Close() // a restarted shard asks anew
}

// terminated forgets a watched store node that stopped: its copies and
// the requests it parked leave the table. (A coordinator child's
// Terminated is not a node's.)
func (s *Shard) terminated(ctx actor.Context, m *actor.Terminated, now time.Time) {
	key := actorutil.Key(m.GetWho())
	if _, ok := s.subscribers[key]; ok {
		delete(s.subscribers, key)
		delete(s.covered, key)
		s.table.DropSubscriber(key)
	}
	for id, pid := range s.coordinators {
		if pid.Equal(m.GetWho()) {
			delete(s.coordinators, id)
			s.forgetWatcher(pid)
			return
		}
	}
	node, ok := s.watched[key]
	if !ok {
		return
	}
	delete(s.watched, key)
	s.unwatchedAt(m.GetWho().GetAddress())
	for _, w := range s.nodeWatchers[key] {
		ctx.Send(w, m)
	}
	delete(s.nodeWatchers, key)
	delete(s.republishing, key) // it will not answer any more
	delete(s.asked, key)        // bounded by the nodes alive, not every incarnation seen
	delete(s.probing, key)
	if s.cfg.Failures.Suspect(node, m.GetWho().GetAddress()) {
		s.cfg.Log.WithFields(logrus.Fields{"node": node, "shard": s.name(ctx), "why": m.GetWhy().String(), "address": m.GetWho().GetAddress()}).Warn("node failed")
		ctx.ActorSystem().EventStream.Publish(&events.NodeFailed{Node: node, Address: m.GetWho().GetAddress(), DetectedBy: s.name(ctx), At: now})
	}
	s.step(ctx, now, directory.IncarnationFailed{Node: node, Address: m.GetWho().GetAddress()})
	s.republishedAll(ctx)
}

// pendingNodes are the store nodes asked to republish that have neither
// answered nor failed, by node id.
func (s *Shard) pendingNodes() []*messages.NodeRef {
	nodes := slices.Collect(maps.Values(s.republishing))
	slices.SortFunc(nodes, func(a, b *messages.NodeRef) int { return cmp.Compare(a.GetNodeId(), b.GetNodeId()) })
	return nodes
}

// askRepublish asks store node n to republish its copies of this
// shard's objects to this table.
func (s *Shard) askRepublish(ctx actor.Context, n *messages.NodeRef) {
	key := actorutil.Key(n.PID())
	s.asked[key] = true
	s.republishing[key] = n
	s.senders.Request(ctx, n.PID(), &messages.Republish{Shards: []int32{int32(s.cfg.Index)}, ShardCount: int32(s.cfg.Count)})
}

// watchStores watches the member's store nodes as its view has them
// now, and asks each one this table has not asked to republish. The
// view a table starts with may lack members (a member that rejoined
// placed its shards before its view held every member, or a partition
// hid some): told Republished with only those, the table answered a
// Delete of an object a member it did not see held NOT_FOUND. A table
// already told goes back to waiting (directory.AwaitRepublish) until the
// late ones answer.
func (s *Shard) watchStores(ctx actor.Context, now time.Time) {
	if s.cfg.Nodes == nil || s.table == nil {
		return
	}
	late := false
	for _, n := range s.cfg.Nodes() {
		s.watch(ctx, n)
		if !s.asked[actorutil.Key(n.PID())] {
			s.askRepublish(ctx, n)
			late = true
		}
	}
	if !late || !s.republished {
		return
	}
	s.republished = false
	s.step(ctx, now, directory.AwaitRepublish{})
}

// republishedAll tells the table, once, that every store node it asked
// to republish has answered or failed: no copy it does not list exists
// (see directory.Republished).
func (s *Shard) republishedAll(ctx actor.Context) {
	if s.republished || len(s.republishing) > 0 || s.table == nil {
		return
	}
	s.republished = true
	s.step(ctx, time.Now(), directory.Republished{})
}

// tableInstance is a new table's Instance: random (and never 0, the
// instance of epochs no table issued), so that it issues no epoch an
// earlier table of the shard did.
func tableInstance() uint32 {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return max(binary.BigEndian.Uint32(b[:])&(1<<24-1), 1)
}

// watch makes the shard hear of a store node's failure: its copies must
// leave the directory and the requests it parked must go.
func (s *Shard) watch(ctx actor.Context, n *messages.NodeRef) {
	if n == nil || n.GetNodeId() == "" {
		return
	}
	pid := n.PID()
	if _, ok := s.watched[actorutil.Key(pid)]; !ok {
		s.watched[actorutil.Key(pid)] = n.GetNodeId()
		s.watchedAt[pid.GetAddress()]++
		ctx.Watch(pid)
		if s.cfg.Failures.Suspected(n.GetNodeId(), n.GetAddress()) && !s.probing[actorutil.Key(pid)] {
			// A node suspected failed speaks: it may live (its Terminated
			// was a broken connection), or this came before it died. Its
			// answer to a question asked now tells (see proved); a dead
			// node's Terminated comes again through the new watch.
			s.probing[actorutil.Key(pid)] = true
			s.senders.Request(ctx, pid, &messages.NodeStatus{})
		}
	}
}

// watchFor watches a coordinator's participant for it: the shard's own
// watch of the node's store (which it already holds for every live store
// node), whose Terminated goes on to the coordinator.
func (s *Shard) watchFor(ctx actor.Context, m *coordactor.WatchNode) {
	if m.Node == nil || m.Watcher == nil {
		return
	}
	s.watch(ctx, m.Node)
	key := actorutil.Key(m.Node.PID())
	if _, ok := s.watched[key]; !ok {
		// Not a node the shard can watch (no node id): the coordinator
		// watches it itself.
		ctx.Send(m.Watcher, &coordactor.WatchSelf{Node: m.Node})
		return
	}
	s.nodeWatchers[key] = append(s.nodeWatchers[key], m.Watcher)
}

// forgetWatcher drops a stopped coordinator from nodeWatchers.
func (s *Shard) forgetWatcher(pid *actor.PID) {
	for key, ws := range s.nodeWatchers {
		ws = slices.DeleteFunc(ws, func(w *actor.PID) bool { return w.Equal(pid) })
		if len(ws) == 0 {
			delete(s.nodeWatchers, key)
		} else {
			s.nodeWatchers[key] = ws
		}
	}
}

// unwatchedAt notes that a watched store node at address ended; with
// the last one there, the subscribers there that it covered (see
// covered) are dropped, as their own watches would have ended.
func (s *Shard) unwatchedAt(address string) {
	if s.watchedAt[address]--; s.watchedAt[address] > 0 {
		return
	}
	delete(s.watchedAt, address)
	for key := range s.covered {
		if s.subscribers[key].GetAddress() == address {
			delete(s.covered, key)
			delete(s.subscribers, key)
			s.table.DropSubscriber(key)
		}
	}
}

// proved takes back the suspicion of a node that answered a probe (see
// watch): it lives. Its copies left this table with the suspicion, so it
// is asked for them again; and its real failure later is announced, not
// taken for a repeat of the suspicion (FailureLog).
func (s *Shard) proved(ctx actor.Context, n *messages.NodeRef) {
	if n == nil || !s.probing[actorutil.Key(n.PID())] {
		return
	}
	delete(s.probing, actorutil.Key(n.PID()))
	if s.cfg.Failures.Refute(n.GetNodeId(), n.GetAddress()) {
		s.cfg.Log.WithFields(logrus.Fields{"node": n.GetNodeId(), "shard": s.name(ctx)}).Info("a node suspected failed proved alive")
		s.senders.Request(ctx, n.PID(), &messages.Republish{Shards: []int32{int32(s.cfg.Index)}, ShardCount: int32(s.cfg.Count)})
	}
}

// pending counts the store nodes that may still republish copies to this
// shard, for RebuildQuery (none once RepublishWait has passed since it
// started).
func (s *Shard) pending(now time.Time) int {
	if !now.Before(s.republishUntil) {
		return 0
	}
	return len(s.republishing)
}

// startReduce reserves the target and spawns the Reduce's coordinator as a
// child: the target's shard is where Gets of the target wait, and it
// rejects a second Reduce or a Put of the same target meanwhile.
func (s *Shard) startReduce(ctx actor.Context, m *messages.StartReduce, sender *actor.PID, arrived time.Time) {
	target := m.GetReduce().GetTargetId()
	answer := func(r *messages.ReduceReply) {
		if sender != nil {
			ctx.Send(sender, r)
		}
	}
	fail := func(err *messages.Error) { answer(&messages.ReduceReply{TargetId: target, Error: err}) }
	if err := validStart(m, cmp.Or(s.cfg.Table.MaxObjectIDLen, directory.DefaultTableConfig().MaxObjectIDLen)); err != nil {
		fail(err)
		return
	}
	if s.cfg.NewCoordinator == nil {
		fail(messages.Errorf(messages.ErrorCode_UNAVAILABLE, "this directory shard runs no reduce coordinators"))
		return
	}
	if len(s.republishing) > 0 {
		// The table may not know the target yet: a copy of it, or an
		// earlier attempt's committed result, may still be republished.
		// Reserved now, the target would be produced again over it.
		if len(s.deferred) >= maxDeferredReduces {
			fail(messages.Errorf(messages.ErrorCode_UNAVAILABLE, "directory shard %s is rebuilding and holds %d Reduces already", s.name(ctx), len(s.deferred)))
			return
		}
		s.deferred = append(s.deferred, deferredReduce{start: m, sender: sender, arrived: arrived})
		return
	}
	if waited := time.Since(arrived); waited >= time.Millisecond {
		// It waited for the rebuild: the coordinator gets what is left.
		left := m.GetReduce().GetTimeoutMs() - waited.Milliseconds()
		if m.GetReduce().GetTimeoutMs() > 0 && left <= 0 {
			fail(messages.Errorf(messages.ErrorCode_TIMEOUT, "reduce into %q: the deadline passed while directory shard %s rebuilt", target, s.name(ctx)))
			return
		}
		if m.GetReduce().GetTimeoutMs() > 0 {
			r := proto.CloneOf(m.GetReduce())
			r.TimeoutMs = left
			m = &messages.StartReduce{Reduce: r, Caller: m.GetCaller(), CallId: m.GetCallId()}
		}
	}
	var nonce [6]byte
	_, _ = rand.Read(nonce[:])
	call := m.GetCallId()
	if call == "" {
		call = fmt.Sprintf("%x", nonce[:3])
	}
	id := directory.ReduceID(target, call, fmt.Sprintf("%x", nonce))
	if rid := s.table.Reservation(target); rid != "" && directory.CallOf(rid) == directory.CallOf(id) {
		if pid := s.coordinators[rid]; pid != nil {
			// The same call, asked again (its caller's request failed
			// while this shard moved or restarted): the running attempt
			// answers the new request.
			ctx.Send(pid, &coordactor.AttachRequester{Requester: sender})
			return
		}
	}
	committed, err := s.table.Reserve(target, id)
	if err != nil {
		fail(err)
		return
	}
	if committed != nil {
		s.cfg.Log.WithFields(logrus.Fields{"target": target, "call": call}).
			Info("reduce: an earlier attempt of this call committed the target before its coordinator died; answering with its result")
		answer(&messages.ReduceReply{TargetId: target, ReducedIds: committed,
			UnreducedIds: unreduced(m.GetReduce().GetSourceIds(), committed)})
		return
	}
	pid := ctx.Spawn(s.cfg.NewCoordinator(id, m, sender, s.gone.Load))
	if s.coordinators == nil {
		s.coordinators = map[string]*actor.PID{}
	}
	s.coordinators[id] = pid
}

// cancelReduce hands a caller's cancel to the coordinator that runs its
// call (the target's reservation names the call). A cancel for another
// call, or for none running, is dropped: its Reduce ended, and the
// cancel of a call whose reservation this shard does not hold must not
// end another caller's Reduce of the same target. So is one for a call
// deferred by a rebuild: an earlier attempt of it may have committed the
// target, which the rebuild is still to learn, and the call then answers
// with that result.
func (s *Shard) cancelReduce(ctx actor.Context, m *messages.CancelReduce) {
	target, call := m.GetTargetId(), m.GetCallId()
	if call == "" {
		return
	}
	rid := s.table.Reservation(target)
	if rid == "" || directory.CallOf(rid) != directory.CallOf(directory.ReduceID(target, call, "")) {
		return
	}
	if pid := s.coordinators[rid]; pid != nil {
		ctx.Send(pid, m)
	}
}

// validStart checks a StartReduce before anything is reserved. A
// member's store node validated its caller's Reduce and gave it a
// timeout, but any process may send a shard one: unchecked, a negative
// num_objects reached the coordinator's planner, and a timeout_ms past
// what a time.Duration holds wrapped around into a deadline in the past.
func validStart(m *messages.StartReduce, maxIDLen int) *messages.Error {
	if m.GetReduce() == nil {
		return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "StartReduce without a Reduce")
	}
	if err := reduction.ValidateReduce(m.GetReduce(), maxIDLen); err != nil {
		return err
	}
	if ms := m.GetReduce().GetTimeoutMs(); ms <= 0 || ms > directory.MaxTimeout.Milliseconds() {
		return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "reduce: timeout_ms %d outside 1..%d", ms, directory.MaxTimeout.Milliseconds())
	}
	return nil
}

// startDeferred starts the Reduces that waited for the rebuild, once it
// is over.
func (s *Shard) startDeferred(ctx actor.Context) {
	if len(s.republishing) > 0 || len(s.deferred) == 0 {
		return
	}
	d := s.deferred
	s.deferred = nil
	for _, r := range d {
		s.startReduce(ctx, r.start, r.sender, r.arrived)
	}
}

// maxDeferredReduces bounds the Reduces a rebuilding shard holds until
// every store node has republished.
const maxDeferredReduces = 4096

// deferredReduce is a StartReduce that came while the shard rebuilt.
type deferredReduce struct {
	start   *messages.StartReduce
	sender  *actor.PID
	arrived time.Time
}

// unreduced is sources without reduced, in sources' order.
func unreduced(sources, reduced []string) []string {
	var out []string
	for _, id := range sources {
		if !slices.Contains(reduced, id) {
			out = append(out, id)
		}
	}
	return out
}

// step steps the table with ev at now; the driver carries out its Box
// (shardDrive).
func (s *Shard) step(ctx actor.Context, now time.Time, ev any) {
	shardDrive.StepAt(ctx, s, s.table, now, ev)
}

// deliver carries out a Box the shard made itself (a refusal of its
// own).
func (s *Shard) deliver(ctx actor.Context, out outbox.Box) {
	shardDrive.Carry(ctx, s, out, nil)
}

// shardDrive steps the table and carries out its Box (the generic
// driver): its sends go to a PID or a store node, or back to the
// LocateHere call waiting on a callReply; a nil target was a tell's
// (nobody waits for the answer); a LocateReply ends its Locate's span
// as it goes. The table's one timer, its Tick, replaces the one
// pending: the table asks for a Tick only when its next deadline is
// earlier.
var shardDrive = &shell.Driver[*Shard, any, outbox.Box]{Carrier: shardCarrier}

// inlineDrive steps a Subscribe that came on the data plane (answering)
// and carries out what is not its answer, as shardDrive does.
var inlineDrive = &shell.Driver[*Shard, directory.Subscribe, inlineAnswer]{Carrier: shardCarrier}

var shardCarrier = shell.Carrier[*Shard]{
	Timer: func(ctx actor.Context, s *Shard, t outbox.Timer) { s.timer.Arm(ctx, t.At, t.Msg) },
	Route: func(_ actor.Context, s *Shard, o outbox.Send) bool {
		s.tracedAnswer(o.Msg)
		switch to := o.To.(type) {
		case *actor.PID, *messages.NodeRef:
			return false
		case *callReply:
			to.deliver(o.Msg)
		case nil:
		default:
			s.cfg.Log.WithField("type", to).Error("directory shard: send to an unknown target kind")
		}
		return true
	},
	Resolve: func(to any) *actor.PID {
		switch to := to.(type) {
		case *actor.PID:
			return to
		case *messages.NodeRef:
			return to.PID()
		}
		return nil
	},
}

func (s *Shard) dropped(ctx actor.Context, why string) {
	entry := s.cfg.Log.WithFields(logrus.Fields{"shard": s.name(ctx), "type": actorutil.TypeName(ctx.Message())})
	if ctx.Sender() != nil {
		entry = entry.WithField("from", membername.Actor(ctx.Sender()))
	}
	entry.Warn("directory shard dropped a message: " + why)
}
