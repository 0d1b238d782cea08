package member

import (
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
)

// Spawn starts an application actor in this member's own actor system.
// That is where an application actor is fast: a Put, Get or Reduce it
// sends to StoreNode is a pointer hand-off, and the bytes of a Get's
// reply are the store's own (read-only with Get.read_only) or one copy;
// an actor in another actor system, even in the same process, sends
// every message, bytes and all, through Proto.Actor remote (gRPC). Its
// EventStream carries this member's recovery events. The actor stops
// with the member.
func (m *Member) Spawn(props *actor.Props) *actor.PID { return m.system.Root.Spawn(props) }

// SpawnNamed is Spawn with a name, unique in the member's actor system.
func (m *Member) SpawnNamed(props *actor.Props, name string) (*actor.PID, error) {
	return m.system.Root.SpawnNamed(props, name)
}
