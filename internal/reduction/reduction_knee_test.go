package reduction

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/messages"
)

func kneeRed(sources int, k *messages.ReduceKnee) *Reduction {
	req := &messages.Reduce{TargetId: testTarget, SourceIds: ids("s", sources), Knee: k,
		Op: messages.ReduceOp_SUM, Dtype: messages.DType_INT64}
	return NewReduction(testReduceID, req, Config{InlineLimit: testInline}, t0, time.Second, 100*time.Microsecond, 1.25e9)
}

func timerAt(fx Effects, msg any) (time.Time, bool) {
	for _, tm := range fx.Timers {
		if tm.Msg == msg {
			return tm.At, true
		}
	}
	return time.Time{}, false
}

// Begin subscribes to every source and arms the deadline and the
// resubscription; Resubscribe asks again only for what is missing.
func TestBeginSubscribesAndArmsTimers(t *testing.T) {
	r := newRed(request(ids("s", 3), 2), Config{})
	fx := r.Step(t0, Begin{})
	var subs []string
	for _, s := range fx.Sends {
		if m, ok := s.Msg.(*messages.Subscribe); ok && s.To == directory.ShardOf(m.GetObjectId()) {
			subs = append(subs, m.GetObjectId())
		}
	}
	if !slices.Equal(subs, ids("s", 3)) {
		t.Fatalf("subscribed to %v", subs)
	}
	if at, ok := timerAt(fx, DeadlineTimer{}); !ok || !at.Equal(t0.Add(time.Second)) {
		t.Fatalf("deadline timer %v %v", ok, at)
	}
	if at, ok := timerAt(fx, ResubscribeTimer{}); !ok || !at.Equal(t0.Add(DefaultResubscribe)) {
		t.Fatalf("resubscribe timer %v %v", ok, at)
	}
	r.Step(t0, located("s1", bigSize, node(1)))
	fx = r.Step(t0.Add(DefaultResubscribe), ResubscribeTimer{})
	if len(fx.Sends) != 2 || fx.Sends[0].To != directory.ShardOf("s0") || fx.Sends[1].To != directory.ShardOf("s2") {
		t.Fatalf("resubscribed %v, want s0 and s2", fx.Sends)
	}
	if at, ok := timerAt(fx, ResubscribeTimer{}); !ok || !at.Equal(t0.Add(2*DefaultResubscribe)) {
		t.Fatalf("next resubscribe %v %v", ok, at)
	}
}

// While the gate decides, arrivals wait; an arrival whose node fails is
// dropped; once max_objects fixes the count the tree is planned from
// what is still there, and the reply says what fixed the count.
func TestKneePhaseArrivalsFailuresAndFix(t *testing.T) {
	r := kneeRed(4, &messages.ReduceKnee{MinPercent: 50, MaxObjects: 2})
	r.Step(t0, Begin{})
	fx := r.Step(t0, located("s0", bigSize, node(0)))
	if len(fx.Tasks()) != 0 || !r.Gating() || len(fx.Watch) != 1 {
		t.Fatalf("first arrival: tasks %v gating %v watch %v", fx.Tasks(), r.Gating(), fx.Watch)
	}
	mustEmpty(t, "failure while gating", r.Step(t0.Add(time.Millisecond), NodeFailed{Node: "n0"}))
	fx = r.Step(t0.Add(2*time.Millisecond), located("s1", bigSize, node(1)))
	if r.Gating() || fx.Knee == nil || fx.Knee.Count != 2 || fx.Knee.Reason != CompletedByMaxObjects {
		t.Fatalf("gating %v after the second arrival, knee note %+v", r.Gating(), fx.Knee)
	}
	if len(fx.Tasks()) != 0 {
		t.Fatalf("tasks %v with one of two sources available", fx.Tasks())
	}
	// s0 is created again on another node: it completes the tree.
	fx = r.Step(t0.Add(3*time.Millisecond), located("s0", bigSize, node(5)))
	if len(fx.Tasks()) != 1 {
		t.Fatalf("want the first task, got %v", fx.Tasks())
	}
	for p := range 2 {
		r.Step(t0, started(p))
	}
	var rep *messages.ReduceReply
	for p := range 2 {
		if fx := r.Step(t0, done(p)); fx.Reply() != nil {
			rep = fx.Reply()
		}
	}
	if rep == nil || rep.GetError() != nil || rep.GetCompletedBy() != CompletedByMaxObjects ||
		!slices.Equal(slices.Sorted(slices.Values(rep.GetReducedIds())), []string{"s0", "s1"}) {
		t.Fatalf("reply %v", rep)
	}
}

// Deletions count against min_percent while the gate decides.
func TestKneePhaseDeletions(t *testing.T) {
	r := kneeRed(4, &messages.ReduceKnee{MinPercent: 75})
	r.Step(t0, Begin{})
	del := func(id string) Effects {
		return r.Step(t0, &messages.LocationUpdate{ObjectId: id, Deleted: true})
	}
	mustEmpty(t, "one deletion", del("s0"))
	e := mustFail(t, r, del("s1"), messages.ErrDeleted, nil)
	if !strings.Contains(e.GetMessage(), `source "s1" was deleted; 2 sources remain, min_percent needs 3`) {
		t.Fatalf("error %q", e.GetMessage())
	}
}

// The deadline while the gate decides fails with the knee's TIMEOUT; the
// knee check is armed at the gate's next deadline.
func TestKneePhaseTimerAndDeadline(t *testing.T) {
	r := kneeRed(6, &messages.ReduceKnee{MinPercent: 50, Warmup: 2})
	r.Step(t0, Begin{})
	r.Step(t0, located("s0", bigSize, node(0)))
	fx := r.Step(t0.Add(10*time.Millisecond), located("s1", bigSize, node(1)))
	at, ok := timerAt(fx, KneeTimer{})
	if !ok || !at.After(t0.Add(10*time.Millisecond)) {
		t.Fatalf("knee timer %v at %v, want one after the last arrival", ok, at)
	}
	if fx := r.Step(at, KneeTimer{}); !r.Gating() || fx.Knee != nil {
		t.Fatalf("a knee before min_percent was accepted: %+v", fx.Knee)
	}
	mustEmpty(t, "early deadline", r.Step(t0.Add(time.Second-time.Millisecond), DeadlineTimer{}))
	fx = r.Step(t0.Add(time.Second), DeadlineTimer{})
	err := messages.ErrOrNil(fx.Reply().GetError())
	if !errors.Is(err, messages.ErrTimeout) || !strings.Contains(err.Error(), "knee policy: 2 of 6 sources arrived before the deadline and no knee was accepted (3 needed by min_percent)") {
		t.Fatalf("error %v", err)
	}
	if !fx.ReleaseTarget() || fx.Reply().GetCompletedBy() != "" {
		t.Fatalf("release target %v, completed_by %q", fx.ReleaseTarget(), fx.Reply().GetCompletedBy())
	}
}

// A deleted backup does not take a failed source's place: its bytes are
// gone.
func TestDeletedBackupIsNotPromoted(t *testing.T) {
	r := newRed(request([]string{"a", "b", "c"}, 1), Config{})
	r.Step(t0, located("a", bigSize, node(0)))
	r.Step(t0, located("b", bigSize, node(1)))
	mustEmpty(t, "delete the backup", r.Step(t0, &messages.LocationUpdate{ObjectId: "b", Deleted: true}))
	if fx := r.Step(t0, NodeFailed{Node: "n0"}); len(fx.Tasks()) != 0 {
		t.Fatalf("the deleted backup got a task: %v", fx.Tasks())
	}
	fx := r.Step(t0, located("c", bigSize, node(2)))
	if len(fx.Tasks()) != 1 || fx.Tasks()[0].Task.GetSourceId() != "c" {
		t.Fatalf("want c's task, got %v", fx.Tasks())
	}
}

// A pending arrival whose copy leaves the directory before the count is
// fixed is no longer available: the Reduction waits for it again.
func TestKneePhaseCopyLeavesTheDirectory(t *testing.T) {
	r := kneeRed(3, &messages.ReduceKnee{MinPercent: 50})
	r.Step(t0, Begin{})
	r.Step(t0, located("s0", bigSize, node(0)))
	if w := r.Waiting(); !slices.Equal(w, []string{"s1", "s2"}) {
		t.Fatalf("waiting %v", w)
	}
	r.Step(t0, &messages.LocationUpdate{ObjectId: "s0", Node: node(0)})
	if w := r.Waiting(); !slices.Equal(w, []string{"s0", "s1", "s2"}) {
		t.Fatalf("waiting %v after s0's copy left", w)
	}
}

// A resubscription says which sources were located before and are
// missing again: a directory shard that restarted or moved knows nothing
// of a source whose copies went before, and answers LOST to such a
// subscription only (a source never located may not be Put yet).
func TestResubscriptionSaysWhichSourcesWereLocatedBefore(t *testing.T) {
	r := newRed(request(ids("s", 3), 3), Config{})
	r.Step(t0, Begin{})
	r.Step(t0, located("s1", bigSize, node(1)))
	r.Step(t0.Add(time.Millisecond), NodeFailed{Node: "n1"})
	fx := r.Step(t0.Add(DefaultResubscribe), ResubscribeTimer{})
	before := map[string]bool{}
	for _, s := range fx.Sends {
		if m, ok := s.Msg.(*messages.Subscribe); ok {
			before[m.GetObjectId()] = m.GetLocatedBefore()
		}
	}
	if len(before) != 3 || before["s0"] || !before["s1"] || before["s2"] {
		t.Fatalf("resubscribed %v, want s0, s1 (located before) and s2", before)
	}
}
