package handle

import (
	"errors"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/messages"
	"google.golang.org/protobuf/proto"
)

var t0 = time.Unix(1000, 0)

func enters(s Step) []*messages.BarrierEnter {
	var out []*messages.BarrierEnter
	for _, snd := range s.Sends {
		if m, ok := snd.Msg.(*messages.BarrierEnter); ok {
			if int(snd.To.(Rank)) != int(m.GetToRank()) {
				panic("an Enter addressed to another rank than it names")
			}
			out = append(out, m)
		}
	}
	return out
}

func notFound(label string, id uint64, rank int32) *messages.BarrierRefused {
	return &messages.BarrierRefused{Label: label, RequestId: id, FromRank: rank, Error: messages.Errorf(messages.ErrorCode_NOT_FOUND, "no barrier")}
}

// An Enter goes to every replica and arms one re-ask; NOT_FOUND fails it
// only when every replica of a round said so (counted by rank: one
// replica answering twice is not two), and a re-ask starts a new round.
func TestEnterNotFoundNeedsAWholeRound(t *testing.T) {
	p := New("b")
	p.Setup(3, 4, false)
	s := p.onEnter(t0, 1, "l", "h")
	if got := enters(s); len(got) != 3 || len(s.Timers) != 1 || !s.Timers[0].At.Equal(t0.Add(ReaskEvery)) {
		t.Fatalf("enter: %d Enters, timers %v; want 3 and one re-ask at +%v", len(got), s.Timers, ReaskEvery)
	}
	if s := p.onEnter(t0, 2, "m", "h"); len(s.Timers) != 0 {
		t.Fatal("a second waiting Enter armed a second timer")
	}
	for _, rank := range []int32{0, 1, 1, 0} {
		if s := p.onRefused(notFound("l", 1, rank)); len(s.Enters) != 0 {
			t.Fatalf("NOT_FOUND from part of the round failed the Enter: %v", s.Enters)
		}
	}
	s = p.onReask(t0.Add(ReaskEvery))
	if len(enters(s)) != 6 || len(s.Timers) != 1 {
		t.Fatalf("re-ask: %d Enters, %d timers; want both labels to every replica and the timer again", len(enters(s)), len(s.Timers))
	}
	p.onRefused(notFound("l", 1, 2))
	p.onRefused(notFound("l", 1, 0))
	if s := p.onRefused(notFound("l", 99, 1)); len(s.Enters) != 0 {
		t.Fatal("a refusal of another request id counted")
	}
	s = p.onRefused(notFound("l", 1, 1))
	if len(s.Enters) != 1 || s.Enters[0].ID != 1 || !errors.Is(s.Enters[0].Err, messages.ErrNotFound) {
		t.Fatalf("a whole round of NOT_FOUND: %+v, want Enter 1 failed NOT_FOUND", s.Enters)
	}
	if s := p.onRefused(&messages.BarrierRefused{Label: "m", RequestId: 2, Error: messages.Errorf(messages.ErrorCode_CAPACITY, "full")}); len(s.Enters) != 1 || !errors.Is(s.Enters[0].Err, messages.ErrCapacity) {
		t.Fatalf("another refusal fails at once: %+v", s.Enters)
	}
	if p.Waiting() != 0 {
		t.Fatalf("%d Enters still wait", p.Waiting())
	}
	if s := p.onReask(t0.Add(2 * ReaskEvery)); len(s.Sends) != 0 || len(s.Timers) != 0 {
		t.Fatal("a re-ask with nothing waiting sent or armed something")
	}
}

// A second Enter of a waiting label conflicts; an outcome answers the
// waiter once, and later copies are counted as duplicates or conflicts.
func TestOutcomesAnswerOnceAndCountTheRest(t *testing.T) {
	p := New("b")
	p.Setup(2, 4, false)
	p.onEnter(t0, 1, "l", "h")
	if s := p.onEnter(t0, 2, "l", "h"); len(s.Enters) != 1 || !errors.Is(s.Enters[0].Err, messages.ErrConflict) || len(s.Sends) != 0 {
		t.Fatalf("second Enter of a waiting label: %+v", s)
	}
	s := p.onOutcome("l", Fired, "all")
	if len(s.Enters) != 1 || s.Enters[0].ID != 1 || s.Enters[0].Kind != Fired || s.Enters[0].Reason != "all" {
		t.Fatalf("outcome: %+v", s.Enters)
	}
	if s := p.onOutcome("l", Fired, "all"); s.Dup != 1 || len(s.Enters) != 0 {
		t.Fatalf("duplicate: %+v", s)
	}
	if s := p.onOutcome("l", Late, ""); s.Conflict != 1 {
		t.Fatalf("other outcome of an answered label: %+v", s)
	}
	if s := p.onOutcome("x", Fired, ""); s.Orphans != 1 || len(s.Sends) != 0 {
		t.Fatalf("orphan on a plain barrier: %+v", s)
	}
}

// On a semaphore, an admission nobody waits for any more gives the slot
// back to every replica.
func TestSemaphoreGivesBackAnOrphanSlot(t *testing.T) {
	p := New("s")
	p.Setup(3, 2, true)
	p.onEnter(t0, 1, "l", "h")
	p.Cancel(1, "l")
	s := p.onOutcome("l", Fired, "")
	if s.Orphans != 1 || len(s.Sends) != 3 {
		t.Fatalf("orphan admission: %+v, want three releases", s)
	}
	for i, snd := range s.Sends {
		r, ok := snd.Msg.(*messages.BarrierRelease)
		if !ok || r.GetLabel() != "l" || snd.To != Rank(i) || r.GetToRank() != int32(i) {
			t.Fatalf("send %d: %v to %v", i, snd.Msg, snd.To)
		}
	}
}

// Calls are answered by the first answer; Stop ends every waiting call.
func TestCallsAndStop(t *testing.T) {
	p := New("b")
	p.Setup(2, 4, false)
	s := p.onCall(t0, 7, []proto.Message{&messages.BarrierStatus{Name: "b"}, &messages.BarrierStatus{Name: "b"}})
	if len(s.Sends) != 2 || s.Sends[1].To != Rank(1) {
		t.Fatalf("call sends: %v", s.Sends)
	}
	reply := &messages.BarrierStatusReply{RequestId: 7}
	if s := p.onAnswered(7, reply); len(s.Calls) != 1 || s.Calls[0].Msg != reply {
		t.Fatalf("answer: %+v", s.Calls)
	}
	if s := p.onAnswered(7, reply); len(s.Calls) != 0 {
		t.Fatal("a call answered twice")
	}
	p.onCall(t0, 8, nil)
	p.onEnter(t0, 9, "l", "h")
	s = p.onStop()
	if len(s.Calls) != 1 || s.Calls[0].ID != 8 || s.Calls[0].Msg != nil ||
		len(s.Enters) != 1 || !errors.Is(s.Enters[0].Err, messages.ErrCanceled) {
		t.Fatalf("stop: %+v", s)
	}
}

// A Close's DELETED answers (members whose replica applied the close and
// stopped) wait for the acting primary's answer, which settles the call;
// only every replica saying DELETED (closed before) answers DELETED.
// Other calls take their first answer.
func TestCloseWaitsForThePrimaryPastDeleted(t *testing.T) {
	p := New("b")
	p.Setup(3, 8, false)
	deleted := func(rank int32) *messages.BarrierClosed {
		return &messages.BarrierClosed{Name: "b", FromRank: rank, Error: messages.Errorf(messages.ErrorCode_DELETED, "barrier %q is closed", "b")}
	}
	p.onCall(t0, 1, []proto.Message{&messages.BarrierClose{}, &messages.BarrierClose{}, &messages.BarrierClose{}})
	for _, rank := range []int32{1, 2, 2} {
		if s := p.onAnswered(1, deleted(rank)); len(s.Calls) != 0 {
			t.Fatalf("a backup's DELETED answered the Close: %+v", s.Calls)
		}
	}
	s := p.onAnswered(1, &messages.BarrierClosed{Name: "b"})
	if len(s.Calls) != 1 || s.Calls[0].Msg.(*messages.BarrierClosed).GetError() != nil {
		t.Fatalf("the primary's answer: %+v", s.Calls)
	}
	if s := p.onAnswered(1, deleted(0)); len(s.Calls) != 0 {
		t.Fatal("a late answer to a settled call")
	}
	p.onCall(t0, 2, []proto.Message{&messages.BarrierClose{}, &messages.BarrierClose{}, &messages.BarrierClose{}})
	var got []CallAnswer
	for rank := range int32(3) {
		got = append(got, p.onAnswered(2, deleted(rank)).Calls...)
	}
	if len(got) != 1 || !errors.Is(messages.ErrOrNil(got[0].Msg.(*messages.BarrierClosed).GetError()), messages.ErrDeleted) {
		t.Fatalf("a Close of a barrier closed before: %+v", got)
	}
	p.onCall(t0, 3, []proto.Message{&messages.BarrierStatus{}})
	if s := p.onAnswered(3, &messages.BarrierStatusReply{Error: messages.Errorf(messages.ErrorCode_DELETED, "closed")}); len(s.Calls) != 1 {
		t.Fatal("a status call waited past its first answer")
	}
}

func lost(label string, id uint64, rank int32) *messages.BarrierRefused {
	return &messages.BarrierRefused{Label: label, RequestId: id, LostState: true, FromRank: rank,
		Error: messages.Errorf(messages.ErrorCode_UNAVAILABLE, "replica %d lost the barrier's state", rank)}
}

// A replica's news that it lost the barrier's state fails an Enter only
// when every replica said so in one round, counted by rank: one replica
// answering two rounds (or a rank the barrier does not have) is not the
// whole barrier, and a re-ask starts a new round. Then the Enter fails
// with UNAVAILABLE at once, not at its deadline.
func TestEnterFailsOnceEveryReplicaLostTheState(t *testing.T) {
	p := New("b")
	p.Setup(3, 4, false)
	p.onEnter(t0, 1, "l", "h")
	for _, m := range []*messages.BarrierRefused{lost("l", 1, 0), lost("l", 1, 0), lost("l", 1, 1), lost("l", 1, 3), lost("l", 1, -1)} {
		if s := p.onRefused(m); len(s.Enters) != 0 {
			t.Fatalf("%v failed the Enter with two of three replicas heard: %v", m, s.Enters)
		}
	}
	p.onReask(t0.Add(ReaskEvery)) // a new round: ranks 0 and 1 must say so again
	if s := p.onRefused(lost("l", 1, 2)); len(s.Enters) != 0 {
		t.Fatalf("rank 2 alone in a new round failed the Enter: %v", s.Enters)
	}
	p.onRefused(lost("l", 1, 0))
	s := p.onRefused(lost("l", 1, 1))
	if len(s.Enters) != 1 || s.Enters[0].ID != 1 || !errors.Is(s.Enters[0].Err, messages.ErrUnavailable) {
		t.Fatalf("every replica lost the state: %+v, want Enter 1 failed UNAVAILABLE", s.Enters)
	}
	if p.Waiting() != 0 {
		t.Fatal("the failed Enter still waits")
	}
}

// A call's NOT_FOUND from a replica's host (it has no manager for the
// barrier) or a replica's news that it lost the barrier's state is not
// the answer while another replica may hold the barrier: the acting
// primary's answer, later, is (the first replica's host, without its
// replica, answered NOT_FOUND at once, and that was the answer although a
// backup that took over held the barrier). Once every replica said one or
// the other the call is answered at once: NOT_FOUND if every host said
// so, UNAVAILABLE if some replicas lost the state (the call waited for
// its deadline).
func TestCallsWaitPastReplicasThatHoldNothing(t *testing.T) {
	p := New("b")
	p.Setup(3, 8, false)
	status := []proto.Message{&messages.BarrierStatus{}, &messages.BarrierStatus{}, &messages.BarrierStatus{}}
	nf := func(rank int32) *messages.BarrierStatusReply {
		return &messages.BarrierStatusReply{FromRank: rank, Error: messages.Errorf(messages.ErrorCode_NOT_FOUND, "no barrier")}
	}
	gone := func(rank int32) *messages.BarrierStatusReply {
		return &messages.BarrierStatusReply{FromRank: rank, LostState: true, Error: messages.Errorf(messages.ErrorCode_UNAVAILABLE, "replica %d lost the barrier's state", rank)}
	}
	p.onCall(t0, 1, status)
	for _, m := range []*messages.BarrierStatusReply{nf(0), gone(2), nf(0), nf(5)} {
		if s := p.onAnswered(1, m); len(s.Calls) != 0 {
			t.Fatalf("%v answered the call while rank 1 may hold the barrier", m)
		}
	}
	primary := &messages.BarrierStatusReply{FromRank: 1, Entered: 2}
	if s := p.onAnswered(1, primary); len(s.Calls) != 1 || s.Calls[0].Msg != primary {
		t.Fatalf("the acting primary's answer: %+v", s.Calls)
	}

	p.onCall(t0, 2, status)
	var got []CallAnswer
	for rank := range int32(3) {
		got = append(got, p.onAnswered(2, nf(rank)).Calls...)
	}
	if len(got) != 1 || !errors.Is(messages.ErrOrNil(got[0].Msg.(*messages.BarrierStatusReply).GetError()), messages.ErrNotFound) {
		t.Fatalf("every host without the barrier: %+v, want NOT_FOUND", got)
	}

	p.onCall(t0, 3, status)
	got = nil
	for _, m := range []*messages.BarrierStatusReply{gone(0), nf(1), gone(2)} {
		got = append(got, p.onAnswered(3, m).Calls...)
	}
	if len(got) != 1 || !errors.Is(messages.ErrOrNil(got[0].Msg.(*messages.BarrierStatusReply).GetError()), messages.ErrUnavailable) {
		t.Fatalf("no replica holds the state: %+v, want UNAVAILABLE", got)
	}

	// A Close: every replica lost the state.
	p.onCall(t0, 4, []proto.Message{&messages.BarrierClose{}, &messages.BarrierClose{}, &messages.BarrierClose{}})
	got = nil
	for rank := range int32(3) {
		got = append(got, p.onAnswered(4, &messages.BarrierClosed{FromRank: rank, LostState: true,
			Error: messages.Errorf(messages.ErrorCode_UNAVAILABLE, "lost")}).Calls...)
	}
	if len(got) != 1 || !errors.Is(messages.ErrOrNil(got[0].Msg.(*messages.BarrierClosed).GetError()), messages.ErrUnavailable) {
		t.Fatalf("a Close no replica can apply: %+v, want UNAVAILABLE", got)
	}
}

// NOT_FOUND and lost state mix in one round of Enters: when every replica
// said one or the other, none holds the barrier's state and the Enter
// fails with UNAVAILABLE at once.
func TestEnterFailsWhenNoReplicaHoldsTheState(t *testing.T) {
	p := New("b")
	p.Setup(3, 4, false)
	p.onEnter(t0, 1, "l", "h")
	p.onRefused(notFound("l", 1, 0))
	p.onRefused(lost("l", 1, 2))
	s := p.onRefused(notFound("l", 1, 1))
	if len(s.Enters) != 1 || !errors.Is(s.Enters[0].Err, messages.ErrUnavailable) {
		t.Fatalf("no replica holds the state: %+v, want UNAVAILABLE", s.Enters)
	}
}

// A waiting Release or Status is asked again every ReaskEvery (a backup
// may have ignored the first, or it was lost in transit), a Close is
// not, and the timer is not re-armed once nothing waits.
func TestWaitingCallsAreAskedAgain(t *testing.T) {
	p := New("b")
	p.Setup(2, 4, true)
	release := []proto.Message{&messages.BarrierRelease{Name: "b", Label: "a"}, &messages.BarrierRelease{Name: "b", Label: "a", ToRank: 1}}
	s := p.onCall(t0, 1, release)
	if len(s.Sends) != 2 || len(s.Timers) != 1 || !s.Timers[0].At.Equal(t0.Add(ReaskEvery)) {
		t.Fatalf("a Release: %+v, want two sends and a re-ask at %v", s, t0.Add(ReaskEvery))
	}
	if s := p.onCall(t0, 2, []proto.Message{&messages.BarrierClose{}, &messages.BarrierClose{}}); len(s.Sends) != 2 || len(s.Timers) != 0 {
		t.Fatalf("a Close: %+v, want two sends and no second timer", s)
	}
	s = p.Step(t0.Add(ReaskEvery), Reask{})
	if len(s.Sends) != 2 || s.Sends[0].Msg != release[0] || s.Sends[1].To != Rank(1) || len(s.Timers) != 1 {
		t.Fatalf("re-ask: %+v, want the Release again (not the Close) and the timer again", s)
	}
	p.onAnswered(1, &messages.BarrierReleased{RequestId: 1})
	if s := p.Step(t0.Add(2*ReaskEvery), Reask{}); len(s.Sends) != 0 || len(s.Timers) != 1 {
		t.Fatalf("with only the Close waiting: %+v, want nothing sent and the timer kept", s)
	}
	p.onAnswered(2, &messages.BarrierClosed{RequestId: 2})
	if s := p.Step(t0.Add(3*ReaskEvery), Reask{}); len(s.Sends) != 0 || len(s.Timers) != 0 {
		t.Fatalf("nothing waiting: %+v, want no send and no timer", s)
	}
}
