package barrier_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/barrier"
	"github.com/hoplite-go/hoplite/internal/actors/barrieractor"
	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/barrier/participant"
	"github.com/hoplite-go/hoplite/messages"
)

// hostList is a Cluster of barrier hosts in one actor system.
type hostList struct {
	system *actor.ActorSystem
	hosts  []barrier.MemberHost
}

func (h *hostList) System() *actor.ActorSystem { return h.system }

func (h *hostList) ParticipantProps(cfg participant.Config) *actor.Props {
	return barrieractor.NewParticipantProps(cfg)
}

func (h *hostList) BarrierHosts(context.Context) ([]barrier.MemberHost, error) { return h.hosts, nil }

// New has the backups created itself: a primary that died right after it
// answered may never have sent its own requests, and the barrier would
// then have no replica left to take over (Status after the primary's
// death timed out: TestCloseAfterTakeoverWaitsOnlyForLiveReplicas failed
// so in a few runs of a hundred). Here the primary answers and creates
// nothing; both backups exist when New returns.
func TestNewCreatesTheBackupsItself(t *testing.T) {
	system := actor.NewActorSystem()
	t.Cleanup(system.Shutdown)
	const name = "made-by-the-handle"
	c := &hostList{system: system}
	for i := range 3 {
		c.hosts = append(c.hosts, barrier.MemberHost{Member: fmt.Sprintf("m%d", i)})
	}
	placed := barrier.Placement(name, c.hosts)
	log := logrus.New()
	log.SetLevel(logrus.ErrorLevel)
	for i := range c.hosts {
		props := barrieractor.NewHostProps(barrieractor.HostConfig{Log: logrus.NewEntry(log)})
		if c.hosts[i].Member == placed[0].Member {
			// A primary that answers and dies before it creates anything.
			props = actor.PropsFromFunc(func(ctx actor.Context) {
				switch m := ctx.Message().(type) {
				case *messages.BarrierOpen:
					ctx.Respond(&messages.BarrierCreated{Name: m.GetName(), Error: messages.Errorf(messages.ErrorCode_NOT_FOUND, "no barrier %q", m.GetName())})
				case *messages.BarrierCreate:
					ctx.Respond(&messages.BarrierCreated{Name: m.GetName(), Options: m.GetOptions(), Replicas: m.GetReplicas(), ReplicaMembers: m.GetReplicaMembers()})
				}
			})
		}
		c.hosts[i].PID = system.Root.Spawn(props)
	}
	placed = barrier.Placement(name, c.hosts)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	b, err := barrier.New(ctx, c, name, barrier.Max(2), barrier.Replicas(3))
	if err != nil {
		t.Fatal(err)
	}
	defer b.Stop()
	for _, h := range placed[1:] {
		res, err := actorutil.Request(ctx, system.Root, h.PID, &messages.BarrierOpen{Name: name})
		if err != nil {
			t.Fatalf("open on %s: %v", h.Member, err)
		}
		if c, ok := res.(*messages.BarrierCreated); !ok || c.GetError() != nil || !c.GetExisted() {
			t.Fatalf("backup host %s answers %v: it has no replica", h.Member, res)
		}
	}
}
