package replica

import (
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/messages"
)

// Events a Replica steps on beside the wire messages it takes as they
// come (*messages.BarrierDecide, BarrierReplicate, BarrierHandover,
// BarrierCloseAck and BarrierSyncRequest). From is the sender the
// answer goes to.
type (
	// Created answers a BarrierCreate, or a BarrierOpen (Req nil).
	Created struct {
		Req  *messages.BarrierCreate
		From *actor.PID
	}
	// Enter is a participant's BARRIER_REACHED.
	Enter struct {
		Req  *messages.BarrierEnter
		From *actor.PID
	}
	// Release is a semaphore holder's SEMAPHORE_RELEASED.
	Release struct {
		Req  *messages.BarrierRelease
		From *actor.PID
	}
	// Close is a BarrierClose.
	Close struct {
		Req  *messages.BarrierClose
		From *actor.PID
	}
	// Status is a BarrierStatus (getHosts).
	Status struct {
		Req  *messages.BarrierStatus
		From *actor.PID
	}
	// ParticipantDown: a watched participant terminated.
	ParticipantDown struct{ PID *actor.PID }
	// Undelivered: an outcome or a consultation to Target found no
	// actor.
	Undelivered struct{ Target *actor.PID }
	// MemberDown: the cluster declared Member, at Address, failed.
	MemberDown struct{ Member, Address string }
	// CreateBackups asks the other replicas' hosts to create their
	// replicas (the first replica of a new barrier).
	CreateBackups struct{}
	// Wake is the replica's one timer, armed for At: a deadline of the
	// policy, a close's, or a takeover's.
	Wake struct{ At time.Time }
)

// Step applies one event at now: one of the events above, or one of the
// wire messages the replica takes as they come. Its Effects hold a Wake
// timer whenever the replica's next wake-up (NextWake) differs from the
// one it asked for last; a Wake that is not the last one asked for is
// stale and changes nothing. Any other event asks for nothing.
func (r *Replica) Step(now time.Time, ev any) Effects {
	var e Effects
	switch m := ev.(type) {
	case Created:
		e = r.onCreated(m.Req, m.From)
	case Enter:
		e = r.onEnter(now, m.Req, m.From)
	case Release:
		e = r.onRelease(now, m.Req, m.From)
	case Close:
		e = r.onClose(now, m.Req, m.From)
	case Status:
		e = r.onStatus(now, m.Req, m.From)
	case *messages.BarrierDecide:
		e = r.onDecide(now, m)
	case *messages.BarrierReplicate:
		e = r.onReplicate(now, m)
	case *messages.BarrierHandover:
		e = r.onHandover(now, m)
	case *messages.BarrierCloseAck:
		e = r.onCloseAck(m)
	case *messages.BarrierSyncRequest:
		e = r.onSyncRequest(m)
	case ParticipantDown:
		e = r.onParticipantDown(now, m.PID)
	case Undelivered:
		e = r.onUndelivered(now, m.Target)
	case MemberDown:
		e = r.onMemberDown(m.Member, m.Address)
	case CreateBackups:
		e = r.onCreateBackups()
	case Wake:
		if !m.At.Equal(r.armed) {
			return e // stale: a later step asked for another
		}
		r.armed = time.Time{}
		e = r.onTick(now)
	default:
		return e
	}
	r.armWake(&e)
	return e
}

// armWake asks for the Wake of NextWake when it is not the one asked
// for last.
func (r *Replica) armWake(e *Effects) {
	next := r.NextWake()
	if next.Equal(r.armed) {
		return
	}
	r.armed = next
	if !next.IsZero() {
		e.After(next, Wake{At: next})
	}
}
