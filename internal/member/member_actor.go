package member

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/events"
	"github.com/hoplite-go/hoplite/internal/actors/barrieractor"
	"github.com/hoplite-go/hoplite/internal/actors/revokeactor"
	"github.com/hoplite-go/hoplite/internal/actors/shardactor"
	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/membername"
	"github.com/hoplite-go/hoplite/internal/memberview"
	"github.com/hoplite-go/hoplite/internal/revoke"
	"github.com/hoplite-go/hoplite/messages"
)

// In-process messages of the members actor (they never cross a process).
type (
	// memberFailed: a failure notice about id, at address as its
	// originator knew it ("" if unknown), was delivered here; origin and
	// from say whose it was (diagnostics of a view that does not
	// converge).
	memberFailed struct{ id, address, origin, from string }
	// memberGone: this member's failure detector confirmed that nothing
	// listens at id's address any more (signal is what made it look).
	memberGone struct {
		id, address, signal string
		confirmedIn         time.Duration
	}
	// leaveSelf: this member leaves; answered with leaveDone once its
	// placement excludes it.
	leaveSelf struct{}
	leaveDone struct{}
	// awaitSettled is answered with settled once the handshake with the
	// members of the first topology is over.
	awaitSettled struct{}
	settled      struct {
		compatible, incompatible int
		reasons                  []string
	}
	membersTick struct{}
	// placementQuery is answered with placement: what this member placed
	// (the embedded cluster waits for every member to agree).
	placementQuery struct{}
	placement      struct {
		live, owners []string
		ownRunning   bool
		// shards are the shards this member runs (the embedded cluster
		// waits for their rebuilds too).
		shards []*actor.PID
		// peers says why each known peer is or is not live (diagnostics
		// of a view that does not converge).
		peers map[string]string
	}
)

// membersState survives restarts of the members actor.
type membersState struct {
	view        *memberview.View
	owners      []string // current placement (shard j -> member id)
	formerOwner []string // the owner before the last move of shard j
	// formerLeft[j]: shard j's former owner announced its leave, so the
	// shard moves while that owner's store still republishes to it,
	// rather than being rebuilt after a failure.
	formerLeft  []bool
	running     map[int]*actor.PID
	spawning    map[int]bool
	stopping    map[int]bool
	hello       map[string]*helloState
	topologySet bool
	// topologySeq is the number of the last topology applied.
	topologySeq uint64
	settled     bool
	waiters     []*actor.PID
	started     time.Time
	lastLive    []string
	lastReach   []string
	// lastStores: the store nodes the running shards were last told of.
	lastStores []*messages.NodeRef
	// The periodic comparison of views (compareViews).
	viewChecks    map[string]*viewCheck
	lastViewCheck time.Time
	checkedLive   []string // lastLive at the last comparison
}

// viewCheck is the comparison of this member's view with one peer's.
type viewCheck struct {
	inflight bool
	diff     string    // the last difference seen ("" if none)
	since    time.Time // when it was first seen
	warned   bool
}

// viewCheckInterval is how often a member compares its view with its
// neighbours' in the binomial graph of the live members, and
// viewCheckQuiet how often once every one agreed with the live members
// it still has (a difference that appears later is found within
// viewCheckQuiet, then warned of after viewDisagreeAfter).
const (
	viewCheckInterval = 2 * time.Second
	viewCheckQuiet    = 5 * viewCheckInterval
)

// viewDisagreeAfter is how long a difference must last to be logged at
// warn: longer than a membership change takes to settle, including the
// address quarantine of a member restarted where one failed (the others
// leave it out for that long while it already sees them).
const viewDisagreeAfter = memberview.AddressQuarantine + 2*time.Second

type helloState struct {
	inflight bool
	next     time.Time
	backoff  time.Duration
	// wait is how long the next handshake waits for its answer: it
	// doubles (up to helloMaxWait) after each one that timed out, since
	// on a loaded machine a round trip can take longer than helloFirstWait
	// and a fixed wait would throw every answer away (a join failed so
	// under 10 CPU-bound processes).
	wait time.Duration
}

// Bounds of a handshake's wait for its answer (helloState.wait).
const (
	helloFirstWait = time.Second
	helloMaxWait   = 8 * time.Second
)

// helloActor ("hello", the one name every member has) takes first
// contact: it hands a handshake to the members actor with its sender, who
// learns from the answer which incarnation answered and where its actors
// are. Nothing else is taken here: a message meant for an incarnation
// goes to that incarnation's actors, which a later one does not have.
type helloActor struct{ members *actor.PID }

func helloProps(members *actor.PID) *actor.Props {
	return actorutil.Props(func() actor.Actor { return &helloActor{members: members} })
}

func (a *helloActor) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*messages.MemberHello); ok {
		ctx.Forward(a.members)
	}
}

// membersActor ("node#<nonce>/members") is the shell around a memberview.View: it
// greets new members (the compatibility handshake), answers their
// greetings, and turns every change of the view into placement: the shard
// table, the shards this member runs, the store's republish of moved
// shards, and the revoke overlay.
type membersActor struct {
	m  *Member
	st *membersState
	// timer sends the next membersTick, every (the interval last armed)
	// after the one before.
	timer *time.Timer
	every time.Duration
	// now is when the message being taken arrived: every step of the
	// view while it is taken is at this time.
	now time.Time
}

// The members actor's tick interval: membersTickBusy after any event
// that may change the placement and while anything is pending (a
// handshake, a shard starting or stopping, a quarantine, a waiter for
// the settled view), membersTickQuiet once a tick finds nothing to do:
// twenty ticks a second of every member of an idle cluster were a
// wake-up of its process each, for nothing.
const (
	membersTickBusy  = 50 * time.Millisecond
	membersTickQuiet = 500 * time.Millisecond
)

func newMembersProps(m *Member) *actor.Props {
	st := &membersState{
		view:     memberview.New(m.id, m.system.Address(), m.ref, m.cfg.Shards),
		running:  map[int]*actor.PID{},
		spawning: map[int]bool{},
		stopping: map[int]bool{},
		hello:    map[string]*helloState{},
		started:  time.Now(),

		viewChecks: map[string]*viewCheck{},
	}
	return actorutil.Props(func() actor.Actor { return &membersActor{m: m, st: st} })
}

func (a *membersActor) Receive(ctx actor.Context) {
	a.now = time.Now()
	a.st.view.Step(a.now, memberview.Tick{})
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		a.started(ctx)
	case *actor.Stopping, *actor.Restarting:
		a.stopTicker()
	case *topologyUpdate:
		a.topology(ctx, msg)
	case *messages.MemberHello:
		a.greeted(ctx, msg)
	case *messages.MemberLeaving:
		a.memberLeaving(ctx, msg)
	case *memberFailed:
		a.memberFailed(ctx, msg)
	case *memberGone:
		a.memberGone(ctx, msg)
	case leaveSelf:
		a.leaveSelf(ctx)
	case awaitSettled:
		a.awaitSettled(ctx)
	case placementQuery:
		ctx.Respond(a.placement())
	case membersTick:
		a.tick(ctx)
		if a.quiet() {
			a.arm(membersTickQuiet)
		} else {
			a.arm(membersTickBusy)
		}
		return
	case *actor.Terminated:
		a.shardTerminated(ctx, msg.GetWho())
	}
	switch ctx.Message().(type) {
	case placementQuery, awaitSettled:
		// Questions: they change nothing (a waiter keeps ticks busy).
	default:
		if a.every != membersTickBusy {
			a.arm(membersTickBusy)
		}
	}
}

func (a *membersActor) started(ctx actor.Context) {
	sys, self := ctx.ActorSystem(), ctx.Self()
	a.every = membersTickBusy
	a.timer = time.AfterFunc(a.every, func() { sys.Root.Send(self, membersTick{}) })
	a.reconcile(ctx)
}

// arm sends the next tick after d; each tick arms the one after it.
func (a *membersActor) arm(d time.Duration) {
	if a.timer == nil {
		return // stopped
	}
	a.every = d
	a.timer.Reset(d)
}

// quiet: nothing pending that a tick would move on.
func (a *membersActor) quiet() bool {
	st := a.st
	return st.settled && len(st.waiters) == 0 && len(st.spawning) == 0 && len(st.stopping) == 0 &&
		!st.view.SelfLeaving() && !st.view.Quarantining() && len(st.view.NeedsHello()) == 0 && a.ownShardsRunning()
}

func (a *membersActor) stopTicker() {
	if a.timer != nil {
		a.timer.Stop()
		a.timer = nil
	}
}

func (a *membersActor) memberLeaving(ctx actor.Context, msg *messages.MemberLeaving) {
	a.m.kickMembership()
	id := msg.GetMemberId()
	if a.st.view.Step(a.now, memberview.Leaving{ID: id}).Changed {
		a.m.log.WithField("leaving", id).Info("member leaving: moving its shards")
		// Its store stops when it is gone: not a failure for the shards
		// here that watch it (FailureLog: no "node failed", no NodeFailed).
		a.m.failures.Left(id, a.st.view.Address(id))
	}
	a.reconcile(ctx)
	ctx.Respond(&messages.MemberLeavingReply{MemberId: a.m.id})
}

// memberGone decides what a member the failure detector found gone is:
// one that announced its leave has left (nothing to spread: every member
// it told sees it go by itself); any other failed, and the failure is
// spread.
func (a *membersActor) memberGone(ctx actor.Context, msg *memberGone) {
	if a.m.closing.Load() {
		return
	}
	a.m.kickMembership()
	p, known := a.st.view.Peer(msg.id)
	if known && p.Leaving && (p.Address == "" || p.Address == msg.address) {
		a.departed(ctx, msg.id, "its address: "+msg.signal)
		return
	}
	if !known || p.Dead {
		// Gone from the view already: it departed (a leave whose end the
		// topology showed first, and the view forgot it), or its failure
		// was spread. Its connection closing now is that same end: a
		// notice would call a member that left failed.
		a.m.log.WithFields(logrus.Fields{"member": msg.id, "signal": msg.signal}).Debug("member gone from the view already; its connection closed")
		return
	}
	a.m.log.WithFields(logrus.Fields{"suspect": msg.id, "signal": msg.signal, "confirmed_in": msg.confirmedIn}).
		Info("member unreachable: spreading a failure notice")
	if pid := a.m.revokePID.Load(); pid != nil {
		ctx.Send(pid, &revokeactor.Originate{Notice: revoke.FailureNotice(msg.id, msg.address)})
	}
}

// departed ends the leave of a member that announced it: gone from the
// topology, or nothing listens at its address any more. What a
// delivered failure does here, without the notice and without calling
// it a failure: the barrier managers stop waiting for its replicas, and
// the local shards drop what is left of its copies and parked requests
// (it gave its copies up while it left; one it could not is gone now).
func (a *membersActor) departed(ctx actor.Context, id, how string) {
	p, ok := a.st.view.Peer(id)
	if !ok {
		return
	}
	addr, store := p.Address, p.Store
	if !a.st.view.Step(a.now, memberview.Departed{ID: id}).Changed {
		return
	}
	a.m.log.WithFields(logrus.Fields{"left": id, "seen_by": how}).Info("member left the cluster")
	ctx.Send(a.m.barrierHost(), &barrieractor.MemberFailed{Member: id, Address: addr})
	if store != nil && addr != "" && !a.m.addressReused(addr, id) {
		for _, pid := range a.m.localShards() {
			ctx.Send(pid, &actor.Terminated{Who: store.PID(), Why: actor.TerminatedReason_AddressTerminated})
		}
	}
	a.reconcile(ctx)
}

func (a *membersActor) memberFailed(ctx actor.Context, msg *memberFailed) {
	if a.m.closing.Load() {
		return
	}
	a.m.kickMembership()
	if a.st.view.Step(a.now, memberview.Failed{ID: msg.id, Address: msg.address}).Changed {
		addr := msg.address
		if p, ok := a.st.view.Peer(msg.id); ok {
			a.st.view.Step(a.now, memberview.Blame{ID: msg.id, By: fmt.Sprintf("notice of %s at %s, from %s", cmp.Or(msg.origin, "?"), cmp.Or(msg.address, "no address"), cmp.Or(msg.from, "this member"))})
			addr = cmp.Or(p.Address, addr)
		}
		// The barrier managers here stop waiting for that member's
		// replicas to acknowledge a close. The view's acceptance, not any
		// NodeFailed: a directory shard also reports a store whose
		// endpoint merely broke, and a Close that skipped a live replica
		// could return while it answers the barrier open.
		ctx.Send(a.m.barrierHost(), &barrieractor.MemberFailed{Member: msg.id, Address: addr})
		// Published here, not where the notice was delivered: only a
		// notice the view accepted is about one of this member's peers.
		// A late notice of another cluster about a name not used here
		// yet was published too, and the real failure of that name's
		// member later was then taken for a repeat (FailureLog) and
		// published nowhere. The log is keyed by incarnation, so a
		// directory shard's report of the same failure is not repeated.
		if a.m.failures.First(msg.id, addr) {
			a.m.log.WithFields(logrus.Fields{"failed": msg.id, "origin": msg.origin, "from": msg.from}).Warn("member failed")
			ctx.ActorSystem().EventStream.Publish(&events.NodeFailed{Node: msg.id, Address: addr, DetectedBy: "revoke:" + msg.origin, Forwarder: msg.from, At: time.Now()})
		}
	} else {
		if p, ok := a.st.view.Peer(msg.id); ok && !p.Dead {
			a.m.log.WithFields(logrus.Fields{"subject": msg.id, "subject_address": msg.address, "known_address": p.Address}).
				Info("ignored a failure notice about a member at another address (a late message for another cluster)")
		}
	}
	a.reconcile(ctx)
}

func (a *membersActor) leaveSelf(ctx actor.Context) {
	a.st.view.Step(a.now, memberview.Leave{})
	a.reconcile(ctx)
	ctx.Respond(leaveDone{})
}

// awaitSettled answers once this member's view is settled and its own
// shards run; until then the asker waits in the list.
func (a *membersActor) awaitSettled(ctx actor.Context) {
	if a.st.settled && a.ownShardsRunning() {
		ctx.Respond(a.settledReply())
	} else if ctx.Sender() != nil {
		a.st.waiters = append(a.st.waiters, ctx.Sender())
	}
}

func (a *membersActor) placement() placement {
	st := a.st
	p := placement{live: slices.Clone(st.lastLive), owners: slices.Clone(st.owners),
		ownRunning: st.settled && a.ownShardsRunning(), peers: st.view.Describe()}
	for _, pid := range st.running {
		p.shards = append(p.shards, pid)
	}
	return p
}

func (a *membersActor) tick(ctx actor.Context) {
	st := a.st
	a.greet(ctx)
	a.reconcile(ctx)
	// Not on the embedded cluster: its members share one in-process
	// membership, so their views cannot disagree for long, and its
	// tests run up to 16 members at once (n·(n-1) requests per
	// check).
	if st.settled && a.m.cfg.embedded == nil && time.Since(st.lastViewCheck) >= a.viewCheckEvery() {
		st.lastViewCheck = time.Now()
		st.checkedLive = slices.Clone(st.lastLive)
		a.compareViews(ctx)
	}
}

// viewCheckEvery is the wait between two comparisons of views:
// viewCheckQuiet if every peer answered the last one agreeing and the
// live members are still those compared.
func (a *membersActor) viewCheckEvery() time.Duration {
	st := a.st
	if !slices.Equal(st.checkedLive, st.lastLive) {
		return viewCheckInterval
	}
	for _, vc := range st.viewChecks {
		if vc.inflight || vc.diff != "" {
			return viewCheckInterval
		}
	}
	return viewCheckQuiet
}

// shardTerminated notes that a shard this member was stopping is gone.
func (a *membersActor) shardTerminated(ctx actor.Context, who *actor.PID) {
	for j, stopping := range a.st.stopping {
		if stopping && who.GetId() == a.m.root+"/"+shardName(j) {
			delete(a.st.stopping, j)
		}
	}
	a.reconcile(ctx)
}

// topology applies a provider topology newer than the last applied. An
// older one can arrive after a newer one (Join sends the last it saw while
// the subscription may have sent a newer one already), and applying it
// would take back the members that joined in between: they "left the
// topology", and this member spread a failure notice about each live one
// (at 8 members starting under load: "the members did not converge ...
// node-4: compatible, in topology true, dead true", or a Join that
// never settled).
func (a *membersActor) topology(ctx actor.Context, u *topologyUpdate) {
	st := a.st
	if u.topology == nil || u.seq <= st.topologySeq || a.m.closing.Load() {
		return // closing: the whole cluster stops, nobody leaves or fails
	}
	st.topologySeq = u.seq
	var members []memberview.Member
	for _, m := range u.topology.GetMembers() {
		members = append(members, memberview.Member{ID: m.GetId(), Address: m.Address()})
	}
	before := st.view.Peers()
	o := st.view.Step(a.now, memberview.Topology{Members: members})
	joined, left := o.Joined, o.Left
	st.topologySet = true
	for _, id := range joined {
		a.m.log.WithField("joined", id).Debug("member appeared in the topology")
	}
	for _, id := range left {
		p, ok := before[id]
		if !ok || p.Dead || p.Incompatible {
			continue
		}
		if p.Leaving {
			// The end of a leave it announced: its shards moved already.
			a.departed(ctx, id, "provider topology")
			continue
		}
		// The provider no longer sees it: a failure, spread like any
		// other. The provider has confirmed it (several missed health
		// checks, or a refused connection) and blocked the id: it cannot
		// stay.
		entry := a.m.log.WithFields(logrus.Fields{"member": id, "signal": "provider topology"})
		if hp, ok := a.m.provider.(interface{ HealthError(string) error }); ok {
			if err := hp.HealthError(id); err != nil {
				entry = entry.WithField("evidence", err.Error())
			}
		}
		entry.Info("member left the topology: spreading a failure notice")
		a.originateAfterProbeDelay(ctx, revoke.FailureNotice(id, p.Address))
		go a.m.expelled(id, p.Address, RootOf(p.Store))
	}
	a.greet(ctx)
	a.reconcile(ctx)
}

// originateAfterProbeDelay spreads a notice the provider's health checks
// raised. The checks are this member's own probes, so the probe delay
// (testhooks.Set.ProbeDelay) holds them back like the detector's:
// without it a delayed member's provider dropped a SIGKILLed member
// within one round and originated before the undelayed member's notice
// reached it (the relay test, under CI load). A notice that arrived in
// the meantime makes the late Originate a duplicate, which the
// broadcaster drops.
func (a *membersActor) originateAfterProbeDelay(ctx actor.Context, n revoke.Notice) {
	pid := a.m.revokePID.Load()
	if pid == nil {
		return
	}
	d := a.m.cfg.hooks.ProbeDelay
	if d <= 0 {
		ctx.Send(pid, &revokeactor.Originate{Notice: n})
		return
	}
	root := ctx.ActorSystem().Root
	time.AfterFunc(d, func() {
		if !a.m.closing.Load() {
			root.Send(pid, &revokeactor.Originate{Notice: n})
		}
	})
}

// greet sends the handshake to every member whose outcome is open.
func (a *membersActor) greet(ctx actor.Context) {
	now := time.Now()
	for _, p := range a.st.view.NeedsHello() {
		h := a.st.hello[p.ID]
		if h == nil {
			h = &helloState{}
			a.st.hello[p.ID] = h
		}
		if h.inflight || now.Before(h.next) {
			continue
		}
		h.inflight = true
		id, addr := p.ID, p.Address
		h.wait = max(h.wait, helloFirstWait)
		hello := a.m.hello()
		hello.ToMemberId = id
		f := ctx.RequestFuture(HelloPID(addr), hello, h.wait)
		ctx.ReenterAfter(f, func(res any, err error) {
			h.inflight = false
			r, ok := res.(*messages.MemberHelloReply)
			if errors.Is(err, actor.ErrTimeout) {
				h.wait = min(2*h.wait, helloMaxWait)
			}
			if err != nil || !ok || r.GetMemberId() != id || r.GetCluster() != a.m.cfg.ClusterName {
				// Not up yet (or another incarnation answers there, or a
				// member of another cluster that took the address: embedded
				// clusters name their members alike): retry.
				h.backoff = min(max(2*h.backoff, 50*time.Millisecond), time.Second)
				h.next = time.Now().Add(h.backoff)
				return
			}
			compatible, why := r.GetCompatible(), r.GetError()
			if ok2, why2 := a.m.compatible(r.GetProtocolVersion(), r.GetShards()); !ok2 {
				compatible, why = false, "member "+id+" speaks "+why2
			} else if !compatible {
				why = "member " + id + " refused this member: " + why
			}
			a.outcome(id, addr, r.GetStore(), compatible, why)
			delete(a.st.hello, id)
			a.reconcile(ctx)
		})
	}
}

// greeted answers a handshake and takes the greeter's word for its side.
func (a *membersActor) greeted(ctx actor.Context, h *messages.MemberHello) {
	ok, why := a.m.compatible(h.GetProtocolVersion(), h.GetShards())
	if ctx.Sender() != nil {
		reply := &messages.MemberHelloReply{ProtocolVersion: a.m.cfg.version, Shards: int32(a.m.cfg.Shards),
			MemberId: a.m.id, Store: a.m.ref, Compatible: ok, Error: why, Cluster: a.m.cfg.ClusterName}
		live := a.st.view.Live()
		if d := h.GetViewDigest(); d != 0 && d == memberview.Digest(live) {
			reply.ViewSame = true
		} else {
			for _, id := range live {
				reply.View = append(reply.View, id)
				reply.ViewAddresses = append(reply.ViewAddresses, a.st.view.Address(id))
				reply.ViewStores = append(reply.ViewStores, a.st.view.Store(id))
			}
		}
		ctx.Respond(reply)
	}
	if to := h.GetToMemberId(); to != "" && to != a.m.id || h.GetCluster() != "" && h.GetCluster() != a.m.cfg.ClusterName {
		// Meant for another member that held this address, or from a
		// member of another cluster: the answer says who is here; the
		// greeting is not this member's to record.
		return
	}
	if id := h.GetMemberId(); id != "" && id != a.m.id {
		if !ok {
			why = "member " + id + " speaks " + why
		}
		a.outcome(id, h.GetStore().GetAddress(), h.GetStore(), ok, why)
		a.reconcile(ctx)
	}
}

func (a *membersActor) outcome(id, addr string, store *messages.NodeRef, compatible bool, why string) {
	if compatible && (store.GetNodeId() != id || store.GetAddress() == "" || store.GetDataAddress() == "") {
		compatible, why = false, "member "+id+" sent no usable store reference"
	}
	if a.st.view.Step(a.now, memberview.Hello{ID: id, Address: addr, Store: store, Compatible: compatible, Why: why}).Changed {
		a.m.log.WithFields(logrus.Fields{"peer": id, "reason": why}).Error("incompatible member: excluded from placement")
	}
}

func (a *membersActor) settledReply() settled {
	c, i, _, reasons := a.st.view.Compatibility()
	return settled{compatible: c, incompatible: i, reasons: reasons}
}

// reconcile turns the view into placement and runs what it says.
func (a *membersActor) reconcile(ctx actor.Context) {
	st, m := a.st, a.m
	v := st.view
	live := v.Live()
	owners := memberview.ShardOwners(live, m.cfg.Shards)
	// No placement before the first handshakes are over: a joining member
	// would otherwise start every shard for itself, then hand them over.
	if st.settled && !slices.Equal(owners, st.owners) {
		if st.formerOwner == nil {
			st.formerOwner = make([]string, len(owners))
			st.formerLeft = make([]bool, len(owners))
		}
		moved := memberview.MovedShards(st.owners, owners)
		for _, j := range moved {
			if int(j) < len(st.owners) {
				st.formerOwner[j] = st.owners[j]
				p, ok := v.Peer(st.owners[j])
				st.formerLeft[j] = ok && p.Leaving
			}
		}
		self := m.system.Address()
		table := make([]*actor.PID, len(owners))
		for j, o := range owners {
			store := v.Store(o)
			if store == nil {
				// Nobody: requests fail as UNAVAILABLE and retry.
				table[j] = ShardPID(self, m.root, j)
				continue
			}
			table[j] = ShardPID(store.GetAddress(), RootOf(store), j)
		}
		m.table.Store(&table)
		first := st.owners == nil
		st.owners = owners
		if !first && len(moved) > 0 {
			// Our copies of objects whose shard moved go to the new owners
			// (they also ask every store when they start: both directions
			// close the window in which views disagree).
			if pid := m.storePID.Load(); pid != nil {
				ctx.Send(pid, &messages.Republish{Shards: moved, ShardCount: int32(m.cfg.Shards)})
			}
		}
	}
	stores := v.Stores()
	m.stores.Store(&stores)
	if !sameStores(stores, st.lastStores) {
		st.lastStores = stores
		for _, pid := range st.running {
			ctx.Send(pid, shardactor.WatchStores{})
		}
	}
	reach := v.Reachable()
	if !slices.Equal(reach, st.lastReach) {
		st.lastReach = reach
		idx := newPeerIndex()
		membername.Register(m.system.Address(), m.root, m.id)
		for _, id := range reach {
			if id == m.id {
				continue
			}
			p, _ := v.Peer(id)
			if p.Store != nil {
				membername.Register(p.Store.GetAddress(), RootOf(p.Store), id)
			}
			idx.byID[id], idx.byAddr[p.Address] = p.Address, id
			if p.Store != nil {
				idx.storeOf[id] = p.Store
			}
			if d := p.Store.GetDataAddress(); d != "" {
				idx.byData[d], idx.dataOf[p.Address] = id, d
			}
		}
		old := m.peers.Swap(idx)
		m.forgetDataPeers(old, idx)
		m.warm.peersChanged()
		if pid := m.revokePID.Load(); pid != nil {
			ctx.Send(pid, &revokeactor.SetMembers{Members: reach})
		}
	}
	if !slices.Equal(live, st.lastLive) {
		st.lastLive = live
		m.live.Store(&live)
		m.log.WithFields(logrus.Fields{"members": len(live), "view": live}).Info("cluster view changed")
	}
	a.runShards(ctx)
	if !st.settled && st.topologySet {
		_, _, unknown, _ := v.Compatibility()
		if unknown == 0 || time.Since(st.started) > 5*time.Second {
			st.settled = true
			a.reconcile(ctx) // the first placement
			return
		}
	}
	// Join returns once the shards placed here run.
	if st.settled && len(st.waiters) > 0 && a.ownShardsRunning() {
		reply := a.settledReply()
		for _, w := range st.waiters {
			ctx.Send(w, reply)
		}
		st.waiters = nil
	}
}

func (a *membersActor) ownShardsRunning() bool {
	for j, owner := range a.st.owners {
		if owner == a.m.id && a.st.running[j] == nil {
			return false
		}
	}
	return true
}

// runShards starts the shards this member owns and stops the others.
func (a *membersActor) runShards(ctx actor.Context) {
	st, m := a.st, a.m
	node := m.node.Load()
	if node == nil || st.owners == nil {
		return
	}
	for j, owner := range st.owners {
		want := owner == m.id
		pid := st.running[j]
		switch {
		case want && pid == nil && !st.spawning[j] && !st.stopping[j]:
			st.spawning[j] = true
			former := st.formerOwner[j]
			// A shard whose former host failed is rebuilt (and says so); one
			// that moved because a member joined or announced its leave
			// simply moves (its former host's store republishes to it). Both
			// start empty and answer a Delete of an id they do not know as
			// a rebuilt shard does (shardactor.ShardConfig.Moved). A shard
			// of this member's first placement has no former owner here
			// even when it moved from a live member (this member joined or
			// rejoined): like every shard, it holds Deletes until the
			// store nodes have republished, which is what keeps a Delete
			// of an object that exists from finding no entry, and what
			// only the former table knew (its losses, deletions no node
			// held, its amnesia) comes back from the store node of its
			// former host, which kept it (ShardConfig.Keeper).
			moved := former != "" && former != m.id
			rebuilt := moved && !slices.Contains(st.lastLive, former) && !st.formerLeft[j]
			f := ctx.RequestFuture(node, hostChild{child{name: shardName(j), props: m.shardProps(j, rebuilt, moved && !rebuilt)}}, 5*time.Second)
			ctx.ReenterAfter(f, func(res any, err error) {
				delete(st.spawning, j)
				started, ok := res.(*actor.PID)
				if err != nil || !ok {
					return // the name is still taken by a stopping shard: next tick
				}
				st.running[j] = started
				// The stores may have changed between its start (which
				// watched those live then) and now.
				ctx.Send(started, shardactor.WatchStores{})
				if st.owners[j] != m.id { // moved on meanwhile
					a.stopShard(ctx, j)
				}
				a.reconcile(ctx)
			})
		case !want && pid != nil:
			a.stopShard(ctx, j)
		}
	}
}

// lossGrace is how long a directory shard here keeps an object in doubt
// (internal/directory, doubt.go): LossGraceFor a member round trip as
// measured (twice the estimator's one-way latency, DefaultLossGrace its
// floor), stretched by how late this process's goroutines run now. A
// constant tuned on an idle machine gave up on a FetchDone that a loaded
// one, or a slow network, was still carrying.
func (m *Member) lossGrace() time.Duration {
	l, _, _, _ := m.estimator.Estimate()
	return m.lag.Stretch(directory.LossGraceFor(directory.DefaultLossGrace, 2*l))
}

func (a *membersActor) stopShard(ctx actor.Context, j int) {
	pid := a.st.running[j]
	if pid == nil {
		return
	}
	delete(a.st.running, j)
	a.st.stopping[j] = true
	ctx.Watch(pid)
	ctx.Stop(pid)
}

// compareViews asks every live peer for its view (the handshake's reply
// carries it) and logs at warn a difference that lasts
// viewDisagreeAfter: members whose
// views disagree place shards differently, and a request routed by one
// view to a shard another view placed elsewhere waits for its deadline.
// Nothing else would say why.
func (a *membersActor) compareViews(ctx actor.Context) {
	st, m := a.st, a.m
	for id := range st.viewChecks {
		if !slices.Contains(st.lastLive, id) {
			delete(st.viewChecks, id)
		}
	}
	if st.view.SelfLeaving() {
		return // its view is meant to differ now
	}
	// Only with its neighbours in the binomial graph of the live members:
	// views that agree along a connected graph agree everywhere, and the
	// comparison costs O(log n) requests per member rather than n.
	compared := st.lastLive
	if o, err := revoke.NewOverlay(st.lastLive, m.id); err == nil {
		compared = o.Neighbors()
	}
	for id := range st.viewChecks {
		if !slices.Contains(compared, id) {
			delete(st.viewChecks, id)
		}
	}
	for _, id := range compared {
		if id == m.id {
			continue
		}
		vc := st.viewChecks[id]
		if vc == nil {
			vc = &viewCheck{}
			st.viewChecks[id] = vc
		}
		store := st.view.Store(id)
		if vc.inflight || store == nil {
			continue
		}
		vc.inflight = true
		// The view goes as a digest: a peer that agrees answers without
		// its view, so an idle comparison costs O(1) bytes per
		// neighbour, not O(n) (an older peer sends its view anyway).
		sent := st.lastLive
		// To the incarnation this member places shards on: another one at
		// its address does not have that actor.
		f := ctx.RequestFuture(memberPID(store.GetAddress(), RootOf(store), membersName),
			&messages.MemberHello{ProtocolVersion: m.cfg.version, Shards: int32(m.cfg.Shards), ToMemberId: id,
				ViewDigest: memberview.Digest(sent)}, time.Second)
		ctx.ReenterAfter(f, func(res any, err error) {
			vc.inflight = false
			r, ok := res.(*messages.MemberHelloReply)
			if err != nil || !ok || r.GetMemberId() != id {
				return // not answering: the failure path's business
			}
			mine, theirs := st.lastLive, r.GetView()
			if r.GetViewSame() {
				theirs = sent
			}
			missingHere, missingThere := viewDiff(mine, theirs)
			if len(missingHere) == 0 && len(missingThere) == 0 {
				if vc.warned {
					m.log.WithField("peer", id).Info("membership views agree again")
				}
				*vc = viewCheck{}
				return
			}
			diff := fmt.Sprint(missingHere, missingThere)
			if diff != vc.diff {
				vc.diff, vc.since, vc.warned = diff, time.Now(), false
			}
			if time.Since(vc.since) >= viewDisagreeAfter && !vc.warned {
				vc.warned = true
				m.log.WithFields(logrus.Fields{"peer": id, "view": mine, "peer_view": theirs,
					"missing_here": missingHere, "missing_there": missingThere}).Warn(
					"membership views disagree: this member and its peer place shards differently (check that both reach the same provider, or the same seeds)")
			}
		})
	}
}

// viewDiff compares two sorted views: the members only theirs has, and
// those only mine has.
func viewDiff(mine, theirs []string) (missingHere, missingThere []string) {
	for _, id := range theirs {
		if !slices.Contains(mine, id) {
			missingHere = append(missingHere, id)
		}
	}
	for _, id := range mine {
		if !slices.Contains(theirs, id) {
			missingThere = append(missingThere, id)
		}
	}
	return missingHere, missingThere
}

// sameStores says whether two lists of store nodes name the same nodes
// in the same order (the view lists them sorted).
func sameStores(a, b []*messages.NodeRef) bool {
	return slices.EqualFunc(a, b, func(x, y *messages.NodeRef) bool {
		return x.GetNodeId() == y.GetNodeId() && x.GetAddress() == y.GetAddress() && x.GetActorId() == y.GetActorId()
	})
}
