package reduction

import (
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/messages"
)

// feedSim steps a Reduction together with the real directory table of
// its sources (one table stands for every shard), so that what the
// coordinator is told about a source is what the directory says, in the
// order a run can produce it. Only Subscribe reaches the table from the
// Reduction; the table's LocationUpdates come back to it at once.
type feedSim struct {
	tb  *directory.LocationTable
	r   *Reduction
	now time.Time
	// unreachable: sources whose shard the coordinator cannot reach for
	// now (it moved with a dead node and waits for its store nodes'
	// republications): their Subscribes are lost.
	unreachable map[string]bool
	tasks       []Task
	reply       *messages.ReduceReply
}

const feedCoordinator = "coordinator"

func (s *feedSim) apply(fx Effects) {
	for _, send := range fx.Sends {
		switch m := send.Msg.(type) {
		case *messages.Subscribe:
			if !s.unreachable[m.GetObjectId()] {
				s.deliver(s.tb.Step(s.now, directory.Subscribe{Req: m, Key: feedCoordinator, To: feedCoordinator}).Sends)
			}
		case *messages.ReduceReply:
			s.reply = m
		}
	}
	s.tasks = append(s.tasks, fx.Tasks()...)
}

// deliver hands the coordinator what the table sent it.
func (s *feedSim) deliver(out []outbox.Send) {
	for _, send := range out {
		if u, ok := send.Msg.(*messages.LocationUpdate); ok && send.To == feedCoordinator {
			s.apply(s.r.Step(s.now, u))
		}
	}
}

// rootTask is the newest task of the root position.
func (s *feedSim) rootTask() *Task {
	for i := len(s.tasks) - 1; i >= 0; i-- {
		if s.tasks[i].Task.GetRoot() {
			return &s.tasks[i]
		}
	}
	return nil
}

// A Reduce of 1 of [s0 s1] must not wait on, or fail with, a source whose
// only copy is a receiver's partial copy that lost its sender: the copy
// cannot grow, while s0 is whole on a live node. Chaos seed 93 under load
// (1 of 7 runs of the full suite): s1's creator n11 died while n6 was
// fetching s1 from it, n6 located again naming n11 before the shard heard
// of the failure (so s1 was not marked lost), and the directory kept n6's
// partial copy as s1's location. The coordinator, which had not seen s0
// yet (s0's shard had moved with n11), placed s1 at the root on n6; s0
// came later and stayed a backup. n6's fetch gave up at its Get's
// deadline, eight seconds on, and the root's worker reported that TIMEOUT
// ("no location") before the directory said n6's copy was gone, so the
// Reduce failed.
//
// The coordinator learns the first of s1's locations either before n11
// failed (it subscribed early) or after (it subscribed, or resubscribed,
// late); both orders must end with s0 reduced.
func TestSourceOnlyOnAReceiverThatLostItsSenderDoesNotHoldTheReduce(t *testing.T) {
	for _, early := range []bool{true, false} {
		name := "subscribed after the sender failed"
		if early {
			name = "subscribed before the sender failed"
		}
		t.Run(name, func(t *testing.T) {
			s := &feedSim{tb: directory.NewLocationTable(directory.TableConfig{}), now: t0,
				unreachable: map[string]bool{"s0": true}}
			req := request([]string{"s0", "s1"}, 1)
			req.Op = messages.ReduceOp_MAX
			s.r = newRed(req, Config{})
			n6, n7, n11 := node(6), node(7), node(11)
			begin := func() { s.apply(s.r.Step(s.now, Begin{})) }
			if early {
				begin()
			}
			// s1 is Put on n11; n6's Get, parked before, streams from it.
			s.deliver(s.tb.Step(s.now, directory.Create{Req: &messages.CreateObject{ObjectId: "s1", Size: bigSize, Fingerprint: 7, Creator: n11}, ReplyTo: "put"}).Sends)
			out := s.tb.Step(s.now, directory.Locate{Req: &messages.Locate{ObjectId: "s1", Receiver: n6, TimeoutMs: 8000, Attempt: 1}, ReplyTo: "n6 fetch"}).Sends
			s.deliver(out)
			if lr := locateReply(t, out, "n6 fetch"); lr.GetSender().GetNodeId() != "n11" {
				t.Fatalf("n6 fetches s1 from %v, want n11", lr.GetSender())
			}
			// n11 dies. n6's fetch sees its sender terminate and
			// locates again, naming it, before the shard learns of the
			// failure; the coordinator learns it from its own watch.
			s.now = s.now.Add(10 * time.Millisecond)
			out = s.tb.Step(s.now, directory.Locate{Req: &messages.Locate{ObjectId: "s1", Receiver: n6, TimeoutMs: 8000, Attempt: 2, FailedSender: n11}, ReplyTo: "n6 fetch"}).Sends
			if len(out) > 0 {
				s.deliver(out)
			}
			if early {
				s.apply(s.r.Step(s.now, NodeFailed{Node: "n11"}))
			} else {
				begin()
			}
			s.deliver(s.tb.Step(s.now, directory.NodeFailed{Node: "n11"}).Sends)
			// A renewal while s0's shard is still rebuilding.
			s.now = s.now.Add(DefaultResubscribe)
			s.apply(s.r.Step(s.now, ResubscribeTimer{}))
			// s0's shard is back (n7 republished it): the next renewal
			// finds s0, whole on n7.
			s.now = s.now.Add(DefaultResubscribe)
			delete(s.unreachable, "s0")
			s.tb.Step(s.now, directory.Create{Req: &messages.CreateObject{ObjectId: "s0", Size: bigSize, Fingerprint: 9, Creator: n7}, ReplyTo: "put"})
			s.tb.Step(s.now, &messages.PublishLocation{ObjectId: "s0", Node: n7, State: messages.LocationState_COMPLETE, Size: bigSize, Fingerprint: 9, Creator: true})
			s.apply(s.r.Step(s.now, ResubscribeTimer{}))

			root := s.rootTask()
			if root == nil {
				t.Fatalf("no root task; tasks %v", s.tasks)
			}
			if root.Task.GetSourceId() != "s0" || root.Node.GetNodeId() != "n7" {
				// The root holds s1 on n6, whose copy cannot grow: the
				// Reduce waits until n6's fetch gives up, and its worker's
				// failure ends it.
				s.now = s.now.Add(8 * time.Second)
				var failed messages.ReduceTaskDone
				failed.ReduceId, failed.Position, failed.Generation = testReduceID, root.Task.GetPosition(), root.Task.GetGeneration()
				failed.Error = messages.Errorf(messages.ErrorCode_TIMEOUT, "object %q: no location before the deadline", "s1")
				s.apply(s.r.Step(s.now, &failed))
				s.deliver(s.tb.Step(s.now, directory.Tick{At: s.now}).Sends)
				s.deliver(s.tb.Step(s.now, &messages.FetchAborted{ObjectId: "s1", Receiver: n6}).Sends)
				t.Fatalf("the root reduces %s on %s, a copy that cannot grow, while s0 is whole on n7; the Reduce ended with %v",
					root.Task.GetSourceId(), root.Node.GetNodeId(), s.reply)
			}
			fx := s.r.Step(s.now, &messages.ReduceTaskDone{ReduceId: testReduceID, Position: root.Task.GetPosition(), Generation: root.Task.GetGeneration()})
			s.apply(fx)
			if s.reply == nil || s.reply.GetError() != nil || !slices.Equal(s.reply.GetReducedIds(), []string{"s0"}) {
				t.Fatalf("reply %v, want s0 reduced", s.reply)
			}
		})
	}
}

func locateReply(t *testing.T, out []outbox.Send, to any) *messages.LocateReply {
	t.Helper()
	for _, s := range out {
		if lr, ok := s.Msg.(*messages.LocateReply); ok && s.To == to {
			if err := messages.ErrOrNil(lr.GetError()); err != nil && !errors.Is(err, messages.ErrTimeout) {
				t.Fatalf("Locate answered %v", err)
			}
			return lr
		}
	}
	t.Fatalf("no LocateReply to %v in %v", to, out)
	return nil
}
