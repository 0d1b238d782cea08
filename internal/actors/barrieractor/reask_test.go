package barrieractor_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/barrier"
	"github.com/hoplite-go/hoplite/internal/actors/barrieractor"
	"github.com/hoplite-go/hoplite/messages"
)

// lossy is a cluster of bare hosts and one more member whose barrier host
// loses the first request it gets (in transit: a connection that broke
// under load) and answers the rest as a host without the barrier does.
type lossy struct {
	*hosts
	extra *actor.PID
}

func (c *lossy) BarrierHosts(ctx context.Context) ([]barrier.MemberHost, error) {
	hs, err := c.hosts.BarrierHosts(ctx)
	return append(hs, barrier.MemberHost{Member: "lossy", PID: c.extra}), err
}

// New asks every member whether the barrier exists before it creates it;
// one request lost on its way must not fail the create with TIMEOUT at
// its deadline while every member lives: it is asked again (chaos seed
// 14: "create failed with no kill meanwhile: TIMEOUT").
func TestNewAsksAgainWhatWasLost(t *testing.T) {
	h := startHosts(t, 1, barrieractor.HostConfig{})
	var got atomic.Int32
	extra := h.sys.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		if m, ok := ctx.Message().(*messages.BarrierOpen); ok && got.Add(1) > 1 {
			ctx.Respond(&messages.BarrierCreated{Name: m.GetName(), Error: messages.Errorf(messages.ErrorCode_NOT_FOUND, "no barrier %q", m.GetName())})
		}
	}))
	c := &lossy{hosts: h, extra: extra}
	all, _ := c.BarrierHosts(context.Background())
	name := ""
	for i := 0; name == ""; i++ { // a name the real host holds
		if n := fmt.Sprintf("reask-%d", i); barrier.Placement(n, all)[0].Member == "node-0" {
			name = n
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	b, err := barrier.New(ctx, c, name, barrier.Max(1), barrier.Replicas(1))
	if err != nil {
		t.Fatalf("new with one request lost: %v", err)
	}
	b.Stop()
}
