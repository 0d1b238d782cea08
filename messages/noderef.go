package messages

import "github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

// PID is the store node actor this NodeRef names.
func (n *NodeRef) PID() *actor.PID {
	return actor.NewPID(n.GetAddress(), n.GetActorId())
}
