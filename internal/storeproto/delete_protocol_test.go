package storeproto

import (
	"errors"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/messages"
)

func startedDeletion(t *testing.T) *Deletion {
	t.Helper()
	d := NewDeletion(DeleteRequest{ID: 3, ObjectID: "x", Self: &messages.NodeRef{NodeId: "n0"}, Requester: putRequester,
		Deadline: putT0.Add(time.Second)})
	s := d.onStart()
	if len(s.Sends) != 1 || s.Sends[0].To != directory.ShardOf("x") {
		t.Fatalf("start sends %v, want one DeleteObject to the shard", s.Sends)
	}
	if _, ok := s.Sends[0].Msg.(*messages.DeleteObject); !ok {
		t.Fatalf("start sends %T", s.Sends[0].Msg)
	}
	if len(s.Timers) != 1 || s.Timers[0].Msg != (DeleteDeadline{ID: 3}) {
		t.Fatalf("start arms %v", s.Timers)
	}
	return d
}

// deleteAnswer returns the step's DeleteReply to the requester, if any.
func deleteAnswer(t *testing.T, s DeleteStep) (*messages.Error, bool) {
	t.Helper()
	for _, snd := range s.Sends {
		if snd.To == putRequester {
			if !s.Done {
				t.Fatal("answered without being done")
			}
			return snd.Msg.(*messages.DeleteReply).GetError(), true
		}
	}
	if s.Done {
		t.Fatal("done without an answer")
	}
	return nil, false
}

func nodes(ids ...string) []*messages.NodeRef {
	var out []*messages.NodeRef
	for _, id := range ids {
		out = append(out, &messages.NodeRef{NodeId: id})
	}
	return out
}

// A Delete answers only once every other node that held a copy has
// dropped it (or failed); this node's copy goes in place.
func TestDeletionWaitsForEveryDrop(t *testing.T) {
	d := startedDeletion(t)
	s := d.onReply(&messages.DeleteObjectReply{ObjectId: "x", Dropped: nodes("n0", "n1", "n2")})
	if !s.NoteDeleted || !errors.Is(s.DropLocal, messages.ErrDeleted) {
		t.Fatalf("%+v, want the deletion noted and the local copy dropped", s)
	}
	var asked []string
	for _, snd := range s.Sends {
		if _, ok := snd.Msg.(*messages.DropObject); ok {
			asked = append(asked, snd.To.(*messages.NodeRef).GetNodeId())
		}
	}
	if len(asked) != 2 || asked[0] != "n1" || asked[1] != "n2" {
		t.Fatalf("asked %v to drop, want n1 and n2", asked)
	}
	if _, ok := deleteAnswer(t, s); ok {
		t.Fatal("answered before the drops")
	}
	if _, ok := deleteAnswer(t, d.onDropped("n1")); ok {
		t.Fatal("answered with n2 still holding a copy")
	}
	if _, ok := deleteAnswer(t, d.onDropped("n1")); ok { // a duplicate
		t.Fatal("a duplicate drop answered")
	}
	if err, ok := deleteAnswer(t, d.onDropped("n2")); !ok || err != nil {
		t.Fatalf("answer %v %v after every drop, want success", err, ok)
	}
	if s := d.onDeadline(); s.Done || len(s.Sends) != 0 {
		t.Fatalf("deadline after the answer: %+v", s)
	}
}

func TestDeletionSteps(t *testing.T) {
	tests := []struct {
		name  string
		steps func(t *testing.T, d *Deletion) DeleteStep
		want  error // the answer's code; nil for success
	}{
		{"no copies anywhere: success at once", func(t *testing.T, d *Deletion) DeleteStep {
			return d.onReply(&messages.DeleteObjectReply{})
		}, nil},
		{"only this node's copy: success at once", func(t *testing.T, d *Deletion) DeleteStep {
			return d.onReply(&messages.DeleteObjectReply{Dropped: nodes("n0")})
		}, nil},
		{"the shard's error is the answer", func(t *testing.T, d *Deletion) DeleteStep {
			return d.onReply(&messages.DeleteObjectReply{Error: messages.Errorf(messages.ErrorCode_NOT_FOUND, "no")})
		}, messages.ErrNotFound},
		{"no answer from the shard: TIMEOUT", func(t *testing.T, d *Deletion) DeleteStep {
			return d.onDeadline()
		}, messages.ErrTimeout},
		{"the shard stopped: UNAVAILABLE", func(t *testing.T, d *Deletion) DeleteStep {
			return d.onFailed(messages.Errorf(messages.ErrorCode_UNAVAILABLE, "gone"))
		}, messages.ErrUnavailable},
		{"a node that has not dropped its copy by the deadline: TIMEOUT, not success", func(t *testing.T, d *Deletion) DeleteStep {
			// A Get on n1 that begins after an OK could still read its
			// copy until the drop arrives there.
			d.onReply(&messages.DeleteObjectReply{Dropped: nodes("n1", "n2")})
			d.onDropped("n2")
			return d.onDeadline()
		}, messages.ErrTimeout},
		{"a node's failure while dropping counts as dropped", func(t *testing.T, d *Deletion) DeleteStep {
			d.onReply(&messages.DeleteObjectReply{Dropped: nodes("n1")})
			if s := d.onFailed(messages.Errorf(messages.ErrorCode_UNAVAILABLE, "gone")); s.Done {
				t.Fatal("Failed ended a Delete past its shard's answer")
			}
			return d.onDropped("n1")
		}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err, ok := deleteAnswer(t, tc.steps(t, startedDeletion(t)))
			if !ok {
				t.Fatal("no answer")
			}
			if tc.want == nil && err != nil || tc.want != nil && !errors.Is(err, tc.want) {
				t.Fatalf("answer %v, want %v", err, tc.want)
			}
		})
	}
}

// A shard that deleted the object without naming this node has the copy
// this node held at the start dropped (DropHeld): its record of that
// copy may not have reached the shard yet. One that named it has the
// local copy dropped as such, and nothing else.
func TestDeletionDropsTheHeldCopyTheShardDidNotName(t *testing.T) {
	s := startedDeletion(t).onReply(&messages.DeleteObjectReply{ObjectId: "x", Dropped: nodes("n1")})
	if s.DropLocal != nil || !errors.Is(s.DropHeld, messages.ErrDeleted) {
		t.Fatalf("%+v, want the held copy dropped as DELETED and no local drop", s)
	}
	s = startedDeletion(t).onReply(&messages.DeleteObjectReply{ObjectId: "x", Dropped: nodes("n0", "n1")})
	if !errors.Is(s.DropLocal, messages.ErrDeleted) || s.DropHeld != nil {
		t.Fatalf("%+v, want the local copy dropped and no held-copy drop", s)
	}
	s = startedDeletion(t).onReply(&messages.DeleteObjectReply{ObjectId: "x", Error: messages.Errorf(messages.ErrorCode_NOT_FOUND, "no")})
	if s.DropLocal != nil || s.DropHeld != nil {
		t.Fatalf("%+v, want nothing dropped when the shard refused", s)
	}
}
