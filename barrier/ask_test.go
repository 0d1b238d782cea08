package barrier_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/barrier"
	"github.com/hoplite-go/hoplite/internal/actors/barrieractor"
	"github.com/hoplite-go/hoplite/internal/barrier/participant"
	"github.com/hoplite-go/hoplite/messages"
)

// slowHosts is a barrier.Cluster of one host that answers the first
// BarrierOpen only once the handle has asked again: an answer slower
// than the handle's re-ask interval, as every answer is on a machine so
// loaded that a round trip takes longer than that.
type slowHosts struct {
	system *actor.ActorSystem
	host   *actor.PID
}

func (c slowHosts) System() *actor.ActorSystem { return c.system }

func (c slowHosts) ParticipantProps(cfg participant.Config) *actor.Props {
	return barrieractor.NewParticipantProps(cfg)
}

func (c slowHosts) BarrierHosts(context.Context) ([]barrier.MemberHost, error) {
	return []barrier.MemberHost{{Member: "m0", PID: c.host}}, nil
}

func TestOpenTakesAnAnswerSlowerThanItsReask(t *testing.T) {
	system := actor.NewActorSystem()
	var first *actor.PID // the sender of the first ask
	asks := 0
	host := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if _, ok := ctx.Message().(*messages.BarrierOpen); !ok {
			return
		}
		asks++
		switch asks {
		case 1:
			first = ctx.Sender()
		case 2: // the re-ask: only now does the first ask's answer go out
			ctx.Send(first, &messages.BarrierCreated{Name: "b",
				Error: messages.Errorf(messages.ErrorCode_NOT_FOUND, "no barrier %q here", "b")})
		}
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := barrier.Open(ctx, slowHosts{system: system, host: host}, "b")
	if !errors.Is(err, messages.ErrNotFound) {
		t.Fatalf("Open: %v; want the host's answer NOT_FOUND, which came after the handle asked again", err)
	}
}
