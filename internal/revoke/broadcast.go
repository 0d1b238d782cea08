package revoke

import (
	"hash/fnv"
	"slices"

	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/messages"
)

// ID identifies a notice for duplicate suppression: what it is about and
// which incarnation of it.
//
// The origin is deliberately not part of the identity. Several members
// often detect the same failure at about the same time and each
// originates a notice; keyed by (Subject, Epoch) those waves merge: a
// member that already holds the notice from one origin neither forwards
// nor delivers it again when another origin's copy arrives. This is the
// ULFM revoke's behaviour too (concurrent revokes of one communicator are
// one revocation). Epoch must therefore be something every detector agrees
// on — the failed member's incarnation or the topology epoch in which it
// was a member — not a detector-local counter; two detectors that disagree
// produce two waves and the notice is delivered twice, which delivery
// (idempotent cleanup) tolerates. For member failures it is
// IncarnationEpoch (FailureNotice fills it): the one incarnation number
// every detector already holds.
//
// Agreeing is not enough: the epoch must also tell incarnations apart.
// With a constant epoch the id is the subject's name alone, and a notice
// about one holder of a name (a late notice of another cluster whose
// members are named alike) suppresses, for as long as the window holds
// it, the notice about a later member of that name: the real failure is
// neither forwarded nor delivered here.
type ID struct {
	Subject string // the failed member, or the revoked object / scope
	Epoch   uint64 // incarnation of Subject this notice is about
}

// Notice is a failure / revocation notice. Its message size is constant
// (it never accumulates a path or a recipient list).
type Notice struct {
	Origin  string // the member that first learned of it (diagnostics only)
	Subject string
	Epoch   uint64
	// SubjectAddress is the failed member's actor system address as the
	// originator knew it: content, not identity (the first copy's wins).
	SubjectAddress string
}

// ID returns the notice's identity.
func (n Notice) ID() ID { return ID{Subject: n.Subject, Epoch: n.Epoch} }

// FailureNotice is the notice that member subject, listening at address
// (its actor system address), failed: Epoch is IncarnationEpoch(address).
// Every detector of a failure builds it from what it knows of the member,
// so concurrent detections still merge into one wave.
func FailureNotice(subject, address string) Notice {
	return Notice{Subject: subject, Epoch: IncarnationEpoch(address), SubjectAddress: address}
}

// IncarnationEpoch is the epoch of notices about the member incarnation
// that listens at address: a 64-bit FNV-1a hash of it, 0 for an unknown
// address (the epoch notices had before it was filled in).
//
// Why the address: a member id together with the address it listens at
// is the incarnation, and it is the only incarnation number every
// detector already agrees on. Topology numbers are counted by each member
// (detectors would disagree and the waves would not merge), and the id
// alone is not enough: embedded clusters name their members node-0,
// node-1, … in every process, so one name may belong to members of two
// clusters; they listen at different addresses. The membership view and
// the admission of notices tell members apart the same way (by id and
// address).
func IncarnationEpoch(address string) uint64 {
	if address == "" {
		return 0
	}
	h := fnv.New64a()
	_, _ = h.Write([]byte(address))
	return h.Sum64()
}

// Decision is what the shell must do after an event: the Box's Sends (the
// notice as a *messages.RevokeNotice, To a member name), then, if Deliver,
// deliver it locally (directory
// cleanup, transfer abort, coordinator repair, event published). Sending
// before delivering is the ULFM order: the wave keeps moving even if local
// delivery is slow or crashes the member. A send to a member that is dead
// simply fails; the shell drops it and does nothing else — reliability
// comes from the overlay's connectivity, not from retries.
type Decision struct {
	outbox.Box
	Deliver bool
}

// Default sizes of the Broadcaster's bounded memories.
const (
	DefaultWindow        = 4096
	DefaultReplayChanges = 2
)

// Option configures a Broadcaster.
type Option func(*Broadcaster)

// WithWindow sets how many notice ids are remembered for duplicate
// suppression (FIFO; default 4096; n < 1 means the default).
//
// Trade-off: memory is O(window) no matter how many notices pass. A copy
// of a notice that arrives after its id has been evicted (more than window
// newer notices were seen in between) is taken for a first copy: forwarded
// once more and delivered once more. Each eviction can cause at most one
// such extra round at this member, because re-accepting the id puts it
// back in the window, so the cost is bounded; delivery must be idempotent
// anyway (the same failure may also be reported under two epochs).
func WithWindow(n int) Option {
	return func(b *Broadcaster) {
		if n >= 1 {
			b.window = n
		}
	}
}

// WithReplayChanges sets over how many overlay changes (Reoverlay steps)
// a notice stays "recent" and is re-sent to neighbours the new overlay
// adds (default 2; 0 disables replay; negative means the default).
//
// Trade-off: larger values keep a notice's wave correct across more
// topology changes that overlap it, at the cost of more re-sends per
// change; 0 sends nothing on a change but a wave caught half on the old,
// half on the new overlay may then miss members the old overlay did not
// link to. Waves finish in O(log n) hops while topology changes come from
// the membership layer, so a notice rarely overlaps more than one change.
func WithReplayChanges(k int) Option {
	return func(b *Broadcaster) {
		if k >= 0 {
			b.replayChanges = k
		}
	}
}

type recentNotice struct {
	n    Notice
	left int // overlay changes for which it is still replayed
}

// Broadcaster is one member's state of the reliable broadcast: forward on
// first receipt to all neighbours, then deliver; ignore duplicates. It is
// a pure state machine; it is not safe for concurrent use (its actor owns
// it).
type Broadcaster struct {
	overlay *Overlay

	window int
	seen   map[ID]struct{}
	ring   []ID // FIFO of seen ids, len ≤ window
	head   int  // index of the oldest id once ring is full

	replayChanges int
	recent        []recentNotice // len ≤ window
}

// NewBroadcaster returns the broadcast state of overlay.Self() on overlay
// (which must not be nil).
func NewBroadcaster(overlay *Overlay, opts ...Option) *Broadcaster {
	b := &Broadcaster{
		overlay:       overlay,
		window:        DefaultWindow,
		replayChanges: DefaultReplayChanges,
	}
	for _, opt := range opts {
		opt(b)
	}
	b.seen = make(map[ID]struct{}, min(b.window, 64))
	return b
}

// Overlay returns the overlay in use.
func (b *Broadcaster) Overlay() *Overlay { return b.overlay }

// Seen reports whether id is in the duplicate-suppression window.
func (b *Broadcaster) Seen(id ID) bool {
	_, ok := b.seen[id]
	return ok
}

// Remembered returns how many ids the window holds (≤ its size).
func (b *Broadcaster) Remembered() int { return len(b.seen) }

// originate is called by the first member to learn of a failure (or to
// revoke): forward to all neighbours, deliver locally. If the notice is
// already known (another member's wave got here first), the member has
// already forwarded and delivered it and the decision is empty.
func (b *Broadcaster) originate(n Notice) Decision {
	if !b.remember(n) {
		return Decision{}
	}
	return Decision{Box: outbox.Box{Sends: b.sends(n, b.overlay.Neighbors())}, Deliver: true}
}

// receive handles a copy of n that arrived from member from. On the first
// copy: forward to all current neighbours except from, then deliver. A
// duplicate yields an empty decision.
//
// The ULFM note forwards "to all neighbours"; the sender is left out here
// because it cannot need the notice: it sent it only after receiving or
// originating it itself, so the copy would certainly be discarded as a
// duplicate. Leaving it out saves n-1 messages per wave and changes
// nothing else. from need not be a member of this overlay (it may be on a
// newer or older topology); then nobody is left out.
func (b *Broadcaster) receive(from string, n Notice) Decision {
	if !b.remember(n) {
		return Decision{}
	}
	fwd := make([]string, 0, len(b.overlay.nbrs))
	for _, id := range b.overlay.nbrs {
		if id != from {
			fwd = append(fwd, id)
		}
	}
	return Decision{Box: outbox.Box{Sends: b.sends(n, fwd)}, Deliver: true}
}

// setOverlay switches to a new topology's overlay (same self, e.g. from
// Overlay.WithMembers) and returns the re-sends that keep recent waves
// complete: every recent notice (see WithReplayChanges) goes to each
// neighbour of the new overlay that was not a neighbour of the old one.
//
// Invariant behind it: for every recent notice, every neighbour in the
// current overlay has been sent the notice by this member or sent it to
// this member. A first copy establishes it (forward to all but the sender);
// a change keeps it by covering the gained neighbours. So once every live
// member runs the same overlay, each holder of a notice has covered all
// its neighbours there, and the BMG's connectivity carries the notice to
// every live member. Notices seen under the old overlay remain
// deduplicated: the window is kept.
//
// An overlay with another self, or nil, is ignored (nothing changes); one
// with the same members is adopted but is not a change (no re-sends, no
// expiry of recent notices).
func (b *Broadcaster) setOverlay(o *Overlay) Decision {
	if o == nil || o.Self() != b.overlay.Self() {
		return Decision{}
	}
	if slices.Equal(o.members, b.overlay.members) {
		b.overlay = o // same topology: not a change
		return Decision{}
	}
	old := make(map[string]bool, len(b.overlay.nbrs))
	for _, id := range b.overlay.nbrs {
		old[id] = true
	}
	b.overlay = o
	var gained []string
	for _, id := range o.nbrs {
		if !old[id] {
			gained = append(gained, id)
		}
	}
	var sends []outbox.Send
	kept := b.recent[:0]
	for _, r := range b.recent {
		if r.left <= 0 {
			continue
		}
		sends = append(sends, b.sends(r.n, gained)...)
		r.left--
		if r.left > 0 {
			kept = append(kept, r)
		}
	}
	clear(b.recent[len(kept):])
	b.recent = kept
	return Decision{Box: outbox.Box{Sends: sends}}
}

// sends addresses one copy of n to each member of to. The copies share
// one message: it is never modified once built.
func (b *Broadcaster) sends(n Notice, to []string) []outbox.Send {
	if len(to) == 0 {
		return nil
	}
	msg := &messages.RevokeNotice{Origin: n.Origin, Subject: n.Subject, Epoch: n.Epoch,
		From: b.overlay.Self(), SubjectAddress: n.SubjectAddress}
	out := make([]outbox.Send, len(to))
	for i, m := range to {
		out[i] = outbox.Send{To: m, Msg: msg}
	}
	return out
}

// NoticeOf reads a notice back from its message.
func NoticeOf(m *messages.RevokeNotice) Notice {
	return Notice{Origin: m.GetOrigin(), Subject: m.GetSubject(), Epoch: m.GetEpoch(), SubjectAddress: m.GetSubjectAddress()}
}

// remember records n's id and reports whether it was new.
func (b *Broadcaster) remember(n Notice) bool {
	id := n.ID()
	if _, dup := b.seen[id]; dup {
		return false
	}
	if len(b.ring) < b.window {
		b.ring = append(b.ring, id)
	} else {
		delete(b.seen, b.ring[b.head])
		b.ring[b.head] = id
		b.head = (b.head + 1) % b.window
	}
	b.seen[id] = struct{}{}
	if b.replayChanges > 0 {
		if len(b.recent) >= b.window {
			b.recent = slices.Delete(b.recent, 0, 1)
		}
		b.recent = append(b.recent, recentNotice{n: n, left: b.replayChanges})
	}
	return true
}

// Window is how many notice ids the Broadcaster remembers.
func (b *Broadcaster) Window() int { return b.window }
