package cluster

import (
	"context"
	"fmt"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/barrier"
	"github.com/hoplite-go/hoplite/internal/actors/barrieractor"
	"github.com/hoplite-go/hoplite/internal/barrier/participant"
	"github.com/hoplite-go/hoplite/internal/member"
	"github.com/hoplite-go/hoplite/messages"
)

// Every member hosts barrier managers (node#<nonce>/barriers); package
// barrier places a barrier's replicas on the live members by rendezvous
// hashing of its name. The three ways of reaching a cluster (a Member
// itself, and Local and BarrierClient below) give it the live members'
// hosts, each its incarnation's.

// ParticipantProps is a barrier handle's participant actor
// (barrier.Cluster).
func (c *BarrierClient) ParticipantProps(cfg participant.Config) *actor.Props {
	return barrieractor.NewParticipantProps(cfg)
}

// BarrierClient reaches the barriers of a process cluster from an actor
// system outside it (a tool, a test, an application process that is not
// a member): it learns the live members from the first seed member that
// answers.
type BarrierClient struct {
	system *actor.ActorSystem
	seeds  []string // member actor system addresses (host:port)
}

// NewBarrierClient returns a barrier.Cluster of the members reachable
// through seeds, for system (which must have Proto.Actor remote started).
func NewBarrierClient(system *actor.ActorSystem, seeds ...string) *BarrierClient {
	return &BarrierClient{system: system, seeds: seeds}
}

// System is the client's actor system (barrier.Cluster).
func (c *BarrierClient) System() *actor.ActorSystem { return c.system }

// BarrierHosts asks the seeds, in order, for their live members
// (barrier.Cluster); UNAVAILABLE if none answers before ctx ends.
func (c *BarrierClient) BarrierHosts(ctx context.Context) ([]barrier.MemberHost, error) {
	var last error = fmt.Errorf("no seed")
	for _, seed := range c.seeds {
		d := 2 * time.Second
		if dl, ok := ctx.Deadline(); ok {
			d = min(d, time.Until(dl))
		}
		if d <= 0 {
			break
		}
		res, err := c.system.Root.RequestFuture(member.HelloPID(seed),
			&messages.MemberHello{ProtocolVersion: member.ProtocolVersion}, d).Result()
		if err != nil {
			last = fmt.Errorf("%s: %w", seed, err)
			continue
		}
		r, ok := res.(*messages.MemberHelloReply)
		if !ok || len(r.GetViewStores()) != len(r.GetView()) {
			last = fmt.Errorf("%s: unexpected reply %T", seed, res)
			continue
		}
		out := make([]barrier.MemberHost, len(r.GetView()))
		for i, id := range r.GetView() {
			out[i] = barrier.MemberHost{Member: id, PID: member.BarrierHostOf(r.GetViewStores()[i])}
		}
		return out, nil
	}
	return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "no seed member answered: %v", last)
}
