package reduction

import (
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/reduction/plan"
	"github.com/hoplite-go/hoplite/messages"
)

// TestCancelBeforeTheCommitAbandons: a cancel that comes while the
// Reduce still waits for sources, or while its tree runs, ends it as a
// failure does (its nodes released, the target dropped) and answers
// CANCELED; nothing it does afterwards starts anything again.
func TestCancelBeforeTheCommitAbandons(t *testing.T) {
	// Waiting for its third source, one position running on n1.
	r := chainWithTask(t, []string{"a", "b", "c"}, 3)
	if e := mustFail(t, r, r.Step(t0, Cancel{}), messages.ErrCanceled, []string{"n1"}); !AbandonedAtCancel(e) {
		t.Fatalf("the answer %v does not say the coordinator abandoned the run", e)
	}
	if AbandonedAtCancel(messages.Errorf(messages.ErrorCode_CANCELED, "context canceled")) {
		t.Fatal("a caller's own CANCELED taken for the coordinator's")
	}
	mustEmpty(t, "a source after the cancel", r.Step(t0, located("c", bigSize, node(2))))
	mustEmpty(t, "a second cancel", r.Step(t0, Cancel{}))
	mustEmpty(t, "the deadline after the cancel", r.Step(t0.Add(2*time.Second), DeadlineTimer{}))

	// Nothing arrived yet: nothing to release, the target's reservation
	// still goes.
	r = newRed(request([]string{"a", "b"}, 2), Config{})
	mustFail(t, r, r.Step(t0, Cancel{}), messages.ErrCanceled, nil)
}

// TestCancelAfterTheCommitChangesNothing: once the root's commit went
// out the result is fixed; a cancel then neither answers nor releases,
// and the Reduce ends with the commit's answer.
func TestCancelAfterTheCommitChangesNothing(t *testing.T) {
	sources := ids("s", 7)
	req := request(sources, 6)
	req.AllReduce = true
	tree, _ := plan.NewTree(6, 2)
	onNode := []int{0, 1, 0, 2, 1, 3, 9}
	s := newSim(t, newRed(req, Config{ForceDegree: 2}), tree)
	for k, id := range sources {
		s.arrive(id, node(onNode[k]))
	}
	for _, p := range []int{1, 5, 3} {
		s.start(p)
	}
	mustEmpty(t, "Done(1)", s.r.Step(t0, done(1)))
	mustEmpty(t, "Done(5)", s.r.Step(t0, done(5)))
	fx := s.r.Step(t0, done(3))
	commits := 0
	for _, snd := range fx.Sends {
		if _, ok := snd.Msg.(*messages.ReduceCommit); ok {
			commits++
		}
	}
	if commits == 0 || fx.Reply() != nil {
		t.Fatalf("Done(root) with fetches running: want the commit and no reply, got %+v", fx)
	}
	mustEmpty(t, "a cancel after the commit", s.r.Step(t0, Cancel{}))
	if s.r.Over() {
		t.Fatal("a cancel after the commit ended the Reduce")
	}
	// The participants' Gets end it with the commit's answer.
	var last Effects
	for _, n := range []string{"n0", "n1", "n2", "n3"} {
		last = s.r.Step(t0, Fetched{Node: n, Err: nil})
	}
	if last.Reply() == nil || last.Reply().GetError() != nil || len(last.Reply().GetReducedIds()) != 6 {
		t.Fatalf("want the commit's answer with 6 sources, got %+v", last)
	}
	if last.ReleaseTarget() {
		t.Fatal("the committed target was released")
	}
}

// TestCancelAfterTheInlineStoreChangesNothing: an inline result sent to
// be stored is the commit of an inline Reduce.
func TestCancelAfterTheInlineStoreChangesNothing(t *testing.T) {
	req := request([]string{"x", "y"}, 2)
	req.Dtype = messages.DType_INT32
	r := newRed(req, Config{})
	mustEmpty(t, "x", r.Step(t0, locatedInline("x", le32(1), node(0))))
	if fx := r.Step(t0, locatedInline("y", le32(2), node(1))); fx.StoreInline() == nil {
		t.Fatalf("want StoreInline, got %+v", fx)
	}
	mustEmpty(t, "a cancel after the store went out", r.Step(t0, Cancel{}))
	fx := r.Step(t0, &messages.StoreReducedReply{ReduceId: testReduceID})
	if fx.Reply() == nil || fx.Reply().GetError() != nil {
		t.Fatalf("want the stored result's answer, got %+v", fx)
	}
}
