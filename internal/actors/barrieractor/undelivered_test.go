package barrieractor_test

import (
	"context"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/barrier"
	"github.com/hoplite-go/hoplite/internal/actors/barrieractor"
	"github.com/hoplite-go/hoplite/internal/barrier/replica"
	"github.com/hoplite-go/hoplite/messages"
)

// goneParticipant stands for a participant that is gone when its
// release comes but whose Terminated has not reached the manager (a
// watch across actor systems can be slower than the fire): it swallows
// the manager's watch and hands every message to the dead letters.
type goneParticipant struct{ sys *actor.ActorSystem }

func (p goneParticipant) SendUserMessage(pid *actor.PID, m any) {
	p.sys.DeadLetter.SendUserMessage(pid, m)
}
func (goneParticipant) SendSystemMessage(*actor.PID, any) {}
func (goneParticipant) Stop(*actor.PID)                   {}

// The release of a participant that is gone comes back as a dead letter,
// and the manager reports that participant's label failed: the dead
// letter must say whom the release was for.
func TestReleaseToAGoneParticipantIsReported(t *testing.T) {
	const name = "gone"
	h := startHosts(t, 1, barrieractor.HostConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	failures := make(chan barrier.Failure, 4)
	b, err := barrier.New(ctx, h, name, barrier.Max(2), barrier.OnFailure(func(f barrier.Failure) { failures <- f }))
	if err != nil {
		t.Fatal(err)
	}
	gone, ok := h.sys.ProcessRegistry.Add(goneParticipant{h.sys}, "gone-participant")
	if !ok {
		t.Fatal("gone-participant registered twice")
	}
	manager := actor.NewPID(h.sys.Address(), h.pids["node-0"].GetId()+"/"+barrieractor.ChildName(name))
	h.sys.Root.RequestWithCustomSender(manager, &messages.BarrierEnter{Name: name, Label: "a", Host: "far", RequestId: 1}, gone)
	if _, err := b.Enter(ctx, "b"); err != nil { // the second entry fires
		t.Fatal(err)
	}
	select {
	case f := <-failures:
		if f.Label != "a" || f.Host != "far" || f.Reason != replica.ReasonGone {
			t.Fatalf("failure %+v, want label a of host far, %q", f, replica.ReasonGone)
		}
	case <-ctx.Done():
		t.Fatal("the release to a gone participant was not reported")
	}
}
