package member

import (
	"fmt"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/internal/actorutil"
)

// child is one actor a node supervisor keeps running.
type child struct {
	name  string
	props *actor.Props
}

// ready is asked of a node supervisor; it answers once its children exist.
type ready struct{}

// hostChild asks a node supervisor to start one more child (a directory
// shard moving here); it answers with the child's PID or an error.
type hostChild struct{ child }

// nodeSupervisor is the root of one node's actors. Children that panic are
// restarted one at a time with a growing delay; a child's restart keeps
// its PID, so peers need not learn a new address.
type nodeSupervisor struct {
	children []child
}

func nodeSupervisorProps(children []child) *actor.Props {
	return actorutil.Props(func() actor.Actor { return &nodeSupervisor{children: children} },
		actor.WithSupervisor(actorutil.Supervision()))
}

func (s *nodeSupervisor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		s.startChildren(ctx)
	case ready:
		ctx.Respond(ready{})
	case hostChild:
		s.host(ctx, m)
	case actor.SystemMessage, actor.AutoReceiveMessage:
	default:
		s.dropped(ctx, m)
	}
}

func (s *nodeSupervisor) startChildren(ctx actor.Context) {
	for _, c := range s.children {
		if _, err := ctx.SpawnNamed(c.props, c.name); err != nil {
			ctx.Logger().Error("node supervisor could not start a child", "child", c.name, "error", err)
		}
	}
}

// host spawns a child asked for later and answers its PID (or the error).
func (s *nodeSupervisor) host(ctx actor.Context, m hostChild) {
	pid, err := ctx.SpawnNamed(m.props, m.name)
	if err != nil {
		ctx.Respond(err)
		return
	}
	ctx.Respond(pid)
}

// dropped logs, rather than silently loses, a message sent to the wrong
// PID (the supervisor instead of one of its children).
func (s *nodeSupervisor) dropped(ctx actor.Context, m any) {
	args := []any{"type", fmt.Sprintf("%T", m)}
	if ctx.Sender() != nil {
		args = append(args, "from", ctx.Sender().String())
	}
	ctx.Logger().Warn("node supervisor dropped an unknown message", args...)
}
