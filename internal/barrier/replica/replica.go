package replica

import (
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/internal/barrier/policy"
	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/messages"
)

// Ask is the To of a send whose receiver answers the manager (a
// controller's BarrierDecide) or must be known to have got it (an outcome
// to a participant: a dead letter comes back as Undelivered). The shell
// sends it with the manager as sender; a plain *actor.PID is a tell.
type Ask struct{ PID *actor.PID }

// Failure is a participant the manager could not serve.
type Failure struct {
	Label, Host, Reason string
}

// Failure reasons.
const (
	ReasonGone        = "participant gone before its release was delivered"
	ReasonHolderGone  = "semaphore holder failed"
	ReasonHolderTimed = "semaphore holder timed out"
)

// Effects is what one event asks the shell to do, in order: watch, send,
// report failures, then stop if Stop.
type Effects struct {
	// Box holds the sends (To an *actor.PID or an Ask), the
	// participants (*actor.PID) to watch, and the replica's one timer, a
	// Wake, which replaces the one pending.
	outbox.Box
	Failures []Failure
	// TookOver: this replica became the acting primary (Epoch is new).
	TookOver bool
	// SteppedDown: this replica was acting primary and heard a newer one.
	SteppedDown bool
	// Stop: the barrier closed; the manager should stop.
	Stop bool
	// Warnings for the shell's log.
	Warnings []string
}

func (e *Effects) send(to *actor.PID, m proto.Message) {
	if to != nil {
		e.Sends = append(e.Sends, outbox.Send{To: to, Msg: m})
	}
}

// Config configures one replica of one barrier.
type Config struct {
	Name    string
	Options *messages.BarrierOptions
	// Replicas are the barrier hosts of the replicas, in rank order;
	// Members the ids of the cluster members hosting them.
	Replicas []*actor.PID
	Members  []string
	// Rank is this replica's index in Replicas.
	Rank int
	// Controller runs the entry callback and hears of failures (nil: none;
	// consultations then take their default answer).
	Controller *actor.PID
	// Restarted: this replica lost its state (its actor restarted). It
	// starts as a backup of an unknown primary and asks for a sync.
	Restarted bool
	// Tree is the barrier's combining tree (nil: none), which every
	// replica hands out with the barrier's options.
	Tree *messages.BarrierTreeShape
}

type outcome uint8

const (
	outNone     outcome = iota // waiting
	outFired                   // FIRE sent
	outLate                    // LATE_FIRE sent
	outCatchUp                 // CATCH_UP sent
	outHolding                 // admitted into a semaphore's critical section
	outReleased                // left the critical section
	outTimedOut                // presumed failed while holding
	outRefused                 // cut by Close while waiting
)

type labelInfo struct {
	host  string
	reply *actor.PID
	// request is the Enter's request id: the participant repeats it
	// while it waits, and a repeat is answered, not refused.
	request uint64
	// released names the Release that committed (releaseMark): the
	// handle repeats a Release until answered, and its repeat is
	// answered, not refused.
	released string
	out      outcome
	reason   string // fire reason
	lost     bool   // its outcome came back undelivered (reported once)
}

type pendingOp struct {
	key       string
	kind      messages.BarrierOpKind // UNSPECIFIED: a status query
	label     string
	host      string
	from      *actor.PID
	requestID uint64
	heard     time.Time
}

// closeKey is the key of a client's close (there is one per barrier).
const closeKey = "c"

// closeWait is a close the acting primary applied and has not answered:
// the closer hears BarrierClosed only once every backup acknowledged it
// (BarrierCloseAck) or was declared failed (MemberDown), so that when
// Close returns no live replica answers the barrier open to a reader
// elsewhere; or, at deadline, with TIMEOUT.
type closeWait struct {
	from      *actor.PID
	requestID uint64
	waiting   []string
	acked     []bool // by rank; the primary's own is set
	deadline  time.Time
}

const (
	recentKeys   = 1024 // confirmed keys remembered by a backup
	extraPending = 64   // pending client operations beyond MaxParticipants
)

// Replica is the pure core of one barrier manager replica. It is not safe
// for concurrent use: one actor owns it.
type Replica struct {
	cfg      Config
	opts     policy.Options
	takeover time.Duration
	maxLog   int

	b      *policy.Barrier
	log    []*messages.BarrierOp
	seq    uint64 // ops applied, including compacted ones
	closed bool

	epoch   uint64
	primary int // acting primary's rank; -1 unknown

	labels    map[string]*labelInfo
	order     []string            // labels in entry order
	byPID     map[string][]string // participant -> its labels
	watched   map[string]bool     // participants watched
	toWatch   []*actor.PID        // newly seen participants, for the shell
	dead      map[string]bool     // participants known to have failed
	pctAsked  bool                // a consultation with percent met happened
	consultID uint64
	asked     map[uint64]bool // consultations awaiting an answer
	ctrlDown  bool
	overflow  bool
	fresh     bool // no client create answered yet
	synced    bool // holds a primary's state (false after a restart until a sync)
	// closing: the acting primary applied a client's close and waits for
	// its backups to acknowledge it before answering the closer.
	closing *closeWait
	// down: by rank, replicas whose member the cluster declared failed
	// (MemberDown). A close waits for no acknowledgement from them.
	down []bool

	// Backup state.
	pending     []*pendingOp
	pendingKeys map[string]bool
	nPendEnter  int
	recent      map[string]bool // confirmed or refused client keys
	recentFIFO  []string
	lastPrimary time.Time
	// armed is the Wake the replica asked for last (zero: none).
	armed time.Time
}

// New returns a replica, or a typed error for bad configuration.
func New(cfg Config, now time.Time) (*Replica, Effects, error) {
	var e Effects
	if err := CheckName(cfg.Name); err != nil {
		return nil, e, err
	}
	o, err := PolicyOptions(cfg.Options)
	if err != nil {
		return nil, e, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "barrier %q: %v", cfg.Name, err)
	}
	if len(cfg.Replicas) < 1 || len(cfg.Replicas) > MaxReplicas || cfg.Rank < 0 || cfg.Rank >= len(cfg.Replicas) {
		return nil, e, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "barrier %q: rank %d of %d replicas", cfg.Name, cfg.Rank, len(cfg.Replicas))
	}
	for _, p := range cfg.Replicas {
		if p == nil {
			return nil, e, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "barrier %q: unnamed replica", cfg.Name)
		}
	}
	b, err := policy.New(o)
	if err != nil {
		return nil, e, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "barrier %q: %v", cfg.Name, err)
	}
	r := &Replica{
		cfg: cfg, opts: o, takeover: TakeoverAfter(cfg.Options), b: b,
		maxLog: 8*o.MaxParticipants + 64, labels: map[string]*labelInfo{}, byPID: map[string][]string{},
		watched: map[string]bool{}, dead: map[string]bool{}, pendingKeys: map[string]bool{}, recent: map[string]bool{}, lastPrimary: now,
		fresh: !cfg.Restarted && cfg.Rank == 0, asked: map[uint64]bool{}, synced: !cfg.Restarted,
		down: make([]bool, len(cfg.Replicas)),
	}
	// A controller that fails cannot answer: consultations then take
	// their default answer.
	r.watch(cfg.Controller)
	r.flush(&e)
	if cfg.Restarted {
		// No primary until one syncs this replica; an only replica has
		// nobody to sync from, and leads nothing any more (its state is
		// gone: acting on an empty one would fire a fired barrier again).
		r.primary = -1
		for rank, p := range cfg.Replicas {
			if rank != cfg.Rank {
				e.send(p, &messages.BarrierSyncRequest{Name: cfg.Name, FromRank: int32(cfg.Rank)})
			}
		}
	}
	r.armWake(&e)
	return r, e, nil
}

// onCreateBackups asks the other replicas' hosts to create their replica
// (called once by a new primary).
func (r *Replica) onCreateBackups() (e Effects) {
	for rank, p := range r.cfg.Replicas {
		if rank != r.cfg.Rank {
			e.send(p, r.backupCreate(rank))
		}
	}
	return
}

// backupCreate asks the host of replica rank to create it; a host that
// has it already ignores the request.
func (r *Replica) backupCreate(rank int) *messages.BarrierCreate {
	return &messages.BarrierCreate{
		Name: r.cfg.Name, Options: r.cfg.Options, Replicas: peers(r.cfg.Replicas), ReplicaMembers: r.cfg.Members,
		Controller: Peer(r.cfg.Controller), Rank: int32(rank), FromPrimary: true, Tree: r.cfg.Tree,
	}
}

// Acting reports whether this replica acts as the primary.
func (r *Replica) Acting() bool { return r.primary == r.cfg.Rank }

// Epoch is the highest epoch this replica knows.
func (r *Replica) Epoch() uint64 { return r.epoch }

// Closed reports whether the barrier closed.
func (r *Replica) Closed() bool { return r.closed }

// Seq is the number of operations applied.
func (r *Replica) Seq() uint64 { return r.seq }

// LogLen is the length of the (compacted) log.
func (r *Replica) LogLen() int { return len(r.log) }

// Barrier is the replica's state machine (read-only use).
func (r *Replica) Barrier() *policy.Barrier { return r.b }

// Primary is the acting primary's rank as this replica knows it (-1:
// unknown).
func (r *Replica) Primary() int { return r.primary }

// Down reports whether the cluster declared the member of the replica at
// rank failed.
func (r *Replica) Down(rank int) bool { return rank >= 0 && rank < len(r.down) && r.down[rank] }

// onCreated answers BarrierCreate and BarrierOpen.
func (r *Replica) onCreated(m *messages.BarrierCreate, from *actor.PID) (e Effects) {
	reply := &messages.BarrierCreated{Name: r.cfg.Name, Options: r.cfg.Options, Replicas: peers(r.cfg.Replicas),
		ReplicaMembers: r.cfg.Members, Existed: true, Tree: r.cfg.Tree}
	// A backup learns of a close from the primary's op, which may arrive
	// after the closer's next Open: the primary answers the Close without
	// waiting for its backups. The closer's handle told this replica
	// itself, though, before it could hear the answer (one ordered
	// connection per pair of members), and a heard close always commits:
	// the primary applies it, or whoever takes over commits what it heard.
	// So a close this replica heard is answered as done.
	if r.closed || r.pendingKeys[closeKey] {
		reply = &messages.BarrierCreated{Name: r.cfg.Name, Error: messages.Errorf(messages.ErrorCode_DELETED, "barrier %q is closed", r.cfg.Name)}
	} else if m != nil && !m.GetFromPrimary() {
		if creator := PeerPID(m.GetController()); r.fresh || creator != nil && r.cfg.Controller != nil && creator.Equal(r.cfg.Controller) {
			// The first create, or its creator asking again (its answer
			// to the first may have been lost: barrier.New asks until it
			// hears one).
			reply.Existed, r.fresh = false, false
		} else if !proto.Equal(m.GetOptions(), r.cfg.Options) {
			reply.Error = messages.Errorf(messages.ErrorCode_CONFLICT, "barrier %q exists with other options", r.cfg.Name)
		}
	}
	if m == nil || !m.GetFromPrimary() {
		e.send(from, reply)
	}
	return
}

// ---- Client operations ----

// onEnter handles BARRIER_REACHED.
func (r *Replica) onEnter(now time.Time, m *messages.BarrierEnter, from *actor.PID) (e Effects) {
	defer r.flush(&e)
	if from == nil {
		return // nobody to answer
	}
	if err := CheckLabel(m.GetLabel(), m.GetHost()); err != nil {
		if r.Acting() {
			e.send(from, &messages.BarrierRefused{Name: r.cfg.Name, Label: m.GetLabel(), RequestId: m.GetRequestId(), Error: err})
		}
		return
	}
	p := &pendingOp{key: enterKey(m.GetLabel()), kind: messages.BarrierOpKind_BARRIER_OP_ENTER, label: m.GetLabel(),
		host: m.GetHost(), from: from, requestID: m.GetRequestId(), heard: now}
	if in := r.labels[p.label]; r.Acting() && in != nil && in.request != 0 && in.request == p.requestID &&
		in.reply != nil && in.reply.String() == from.String() {
		// The same participant asks again (it re-asks while it waits: a
		// release is one message and may be lost in transit). Its outcome
		// is repeated if there is one; otherwise it still waits.
		if in.out == outFired || in.out == outLate || in.out == outCatchUp {
			e.send(from, r.outcomeMsg(p.label, in))
		}
		return
	}
	if !r.Acting() {
		if !r.synced {
			// This replica lost the barrier's state and leads nothing
			// until an acting primary syncs it (shouldTakeOver), so it
			// says so instead of keeping quiet: when every replica says
			// so in one round, the state is gone (none holds it, and none
			// can get it back) and the participant's Enter fails at once
			// instead of at its deadline (handle.Participant.Refused). It
			// does not hear the Enter: one its caller was told failed
			// must not be committed later; a participant that waits asks
			// again every second anyway.
			e.send(from, &messages.BarrierRefused{Name: r.cfg.Name, Label: m.GetLabel(), RequestId: m.GetRequestId(),
				LostState: true, FromRank: int32(r.cfg.Rank),
				Error: messages.Errorf(messages.ErrorCode_UNAVAILABLE, "barrier %q: replica %d lost the barrier's state", r.cfg.Name, r.cfg.Rank)})
			return
		}
		if r.closed || r.labels[p.label] != nil || r.b.Entered()+r.nPendEnter >= r.opts.MaxParticipants {
			return // the primary knows it, or will refuse it
		}
		r.hear(p, &e)
		return
	}
	r.clientOp(now, p, &e)
	return
}

// onRelease handles SEMAPHORE_RELEASED.
func (r *Replica) onRelease(now time.Time, m *messages.BarrierRelease, from *actor.PID) (e Effects) {
	defer r.flush(&e)
	p := &pendingOp{key: releaseKey(m.GetLabel()), kind: messages.BarrierOpKind_BARRIER_OP_RELEASE, label: m.GetLabel(),
		from: from, requestID: m.GetRequestId(), heard: now}
	if !r.Acting() {
		if !r.synced {
			r.answerLost(p, &e)
			return
		}
		if in := r.labels[p.label]; in != nil && in.out == outHolding && !r.closed {
			r.hear(p, &e)
		}
		return
	}
	if in := r.labels[p.label]; in != nil && in.out == outReleased && from != nil && in.released == releaseMark(Peer(from), p.requestID) {
		// Asked again: this Release committed, and its answer was lost
		// or went out from a primary that died.
		e.send(from, &messages.BarrierReleased{Name: r.cfg.Name, Label: p.label, RequestId: p.requestID})
		return
	}
	r.clientOp(now, p, &e)
	return
}

// onClose handles BarrierClose.
func (r *Replica) onClose(now time.Time, m *messages.BarrierClose, from *actor.PID) (e Effects) {
	defer r.flush(&e)
	p := &pendingOp{key: closeKey, kind: messages.BarrierOpKind_BARRIER_OP_CLOSE, from: from, requestID: m.GetRequestId(), heard: now}
	if !r.Acting() {
		if !r.synced {
			r.answerLost(p, &e)
			return
		}
		if !r.closed {
			r.hear(p, &e)
		}
		return
	}
	r.clientOp(now, p, &e)
	return
}

// onStatus handles BarrierStatus (getHosts).
func (r *Replica) onStatus(now time.Time, m *messages.BarrierStatus, from *actor.PID) (e Effects) {
	defer r.flush(&e)
	if from == nil {
		return
	}
	p := &pendingOp{key: "s" + from.String() + "/" + strconv.FormatUint(m.GetRequestId(), 10), from: from, requestID: m.GetRequestId(), heard: now}
	if !r.Acting() {
		if !r.synced {
			r.answerLost(p, &e)
			return
		}
		r.hear(p, &e)
		return
	}
	r.clientOp(now, p, &e)
	return
}

// answerLost tells the caller of a Release, Close or Status that this
// replica holds none of the barrier's state (it restarted and no acting
// primary synced it), as Enter does: the handle fails the call at once
// when every replica says so, instead of at its deadline, and waits for
// the acting primary's answer otherwise. The operation is not heard: one
// its caller was told failed must not be committed later.
func (r *Replica) answerLost(p *pendingOp, e *Effects) {
	err := messages.Errorf(messages.ErrorCode_UNAVAILABLE, "barrier %q: replica %d lost the barrier's state", r.cfg.Name, r.cfg.Rank)
	rank := int32(r.cfg.Rank)
	switch p.kind {
	case messages.BarrierOpKind_BARRIER_OP_RELEASE:
		e.send(p.from, &messages.BarrierReleased{Name: r.cfg.Name, Label: p.label, RequestId: p.requestID, Error: err, LostState: true, FromRank: rank})
	case messages.BarrierOpKind_BARRIER_OP_CLOSE:
		e.send(p.from, &messages.BarrierClosed{Name: r.cfg.Name, RequestId: p.requestID, Error: err, LostState: true, FromRank: rank})
	default:
		e.send(p.from, &messages.BarrierStatusReply{Name: r.cfg.Name, RequestId: p.requestID, Error: err, LostState: true, FromRank: rank})
	}
}

// onDecide handles the controller's answer to a consultation.
func (r *Replica) onDecide(now time.Time, m *messages.BarrierDecide) (e Effects) {
	defer r.flush(&e)
	if !r.Acting() || r.closed || !r.asked[m.GetId()] {
		return // not an answer to a consultation of ours
	}
	delete(r.asked, m.GetId())
	kind := messages.BarrierOpKind_BARRIER_OP_VETO
	if m.GetFire() {
		kind = messages.BarrierOpKind_BARRIER_OP_FORCE_FIRE
	}
	r.commitEmit(now, &messages.BarrierOp{Kind: kind, AtUnixNano: now.UnixNano()}, &e)
	return
}

// onParticipantDown handles the termination of a participant (a watched
// sender of Enter) or of the controller.
func (r *Replica) onParticipantDown(now time.Time, pid *actor.PID) (e Effects) {
	defer r.flush(&e)
	if pid == nil {
		return
	}
	key := pid.String()
	if r.cfg.Controller != nil && key == r.cfg.Controller.String() {
		r.ctrlDown = true
	}
	if !r.watched[key] {
		return
	}
	r.dead[key] = true
	if !r.Acting() || r.closed {
		return
	}
	for _, l := range r.byPID[key] {
		in := r.labels[l]
		if in == nil || in.out != outHolding {
			continue
		}
		r.fail(l, in.host, ReasonHolderGone, &e)
		r.commitEmit(now, &messages.BarrierOp{Kind: messages.BarrierOpKind_BARRIER_OP_RELEASE, Label: l, AtUnixNano: now.UnixNano()}, &e)
	}
	return
}

// onTick handles the Wake armed at NextWake.
func (r *Replica) onTick(now time.Time) (e Effects) {
	defer r.flush(&e)
	if c := r.closing; c != nil && !now.Before(c.deadline) {
		r.answerClose(&e)
		return
	}
	if r.closed {
		return
	}
	if r.Acting() {
		r.tickIfDue(now, &e)
		return
	}
	if r.shouldTakeOver(now) {
		r.takeOver(now, &e)
	}
	return
}

// NextWake is when the replica next needs a Wake (zero: never); Step
// asks for it.
func (r *Replica) NextWake() time.Time {
	if r.closing != nil {
		return r.closing.deadline
	}
	if r.closed {
		return time.Time{}
	}
	if r.Acting() {
		return r.b.NextDeadline()
	}
	if !r.synced {
		// A replica that lost its state waits for a sync, not a time: it
		// must not take over (shouldTakeOver), so a wake-up at a pending
		// operation's takeover time would find nothing to do, and being
		// past, be armed again at once, forever.
		return time.Time{}
	}
	var t time.Time
	consider := func(x time.Time) {
		if !x.IsZero() && (t.IsZero() || x.Before(t)) {
			t = x
		}
	}
	wait := r.wait()
	if len(r.pending) > 0 {
		consider(r.pending[0].heard.Add(wait))
	}
	if d := r.b.NextDeadline(); !d.IsZero() && r.lastPrimary.Before(d) {
		consider(d.Add(wait))
	}
	return t
}

// ---- Replication ----

// onReplicate handles a message from another replica acting as primary.
// Replicas answer each other through their hosts, by rank.
func (r *Replica) onReplicate(now time.Time, m *messages.BarrierReplicate) (e Effects) {
	defer r.flush(&e)
	rank := int(m.GetFromRank())
	if rank < 0 || rank >= len(r.cfg.Replicas) || rank == r.cfg.Rank {
		return
	}
	from := r.cfg.Replicas[rank]
	switch compareClaims(m.GetEpoch(), rank, r.epoch, r.primary) {
	case -1: // a stale primary: tell it who leads now
		if r.Acting() {
			r.sendSync(from, &e)
		}
		return
	case 1:
		if r.Acting() {
			e.SteppedDown = true
		}
		r.epoch, r.primary = m.GetEpoch(), rank
		// A new primary gets a whole TakeoverAfter to confirm what
		// clients asked before it led.
		for _, p := range r.pending {
			p.heard = now
		}
	}
	r.lastPrimary = now
	switch {
	case m.GetSync():
		var before *snapshot
		if r.synced {
			before = r.snapshot()
		}
		r.synced = true
		if err := r.rebuild(m.GetLog(), m.GetSeq()); err != nil {
			e.Warnings = append(e.Warnings, fmt.Sprintf("barrier %q: replaying the primary's log: %v", r.cfg.Name, err))
		}
		if ops := r.lacking(before); len(ops) > 0 {
			e.send(from, &messages.BarrierHandover{Name: r.cfg.Name, Epoch: r.epoch, FromRank: int32(r.cfg.Rank), Ops: ops})
		}
	case m.GetOp() != nil:
		switch {
		case m.GetSeq() == r.seq+1 && r.synced,
			// A close ends the barrier whatever this backup missed: it
			// applies it at once instead of waiting for a sync (which an
			// overflowed primary no longer sends).
			m.GetOp().GetKind() == messages.BarrierOpKind_BARRIER_OP_CLOSE && !r.closed:
			op := m.GetOp()
			if _, _, err := r.apply(op); err != nil {
				e.Warnings = append(e.Warnings, fmt.Sprintf("barrier %q: op %d (%v) failed on a backup: %v; asking for a sync", r.cfg.Name, m.GetSeq(), op.GetKind(), err))
				e.send(from, &messages.BarrierSyncRequest{Name: r.cfg.Name, Epoch: r.epoch, FromRank: int32(r.cfg.Rank)})
			} else {
				r.appendLog(op, &e)
			}
		case m.GetSeq() > r.seq+1 || !r.synced:
			e.send(from, &messages.BarrierSyncRequest{Name: r.cfg.Name, Epoch: r.epoch, FromRank: int32(r.cfg.Rank)})
		}
	}
	if k := m.GetConfirmed(); k != "" {
		r.confirm(k)
	}
	r.prune()
	if r.closed {
		// The primary answers the closer only once every backup says
		// so. Acknowledged on every message while closed: an ack is
		// idempotent, and one lost is then sent again.
		e.send(from, &messages.BarrierCloseAck{Name: r.cfg.Name, Epoch: r.epoch, FromRank: int32(r.cfg.Rank)})
		e.Stop = true
	}
	return
}

// snapshot is what a replica's state had decided, kept across the
// adoption of another primary's state (see lacking).
type snapshot struct {
	labels map[string]labelInfo
	order  []string
	fired  bool
	closed bool
}

func (r *Replica) snapshot() *snapshot {
	s := &snapshot{labels: make(map[string]labelInfo, len(r.labels)), order: slices.Clone(r.order), closed: r.closed}
	for l, in := range r.labels {
		s.labels[l] = *in
	}
	s.fired, _ = r.b.Fired()
	return s
}

// lacking lists what before had applied that the state adopted since
// lacks, as ops for the new primary to apply (BarrierHandover): the entries
// it does not have (but not a semaphore's labels that left already: they
// need nothing more), the releases of labels it has holding, a fire it has
// not made, and a close. A false suspicion of the old primary (a backup
// took over while it was only slow) costs time, never an entry that a
// participant was told had passed.
func (r *Replica) lacking(before *snapshot) []*messages.BarrierOp {
	if before == nil {
		return nil
	}
	var ops []*messages.BarrierOp
	for _, l := range before.order {
		in := before.labels[l]
		left := in.out == outReleased || in.out == outTimedOut
		switch now := r.labels[l]; {
		case now == nil && !left:
			ops = append(ops, &messages.BarrierOp{Kind: messages.BarrierOpKind_BARRIER_OP_ENTER, Label: l, Host: in.host,
				Reply: Peer(in.reply), RequestId: in.request})
		case now != nil && left && now.out == outHolding:
			ops = append(ops, &messages.BarrierOp{Kind: messages.BarrierOpKind_BARRIER_OP_RELEASE, Label: l})
		}
	}
	if fired, _ := r.b.Fired(); before.fired && !fired && r.opts.Semaphore == nil {
		ops = append(ops, &messages.BarrierOp{Kind: messages.BarrierOpKind_BARRIER_OP_FORCE_FIRE})
	}
	if before.closed && !r.closed {
		ops = append(ops, &messages.BarrierOp{Kind: messages.BarrierOpKind_BARRIER_OP_CLOSE})
	}
	return ops
}

// onHandover handles what a replica that adopted this primary's state had
// applied and that state lacks (see lacking). The acting primary applies
// each op it still lacks as a client operation, at its own time; a replica
// that follows a primary of a higher epoch passes it on.
func (r *Replica) onHandover(now time.Time, m *messages.BarrierHandover) (e Effects) {
	defer r.flush(&e)
	if !r.Acting() {
		if r.primary >= 0 && r.primary != r.cfg.Rank && r.epoch > m.GetEpoch() {
			fwd := proto.CloneOf(m)
			fwd.Epoch, fwd.FromRank = r.epoch, int32(r.cfg.Rank)
			e.send(r.cfg.Replicas[r.primary], fwd)
		}
		return
	}
	for _, op := range m.GetOps() {
		if r.closed {
			return
		}
		l := op.GetLabel()
		switch op.GetKind() {
		case messages.BarrierOpKind_BARRIER_OP_ENTER:
			if r.labels[l] != nil || CheckLabel(l, op.GetHost()) != nil {
				continue
			}
			r.clientOp(now, &pendingOp{key: enterKey(l), kind: op.GetKind(), label: l, host: op.GetHost(),
				from: PeerPID(op.GetReply()), requestID: op.GetRequestId(), heard: now}, &e)
		case messages.BarrierOpKind_BARRIER_OP_RELEASE:
			if in := r.labels[l]; in != nil && in.out == outHolding {
				r.clientOp(now, &pendingOp{key: releaseKey(l), kind: op.GetKind(), label: l,
					from: PeerPID(op.GetReply()), requestID: op.GetRequestId(), heard: now}, &e)
			}
		case messages.BarrierOpKind_BARRIER_OP_FORCE_FIRE:
			if fired, _ := r.b.Fired(); !fired && r.opts.Semaphore == nil {
				r.commitEmit(now, &messages.BarrierOp{Kind: op.GetKind(), AtUnixNano: now.UnixNano()}, &e)
			}
		case messages.BarrierOpKind_BARRIER_OP_CLOSE:
			if r.closing == nil {
				r.clientOp(now, &pendingOp{key: closeKey, kind: op.GetKind(), heard: now}, &e)
			}
		}
	}
	return
}

// onCloseAck handles a backup's acknowledgement of the primary's close.
func (r *Replica) onCloseAck(m *messages.BarrierCloseAck) (e Effects) {
	c := r.closing
	rank := int(m.GetFromRank())
	if c == nil || m.GetEpoch() != r.epoch || rank < 0 || rank >= len(c.acked) {
		return
	}
	c.acked[rank] = true
	if r.closeSettled() {
		r.answerClose(&e)
	}
	return
}

// onMemberDown tells the replica that the cluster declared member, at
// address (its actor system's), failed: its failure notice was delivered
// and the member view accepted it. A replica it hosted never acknowledges
// a close: the acting primary's Close waits only for the others, so that
// a Close after a takeover succeeds once every live replica applied it
// instead of timing out on the dead old primary. A member the cluster
// declared failed is out for good (it is expelled when it hears the
// notice about itself, and a restart is a new member id), so it answers
// nobody open afterwards. A replica counts as down only if both its
// member id and its host's address match: a notice about another
// incarnation of the name settles nothing.
func (r *Replica) onMemberDown(member, address string) (e Effects) {
	for rank, m := range r.cfg.Members {
		if m == member && rank != r.cfg.Rank && rank < len(r.down) && r.cfg.Replicas[rank].GetAddress() == address {
			r.down[rank] = true
		}
	}
	if r.closing != nil && r.closeSettled() {
		r.answerClose(&e)
	}
	return
}

// closeSettled: every replica acknowledged the close, or failed.
func (r *Replica) closeSettled() bool {
	for rank, ok := range r.closing.acked {
		if !ok && !r.down[rank] {
			return false
		}
	}
	return true
}

// answerClose answers the closer (with TIMEOUT naming the backups that
// did not acknowledge, if any) and stops the replica.
func (r *Replica) answerClose(e *Effects) {
	c := r.closing
	r.closing = nil
	reply := &messages.BarrierClosed{Name: r.cfg.Name, RequestId: c.requestID, Waiting: c.waiting}
	var missing []string
	for rank, ok := range c.acked {
		if !ok && !r.down[rank] {
			who := r.cfg.Replicas[rank].String()
			if rank < len(r.cfg.Members) {
				who = r.cfg.Members[rank]
			}
			missing = append(missing, who)
		}
	}
	if len(missing) > 0 {
		// The barrier is closed (this replica applied it, and a backup
		// that took over would commit the close its closer also sent
		// it), but those replicas may answer it open for a while.
		reply.Error = messages.Errorf(messages.ErrorCode_TIMEOUT,
			"barrier %q closed, but replicas %v did not acknowledge within %v: they may answer it open until they hear the close",
			r.cfg.Name, missing, r.takeover)
	}
	e.send(c.from, reply)
	e.Stop = true
}

// onSyncRequest handles a replica that missed operations.
func (r *Replica) onSyncRequest(m *messages.BarrierSyncRequest) (e Effects) {
	if rank := int(m.GetFromRank()); r.Acting() && rank >= 0 && rank < len(r.cfg.Replicas) && rank != r.cfg.Rank {
		r.sendSync(r.cfg.Replicas[rank], &e)
	}
	return
}

// compareClaims orders two (epoch, primary rank) claims: a higher epoch
// wins, then a lower rank; an unknown primary (-1) loses.
func compareClaims(e1 uint64, p1 int, e2 uint64, p2 int) int {
	switch {
	case e1 > e2:
		return 1
	case e1 < e2:
		return -1
	case p1 == p2:
		return 0
	case p2 < 0 || (p1 >= 0 && p1 < p2):
		return 1
	}
	return -1
}

// wait is how long this backup waits before taking over: TakeoverAfter
// times its distance after the primary in the rank order.
func (r *Replica) wait() time.Duration {
	k := len(r.cfg.Replicas)
	order := k
	if r.primary >= 0 {
		order = (r.cfg.Rank - r.primary + k) % k
	}
	return r.takeover * time.Duration(max(order, 1))
}

func (r *Replica) shouldTakeOver(now time.Time) bool {
	if !r.synced {
		return false // a replica that lost its state must not lead
	}
	wait := r.wait()
	if len(r.pending) > 0 && !now.Before(r.pending[0].heard.Add(wait)) {
		return true // clients, but no primary
	}
	d := r.b.NextDeadline()
	return !d.IsZero() && r.lastPrimary.Before(d) && !now.Before(d.Add(wait))
}

func (r *Replica) takeOver(now time.Time, e *Effects) {
	r.epoch++
	r.primary = r.cfg.Rank
	e.TookOver = true
	for rank, p := range r.cfg.Replicas {
		if rank != r.cfg.Rank {
			// The old primary may have died before its own request to
			// create this backup left: a host without the replica drops
			// the sync, and a close would wait for its ack in vain. The
			// create goes first on the same ordered connection.
			if rank != 0 && !r.down[rank] {
				e.send(p, r.backupCreate(rank))
			}
			r.sendSync(p, e)
		}
	}
	// Outcomes the old primary decided may not have reached everyone:
	// send them again (participants ignore duplicates).
	for _, l := range r.order {
		in := r.labels[l]
		if in.out == outNone || in.out == outReleased || in.out == outTimedOut || in.out == outRefused {
			continue
		}
		if in.reply != nil && !r.dead[in.reply.String()] {
			e.send(in.reply, r.outcomeMsg(l, in))
		}
	}
	// Then what clients asked and the old primary never confirmed.
	pend := r.pending
	r.pending, r.pendingKeys, r.nPendEnter = nil, map[string]bool{}, 0
	for _, p := range pend {
		r.clientOp(now, p, e)
	}
	r.tickIfDue(now, e)
}

// hear records a client operation heard by a backup.
func (r *Replica) hear(p *pendingOp, e *Effects) {
	if r.pendingKeys[p.key] || r.recent[p.key] {
		return
	}
	if len(r.pending) >= r.opts.MaxParticipants+extraPending && !r.makeRoom(p) {
		return
	}
	r.pending = append(r.pending, p)
	r.pendingKeys[p.key] = true
	if p.kind == messages.BarrierOpKind_BARRIER_OP_ENTER {
		r.nPendEnter++
		r.watch(p.from)
	}
}

// makeRoom frees a place for p in a full pending list, or reports that
// p is to be dropped. A backup that takes over commits only what it
// heard, in the order heard, so losing an Enter, a Release or a Close
// can change an outcome: were a Close to replace the newest op, that op
// could be the Enter that fired the barrier, and the takeover would then
// refuse every label instead of releasing them. Status queries change
// nothing, and their callers wait with a deadline: they are what a full
// list sheds, the oldest first, and a query that finds the list full is
// not kept. A refusal sent to the client instead would not do: only the
// acting primary answers, and the first answer a handle gets is the one
// its caller sees.
//
// The list always has a query to shed: Enters are heard only while the
// entered and pending ones stay within MaxParticipants, a Release only
// for a label that entered, and there is one close key, so operations
// fill at most MaxParticipants+1 of MaxParticipants+extraPending places.
func (r *Replica) makeRoom(p *pendingOp) bool {
	if p.kind == messages.BarrierOpKind_BARRIER_OP_UNSPECIFIED {
		return false
	}
	i := slices.IndexFunc(r.pending, func(q *pendingOp) bool { return q.kind == messages.BarrierOpKind_BARRIER_OP_UNSPECIFIED })
	if i < 0 {
		// Not reachable (see above); a close is still kept, one past the
		// bound, as it ends the barrier.
		return p.kind == messages.BarrierOpKind_BARRIER_OP_CLOSE
	}
	shed := r.pending[i]
	r.unhear(i)
	if i == 0 && len(r.pending) > 0 && shed.heard.Before(r.pending[0].heard) {
		// The takeover time counts from the oldest client message the
		// primary left unconfirmed, shed or not.
		r.pending[0].heard = shed.heard
	}
	return true
}

// unhear drops the pending operation at i.
func (r *Replica) unhear(i int) {
	p := r.pending[i]
	delete(r.pendingKeys, p.key)
	if p.kind == messages.BarrierOpKind_BARRIER_OP_ENTER {
		r.nPendEnter--
	}
	r.pending = slices.Delete(r.pending, i, i+1)
}

// prune drops pending operations the primary's state confirms.
func (r *Replica) prune() {
	kept := r.pending[:0]
	for _, p := range r.pending {
		done := r.recent[p.key]
		switch p.kind {
		case messages.BarrierOpKind_BARRIER_OP_ENTER:
			done = done || r.labels[p.label] != nil
		case messages.BarrierOpKind_BARRIER_OP_RELEASE:
			done = done || r.labels[p.label] == nil || r.labels[p.label].out != outHolding
		case messages.BarrierOpKind_BARRIER_OP_CLOSE:
			done = done || r.closed
		}
		if done {
			delete(r.pendingKeys, p.key)
			if p.kind == messages.BarrierOpKind_BARRIER_OP_ENTER {
				r.nPendEnter--
			}
			continue
		}
		kept = append(kept, p)
	}
	clear(r.pending[len(kept):])
	r.pending = kept
}

// confirm remembers a client key the primary handled without an op.
func (r *Replica) confirm(k string) {
	if r.recent[k] {
		return
	}
	if len(r.recentFIFO) >= recentKeys {
		delete(r.recent, r.recentFIFO[0])
		r.recentFIFO = r.recentFIFO[1:]
	}
	r.recent[k] = true
	r.recentFIFO = append(r.recentFIFO, k)
}

func (r *Replica) sendSync(to *actor.PID, e *Effects) {
	if r.overflow {
		return
	}
	e.send(to, &messages.BarrierReplicate{Name: r.cfg.Name, Epoch: r.epoch, FromRank: int32(r.cfg.Rank),
		Seq: r.seq, Sync: true, Log: slices.Clone(r.log)})
}

// keepalive tells the backups that the primary handled a client message
// that left no op (a refusal, a query).
func (r *Replica) keepalive(key string, e *Effects) {
	for rank, p := range r.cfg.Replicas {
		if rank != r.cfg.Rank {
			e.send(p, &messages.BarrierReplicate{Name: r.cfg.Name, Epoch: r.epoch, FromRank: int32(r.cfg.Rank), Seq: r.seq, Confirmed: key})
		}
	}
}

// rebuild replaces the state by replaying a primary's log.
func (r *Replica) rebuild(log []*messages.BarrierOp, seq uint64) error {
	b, err := policy.New(r.opts)
	if err != nil {
		return err
	}
	r.b, r.closed, r.pctAsked = b, false, false
	r.labels, r.order, r.byPID = map[string]*labelInfo{}, nil, map[string][]string{}
	r.log, r.seq = nil, 0
	var first error
	for _, op := range log {
		if _, _, err := r.apply(op); err != nil && first == nil {
			first = err
		}
		r.log = append(r.log, op)
	}
	r.seq = seq
	return first
}

// ---- Primary ----

// clientOp applies a client operation on the acting primary and answers.
func (r *Replica) clientOp(now time.Time, p *pendingOp, e *Effects) {
	name := r.cfg.Name
	if p.kind == messages.BarrierOpKind_BARRIER_OP_UNSPECIFIED { // status query
		st := &messages.BarrierStatusReply{Name: name, RequestId: p.requestID, Entered: int32(r.b.Entered()), Epoch: r.epoch, FromRank: int32(r.cfg.Rank)}
		if r.cfg.Rank < len(r.cfg.Members) {
			st.Primary = r.cfg.Members[r.cfg.Rank]
		}
		fired, reason := r.b.Fired()
		st.Fired, st.Reason = fired, reason.String()
		for _, ps := range r.b.Passed() {
			st.Passed = append(st.Passed, &messages.BarrierPassage{Label: ps.Label, Host: ps.Host, Late: ps.Late, AtUnixNano: ps.At.UnixNano()})
		}
		e.send(p.from, st)
		r.keepalive(p.key, e)
		return
	}
	op := &messages.BarrierOp{Kind: p.kind, Label: p.label, Host: p.host, AtUnixNano: now.UnixNano()}
	if p.kind == messages.BarrierOpKind_BARRIER_OP_ENTER || p.kind == messages.BarrierOpKind_BARRIER_OP_RELEASE {
		op.Reply, op.RequestId = Peer(p.from), p.requestID
	}
	d, waiting, err := r.commit(op, e)
	if err != nil {
		me := policyError(err, name, p.label)
		if p.kind == messages.BarrierOpKind_BARRIER_OP_RELEASE {
			if in := r.labels[p.label]; in != nil && in.out == outTimedOut {
				me = messages.Errorf(messages.ErrorCode_TIMEOUT, "label %q held semaphore %q too long and was timed out", p.label, name)
			}
		}
		switch p.kind {
		case messages.BarrierOpKind_BARRIER_OP_ENTER:
			e.send(p.from, &messages.BarrierRefused{Name: name, Label: p.label, RequestId: p.requestID, Error: me})
		case messages.BarrierOpKind_BARRIER_OP_RELEASE:
			e.send(p.from, &messages.BarrierReleased{Name: name, Label: p.label, RequestId: p.requestID, Error: me, FromRank: int32(r.cfg.Rank)})
		case messages.BarrierOpKind_BARRIER_OP_CLOSE:
			e.send(p.from, &messages.BarrierClosed{Name: name, RequestId: p.requestID, Error: me, FromRank: int32(r.cfg.Rank)})
		}
		r.keepalive(p.key, e)
		return
	}
	switch p.kind {
	case messages.BarrierOpKind_BARRIER_OP_RELEASE:
		e.send(p.from, &messages.BarrierReleased{Name: name, Label: p.label, RequestId: p.requestID})
	case messages.BarrierOpKind_BARRIER_OP_CLOSE:
		for _, l := range waiting {
			if in := r.labels[l]; in != nil {
				e.send(in.reply, &messages.BarrierRefused{Name: name, Label: l,
					Error: messages.Errorf(messages.ErrorCode_DELETED, "barrier %q closed while %q waited", name, l)})
			}
		}
		// The closer hears the answer once every backup applied the
		// close (CloseAck), or at the deadline: a backup that takes
		// longer than a takeover is presumed unreachable.
		r.closing = &closeWait{from: p.from, requestID: p.requestID, waiting: waiting,
			acked: make([]bool, len(r.cfg.Replicas)), deadline: now.Add(r.takeover)}
		r.closing.acked[r.cfg.Rank] = true
		if r.closeSettled() {
			r.answerClose(e)
		}
		return
	}
	r.emit(now, d, e)
}

func (r *Replica) tickIfDue(now time.Time, e *Effects) {
	if next := r.b.NextDeadline(); r.closed || next.IsZero() || now.Before(next) {
		return
	}
	r.commitEmit(now, &messages.BarrierOp{Kind: messages.BarrierOpKind_BARRIER_OP_TICK, AtUnixNano: now.UnixNano()}, e)
}

func (r *Replica) commitEmit(now time.Time, op *messages.BarrierOp, e *Effects) {
	if d, _, err := r.commit(op, e); err == nil {
		r.emit(now, d, e)
	}
}

// commit applies op, logs it and forwards it to the backups.
func (r *Replica) commit(op *messages.BarrierOp, e *Effects) (policy.Decision, []string, error) {
	pct := r.pctAsked
	d, waiting, err := r.apply(op)
	if err != nil {
		return d, nil, err
	}
	switch op.GetKind() {
	case messages.BarrierOpKind_BARRIER_OP_TICK, messages.BarrierOpKind_BARRIER_OP_VETO:
		op.Quiet = quiet(d) && pct == r.pctAsked
	}
	r.appendLog(op, e)
	// A close is forwarded even after the log overflowed: the backups
	// must hear it (they apply it whatever they missed) and acknowledge.
	if !r.overflow || op.GetKind() == messages.BarrierOpKind_BARRIER_OP_CLOSE {
		for rank, p := range r.cfg.Replicas {
			if rank != r.cfg.Rank {
				e.send(p, &messages.BarrierReplicate{Name: r.cfg.Name, Epoch: r.epoch, FromRank: int32(r.cfg.Rank), Seq: r.seq, Op: op})
			}
		}
	}
	return d, waiting, nil
}

// quiet: the decision shows nothing a later tick or veto would not redo.
func quiet(d policy.Decision) bool {
	return !d.Fired && len(d.Release) == 0 && len(d.LateFire) == 0 && len(d.CatchUp) == 0 &&
		len(d.TimedOut) == 0 && len(d.Knees) == 0 && (d.Consult == nil || d.Consult.Knee == nil)
}

// appendLog appends op. Of a run of quiet ops only the last two are kept:
// a quiet tick or veto only moves the time of the last consultation, which
// the later ones of the run set again.
func (r *Replica) appendLog(op *messages.BarrierOp, e *Effects) {
	r.seq++
	if r.overflow {
		return
	}
	if n := len(r.log); op.GetQuiet() && n >= 2 && r.log[n-1].GetQuiet() && r.log[n-2].GetQuiet() {
		r.log[n-2], r.log[n-1] = r.log[n-1], op
		return
	}
	if len(r.log) >= r.maxLog {
		r.overflow = true
		e.Warnings = append(e.Warnings, fmt.Sprintf("barrier %q: replication log reached %d ops; replication stops", r.cfg.Name, r.maxLog))
		return
	}
	r.log = append(r.log, op)
}

// apply runs op on the state machine and records the outcomes. The
// policy's timer in d is not carried: the replica's one Wake (NextWake)
// covers the policy's next deadline.
func (r *Replica) apply(op *messages.BarrierOp) (policy.Decision, []string, error) {
	at := time.Unix(0, op.GetAtUnixNano())
	var d policy.Decision
	switch op.GetKind() {
	case messages.BarrierOpKind_BARRIER_OP_ENTER:
		if d = r.b.Step(at, policy.Enter{Label: op.GetLabel(), Host: op.GetHost()}); d.Err == nil {
			reply := PeerPID(op.GetReply())
			r.labels[op.GetLabel()] = &labelInfo{host: op.GetHost(), reply: reply, request: op.GetRequestId()}
			r.order = append(r.order, op.GetLabel())
			if reply != nil {
				k := reply.String()
				r.byPID[k] = append(r.byPID[k], op.GetLabel())
				r.watch(reply)
			}
		}
	case messages.BarrierOpKind_BARRIER_OP_RELEASE:
		if d = r.b.Step(at, policy.Release{Label: op.GetLabel()}); d.Err == nil {
			in := r.labels[op.GetLabel()]
			in.out, in.released = outReleased, releaseMark(op.GetReply(), op.GetRequestId())
		}
	case messages.BarrierOpKind_BARRIER_OP_TICK:
		d = r.b.Step(at, policy.Tick{})
	case messages.BarrierOpKind_BARRIER_OP_FORCE_FIRE:
		d = r.b.Step(at, policy.ForceFire{})
	case messages.BarrierOpKind_BARRIER_OP_VETO:
		d = r.b.Step(at, policy.Veto{})
	case messages.BarrierOpKind_BARRIER_OP_CLOSE:
		if r.closed {
			return d, nil, policy.ErrClosed
		}
		waiting := r.b.Close()
		r.closed = true
		for _, l := range waiting {
			r.labels[l].out = outRefused
		}
		return d, waiting, nil
	default:
		return d, nil, fmt.Errorf("unknown op %v", op.GetKind())
	}
	if d.Err != nil {
		return d, nil, d.Err
	}
	_, reason := r.b.Fired()
	for _, l := range d.Release {
		if r.opts.Semaphore != nil {
			r.labels[l].out, r.labels[l].reason = outHolding, "semaphore"
		} else {
			r.labels[l].out, r.labels[l].reason = outFired, reason.String()
		}
	}
	for _, l := range d.LateFire {
		r.labels[l].out = outLate
	}
	for _, l := range d.CatchUp {
		r.labels[l].out = outCatchUp
	}
	for _, l := range d.TimedOut {
		r.labels[l].out = outTimedOut
	}
	if c := d.Consult; c != nil && c.Default && c.Reason == policy.FirePercent {
		r.pctAsked = true
	}
	return d, nil, nil
}

// emit turns a decision of the acting primary into messages.
func (r *Replica) emit(now time.Time, d policy.Decision, e *Effects) {
	var gone []string // admitted semaphore holders that already failed
	deliver := func(l string) {
		in := r.labels[l]
		if in.reply == nil || r.dead[in.reply.String()] {
			r.fail(l, in.host, ReasonGone, e)
			if in.out == outHolding {
				gone = append(gone, l)
			}
			return
		}
		// A request, so a participant that is gone answers with a dead
		// letter (Undelivered) even when its Terminated is slower than
		// the fire, as a watch across actor systems can be.
		e.Sends = append(e.Sends, outbox.Send{To: Ask{in.reply}, Msg: r.outcomeMsg(l, in)})
	}
	for _, l := range d.Release {
		deliver(l)
	}
	for _, l := range d.LateFire {
		deliver(l)
	}
	for _, l := range d.CatchUp {
		deliver(l)
	}
	for _, l := range d.TimedOut {
		in := r.labels[l]
		e.send(in.reply, &messages.BarrierTimedOut{Name: r.cfg.Name, Label: l})
		r.fail(l, in.host, ReasonHolderTimed, e)
	}
	if c := d.Consult; c != nil {
		r.consult(now, c, e)
	}
	for _, l := range gone {
		r.commitEmit(now, &messages.BarrierOp{Kind: messages.BarrierOpKind_BARRIER_OP_RELEASE, Label: l, AtUnixNano: now.UnixNano()}, e)
	}
}

func (r *Replica) consult(now time.Time, c *policy.Consultation, e *Effects) {
	if r.cfg.Controller == nil || r.ctrlDown {
		// No callback can answer: the default does.
		kind := messages.BarrierOpKind_BARRIER_OP_VETO
		if c.Default {
			kind = messages.BarrierOpKind_BARRIER_OP_FORCE_FIRE
		}
		r.commitEmit(now, &messages.BarrierOp{Kind: kind, AtUnixNano: now.UnixNano()}, e)
		return
	}
	r.consultID++
	if len(r.asked) >= r.opts.MaxParticipants+extraPending {
		oldest := r.consultID
		for id := range r.asked {
			oldest = min(oldest, id)
		}
		delete(r.asked, oldest) // an answer that never came
	}
	r.asked[r.consultID] = true
	m := &messages.BarrierConsult{Name: r.cfg.Name, Id: r.consultID, Label: c.Label, Host: c.Host,
		DefaultFire: c.Default, Reason: c.Reason.String(), Entered: int32(r.b.Entered())}
	if c.Knee != nil {
		m.Knee, m.KneeArrivals = true, int32(c.Knee.Arrivals)
	}
	e.Sends = append(e.Sends, outbox.Send{To: Ask{r.cfg.Controller}, Msg: m})
}

// fail reports a participant the manager could not serve: to the shell
// (an event) and to the controller.
func (r *Replica) fail(label, host, reason string, e *Effects) {
	e.Failures = append(e.Failures, Failure{Label: label, Host: host, Reason: reason})
	if r.cfg.Controller != nil && !r.ctrlDown {
		e.send(r.cfg.Controller, &messages.BarrierFailure{Name: r.cfg.Name, Label: label, Host: host, Reason: reason})
	}
}

func (r *Replica) outcomeMsg(l string, in *labelInfo) proto.Message {
	switch in.out {
	case outLate:
		return &messages.BarrierLateFire{Name: r.cfg.Name, Label: l}
	case outCatchUp:
		return &messages.BarrierCatchUp{Name: r.cfg.Name, Label: l}
	}
	return &messages.BarrierFired{Name: r.cfg.Name, Label: l, Reason: in.reason, Epoch: r.epoch}
}

// Undelivered: an outcome sent to target came back as a dead letter.
// The participant is gone: its labels that were released but not told
// are reported failed (once each), and it counts as down.
func (r *Replica) onUndelivered(now time.Time, target *actor.PID) Effects {
	if target == nil || !r.watched[target.String()] {
		return Effects{} // a replica or the controller: their own paths
	}
	e := r.onParticipantDown(now, target) // a holder's slot comes back
	if !r.Acting() || r.closed {
		return e
	}
	for _, l := range r.byPID[target.String()] {
		in := r.labels[l]
		if in == nil || in.lost || (in.out != outFired && in.out != outLate && in.out != outCatchUp) {
			continue
		}
		in.lost = true
		r.fail(l, in.host, ReasonGone, &e)
	}
	return e
}

// watch makes the shell watch a participant (once).
func (r *Replica) watch(pid *actor.PID) {
	if pid == nil {
		return
	}
	if k := pid.String(); !r.watched[k] {
		r.watched[k] = true
		r.toWatch = append(r.toWatch, pid)
	}
}

// flush hands newly seen participants to the shell.
func (r *Replica) flush(e *Effects) {
	for _, pid := range r.toWatch {
		e.WatchFor(pid)
	}
	r.toWatch = r.toWatch[:0]
}

func enterKey(label string) string   { return "e" + label }
func releaseKey(label string) string { return "r" + label }

// releaseMark names the Release request id of the participant p ("" for
// the manager's own release of a holder that failed).
func releaseMark(p *messages.BarrierPeer, id uint64) string {
	if p.GetId() == "" {
		return ""
	}
	return p.GetAddress() + "/" + p.GetId() + "#" + strconv.FormatUint(id, 10)
}

func peers(pids []*actor.PID) []*messages.BarrierPeer {
	out := make([]*messages.BarrierPeer, len(pids))
	for i, p := range pids {
		out[i] = Peer(p)
	}
	return out
}
