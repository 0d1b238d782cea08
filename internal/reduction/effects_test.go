package reduction

import (
	"github.com/hoplite-go/hoplite/messages"
)

// The tests read a step's outbox through these views, in the core's
// terms: which tasks went to which node, what the requester got, and so on.

// Tasks are the ReduceTasks sent, alone or in a ReduceTaskBatch, with
// their nodes, in the order they were sent.
func (fx Effects) Tasks() []Task {
	var out []Task
	for _, s := range fx.Sends {
		switch m := s.Msg.(type) {
		case *messages.ReduceTask:
			out = append(out, Task{Node: s.To.(*messages.NodeRef), Task: m})
		case *messages.ReduceTaskBatch:
			ts, err := BatchTasks(m)
			if err != nil {
				panic(err)
			}
			for _, t := range ts {
				out = append(out, Task{Node: s.To.(*messages.NodeRef), Task: t})
			}
		}
	}
	return out
}

// Watched are the nodes the step asks the shell to watch, in order.
func (fx Effects) Watched() []*messages.NodeRef {
	out := make([]*messages.NodeRef, 0, len(fx.Watch))
	for _, w := range fx.Watch {
		out = append(out, w.(*messages.NodeRef))
	}
	return out
}

// isTasks reports whether msg carries tasks (a ReduceTask or a batch).
func isTasks(msg any) bool {
	switch msg.(type) {
	case *messages.ReduceTask, *messages.ReduceTaskBatch:
		return true
	}
	return false
}

// Invalidate are the ReduceInvalidates sent, as tasks naming a position
// and generation.
func (fx Effects) Invalidate() []Task {
	var out []Task
	for _, s := range fx.Sends {
		if m, ok := s.Msg.(*messages.ReduceInvalidate); ok {
			out = append(out, Task{Node: s.To.(*messages.NodeRef), Task: &messages.ReduceTask{ReduceId: m.GetReduceId(),
				Position: m.GetPosition(), Generation: m.GetGeneration()}})
		}
	}
	return out
}

// StoreInline is the StoreReduced sent to the caller's node (a Reduce)
// or to the target's member's (an AllReduce that pushes its result), if
// any.
func (fx Effects) StoreInline() *messages.StoreReduced {
	for _, s := range fx.Sends {
		if m, ok := s.Msg.(*messages.StoreReduced); ok {
			switch s.To.(type) {
			case CallerNode, TargetNode:
				return m
			}
		}
	}
	return nil
}

// StoredAt is where the StoreReduced went (nil: none was sent).
func (fx Effects) StoredAt() any {
	for _, s := range fx.Sends {
		if _, ok := s.Msg.(*messages.StoreReduced); ok {
			return s.To
		}
	}
	return nil
}

// Fetch are the nodes asked to Get the result.
func (fx Effects) Fetch() []*messages.NodeRef {
	var out []*messages.NodeRef
	for _, s := range fx.Sends {
		if _, ok := s.Msg.(*messages.Get); ok {
			out = append(out, s.To.(*messages.NodeRef))
		}
	}
	return out
}

// Reply is the ReduceReply sent to the requester, if any.
func (fx Effects) Reply() *messages.ReduceReply {
	for _, s := range fx.Sends {
		if m, ok := s.Msg.(*messages.ReduceReply); ok {
			if _, req := s.To.(Requester); req {
				return m
			}
		}
	}
	return nil
}

// Release are the nodes told the Reduce is over.
func (fx Effects) Release() []*messages.NodeRef {
	var out []*messages.NodeRef
	for _, s := range fx.Sends {
		if _, ok := s.Msg.(*messages.ReduceRelease); ok {
			out = append(out, s.To.(*messages.NodeRef))
		}
	}
	return out
}

// ReleaseKeep reports whether a ReduceRelease kept the target.
func (fx Effects) ReleaseKeep() bool {
	for _, s := range fx.Sends {
		if m, ok := s.Msg.(*messages.ReduceRelease); ok && m.GetKeepTarget() {
			return true
		}
	}
	return false
}

// ReleaseTarget reports whether the target shard was told to free the
// target.
func (fx Effects) ReleaseTarget() bool {
	for _, s := range fx.Sends {
		if _, ok := s.Msg.(*messages.ReleaseTarget); ok {
			if _, shard := s.To.(TargetShard); shard {
				return true
			}
		}
	}
	return false
}
