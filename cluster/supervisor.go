package cluster

import (
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// child is one actor a node supervisor keeps running.
type child struct {
	name  string
	props *actor.Props
}

// ready is asked of a node supervisor; it answers once its children exist.
type ready struct{}

// nodeSupervisor is the root of one node's actors. Children that panic are
// restarted one at a time with a growing delay; a child's restart keeps
// its PID, so peers need not learn a new address.
type nodeSupervisor struct {
	children []child
}

func nodeSupervisorProps(children []child) *actor.Props {
	strategy := actor.NewExponentialBackoffStrategy(10*time.Second, 10*time.Millisecond)
	return actor.PropsFromProducer(func() actor.Actor { return &nodeSupervisor{children: children} },
		actor.WithSupervisor(strategy))
}

func (s *nodeSupervisor) Receive(ctx actor.Context) {
	switch ctx.Message().(type) {
	case *actor.Started:
		for _, c := range s.children {
			if _, err := ctx.SpawnNamed(c.props, c.name); err != nil {
				ctx.Logger().Error("node supervisor could not start a child", "child", c.name, "error", err)
			}
		}
	case ready:
		ctx.Respond(ready{})
	}
}
