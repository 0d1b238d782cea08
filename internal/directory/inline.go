package directory

import (
	"time"

	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/messages"
)

// An inline object (under TableConfig.InlineLimit) lives in its shard,
// and the shard answers a Locate of it with its bytes: no stream, no
// sender. Every such answer leaves through the one uplink of the shard's
// host, though, so N receivers at once wait for N·S/B there, where a
// streamed object relays from copy to copy (the simulator: 63 KiB to
// 1,023 receivers took 1.375 s, 64 KiB streamed 0.231 s). The shard
// therefore keeps an estimate of the bytes its answers of each inline
// object still have queued on that uplink, and answers with the bytes
// only while the queue is short (AnswerWithBytes); past that it answers
// as for a streamed object, with a copy that already holds the object
// (a receiver that got the bytes, or the creator), chosen and claimed as
// pickSender chooses, so that the object relays from copy to copy. The
// bytes are still the answer whenever no copy can serve (every holder
// died, or is busy), to a receiver whose sender failed, and to a receiver whose
// sender a policy chooses (TableConfig.Senders), so an inline Get never depends on a copy more than once.

// InlineQueueCopies is how many answers' bytes of one object the shard
// lets queue on its uplink at once, whatever their size: a receiver
// answered with the bytes behind k others waits k·S/B; one answered with
// a holder waits a Locate's answer, a stream's open and S/B on the
// holder's link, and the receivers after it form chains behind the
// holders. Up to 8 receivers at once are served by the shard alone (the
// testbed's broadcasts to 7 among them): at 4, relays won at 63 KiB but
// lost at 32 KiB, whose copies the testbed's shaper lets through several
// at once (docs/benchmarks.md). From tens of receivers on the relays win
// by far (docs/simulator.md).
const InlineQueueCopies = 8

// InlineQueueTime is how long the queue may always take to send, however
// many copies that is: an object of a few KiB or less costs the shard
// more in processing each Locate than in its bytes, and a relay would
// add a FetchDone to that processing for nothing. At the testbed's
// 400 Mbit/s it is 48 KB (47 copies of 1 KiB); at 10 Gbit/s, 1.25 MB.
// (With a shard that takes 2 µs a message, the simulator's 1 KiB
// broadcast to 63 took 1.8 ms without it, 0.81 ms with it, as the shard
// alone.)
const InlineQueueTime = time.Millisecond

// DefaultInlineUplink is the shard host's uplink, in payload bytes per
// second, assumed when TableConfig.InlineUplink is not set: 10 Gbit/s.
// Assuming it faster than it is errs towards answering with the bytes.
const DefaultInlineUplink = 1.25e9

// InlineQueueBudget is how many bytes of one object's inline answers the
// shard's uplink (uplink bytes per second) may hold queued: the larger of
// InlineQueueCopies copies of it and InlineQueueTime at the uplink.
func InlineQueueBudget(size int64, uplink float64) float64 {
	return max(InlineQueueCopies*float64(size), InlineQueueTime.Seconds()*uplink)
}

// CheapOnTheUplink reports whether an inline object of size bytes costs
// the shard's uplink (uplink bytes per second) less than its processing
// of the Locates: InlineQueueCopies copies of it fit in InlineQueueTime.
// Only such an object is published for Locates answered without the
// table (InlinePublisher): a larger one is relayed from copy to copy past
// the budget, and only receivers that keep a copy can relay it.
func CheapOnTheUplink(size int64, uplink float64) bool {
	return float64(size)*InlineQueueCopies <= InlineQueueTime.Seconds()*uplink
}

// AnswerWithBytes reports whether the shard answers a Locate of an inline
// object of size bytes with the bytes, queued bytes of its earlier
// answers still leaving an uplink of uplink bytes per second: while the
// queue, this answer's bytes included, stays within InlineQueueBudget.
func AnswerWithBytes(queued float64, size int64, uplink float64) bool {
	return queued+float64(size) <= InlineQueueBudget(size, uplink)
}

// InlineQueued is what is left at now of queued bytes that an uplink of
// uplink bytes per second was sending at since: the queue drains at the
// link's rate.
func InlineQueued(queued float64, since, now time.Time, uplink float64) float64 {
	if el := now.Sub(since); el > 0 {
		queued -= el.Seconds() * uplink
	}
	return max(queued, 0)
}

// inlineQueue is an entry's estimate of its inline answers' bytes still
// on the shard's uplink: queued as of at.
type inlineQueue struct {
	queued float64
	at     time.Time
}

// inlineHolder decides how w is answered for the inline entry e: nil
// means with the bytes (and the bytes are counted on the uplink), else
// the copy that serves it. w's arrival is the latest time the table
// knows of when it answers (a waiter served by a Create or a FetchDone
// was parked before it): an earlier now drains less, which errs towards
// a holder only when the queue was long.
func (t *LocationTable) inlineHolder(e *entry, w *waiter) *location {
	now := w.at
	if e.inlineQ.at.After(now) {
		now = e.inlineQ.at
	}
	q := InlineQueued(e.inlineQ.queued, e.inlineQ.at, now, t.cfg.InlineUplink)
	var holder *location
	if !w.chosen && !w.failed && !AnswerWithBytes(q, e.size, t.cfg.InlineUplink) {
		if w.noCopy {
			holder = t.pickReadable(e, w.receiver.GetNodeId(), w.avoid)
		} else {
			holder = t.pickSender(e, w.receiver.GetNodeId(), false, w.avoid)
		}
	}
	if holder == nil {
		q += float64(e.size)
	}
	e.inlineQ = inlineQueue{queued: q, at: now}
	return holder
}

// inlineReply answers w with e's bytes. The receiver stores the bytes it
// is sent: it holds a copy from now on (a Delete must reach it, and later
// receivers may be sent to it), recorded here instead of by a
// PublishLocation of its own, which would cost the shard a third message
// per inline Get. A receiver that fails to store them unpublishes (one
// sent to it meanwhile fails over, naming it, and gets the bytes). A
// no-copy receiver stores nothing.
func (t *LocationTable) inlineReply(e *entry, w *waiter) []outbox.Send {
	run, reduced := e.target.marks()
	out := []outbox.Send{{To: w.replyTo, Msg: &messages.LocateReply{ObjectId: e.id, Size: e.size,
		Fingerprint: e.fingerprint, HasInline: true, InlineData: e.inline, Attempt: w.attempt,
		ProducedBy: run, ReducedIds: reduced}}}
	if !w.noCopy {
		out = append(out, t.setLocation(e, w.receiver, messages.LocationState_COMPLETE, false)...)
	}
	return out
}

// InlinePublisher is where a table publishes the plain inline objects it
// serves as they are (a Put's, not a Reduce's, CheapOnTheUplink), so
// that Locates of them are answered without the table, and learns the
// copies those answers made: each answer records its reader before the
// bytes leave, as the table's own inline answer (inlineReply) records
// its receiver. Only the table's step calls it. The rule a table keeps:
// an id is published only while a Locate stepped through the table
// would be answered with those bytes; it is withdrawn in the step that
// deletes, releases or marks it a Reduce's, before any answer of that
// step. internal/inlineindex is the one there is.
type InlinePublisher interface {
	// Publish serves id's bytes (data, read-only) from now on; uplink is
	// the shard's uplink rate for the budget of its answers
	// (AnswerWithBytes).
	Publish(id string, size int64, fingerprint uint64, data []byte, uplink float64)
	// Withdraw stops serving id, and returns the readers its answers
	// recorded that Drain has not returned.
	Withdraw(id string) []*messages.NodeRef
	// Drain returns the readers recorded since the last Drain.
	Drain() []InlineReaders
}

// InlineReaders are the readers an InlinePublisher's answers recorded
// for object ID: each holds a whole copy.
type InlineReaders struct {
	ID      string
	Readers []*messages.NodeRef
}

// publishInline publishes e if it is a plain inline object cheap on the
// uplink.
func (t *LocationTable) publishInline(e *entry, unoffered bool) {
	if t.cfg.Inline != nil && e.hasInline && !unoffered && e.target.none() && CheapOnTheUplink(e.size, t.cfg.InlineUplink) {
		t.cfg.Inline.Publish(e.id, e.size, e.fingerprint, e.inline, t.cfg.InlineUplink)
	}
}

// withdrawInline withdraws e from the table's InlinePublisher and takes
// into its locations the readers its answers recorded that the table had
// not taken yet: their copies exist.
func (t *LocationTable) withdrawInline(e *entry) []outbox.Send {
	if t.cfg.Inline == nil {
		return nil
	}
	var out []outbox.Send
	for _, r := range t.cfg.Inline.Withdraw(e.id) {
		out = append(out, t.setLocation(e, r, messages.LocationState_COMPLETE, false)...)
	}
	return out
}

// takeInlineReaders takes into the table's locations the readers the
// InlinePublisher's answers recorded since the last step: each holds a
// whole copy, as the receiver of the table's own inline answer does.
// Step does it first, so that everything a step decides (a Delete's
// drops, a sender's choice, an Info) counts them.
func (t *LocationTable) takeInlineReaders() []outbox.Send {
	if t.cfg.Inline == nil {
		return nil
	}
	var out []outbox.Send
	for _, rs := range t.cfg.Inline.Drain() {
		e := t.entries[rs.ID]
		if e == nil || !e.hasInline {
			continue // withdrawn since: Withdraw handed its readers over
		}
		for _, r := range rs.Readers {
			out = append(out, t.setLocation(e, r, messages.LocationState_COMPLETE, false)...)
		}
	}
	return out
}
