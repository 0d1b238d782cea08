package actorutil

import (
	"strings"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
)

// Senders are the sender PIDs an actor's requests go out with, one per
// target, so that the actor learns which target a DeadLetterResponse is
// about. Proto.Actor's dead letter process answers a request to an actor
// that is not running with an empty DeadLetterResponse: an actor with
// requests out to many targets (a store node's shards and peers, a
// barrier manager's participants) could not tell which one was gone. A
// target's sender is a process in the actor system's registry (so an
// answer from another member reaches it through the remote as one from
// this system does) that passes every message on to the actor, with its
// original sender, and names the target in a DeadLetterResponse that
// names none.
//
// Senders belong to one actor and are used in its Receive only. Close
// them when the actor stops; Forget a target that is gone for good. The
// zero value is ready to use.
type Senders struct {
	system   *actor.ActorSystem
	byTarget map[string]*actor.PID
}

// Request sends msg to target as a request from ctx's actor: the answer,
// or the DeadLetterResponse naming target, comes to ctx.Self().
func (s *Senders) Request(ctx actor.Context, target *actor.PID, msg any) {
	ctx.RequestWithCustomSender(target, msg, s.For(ctx, target))
}

// For is the sender of ctx's actor's requests to target.
func (s *Senders) For(ctx actor.Context, target *actor.PID) *actor.PID {
	key := Key(target)
	if pid := s.byTarget[key]; pid != nil {
		return pid
	}
	if s.byTarget == nil {
		s.byTarget = map[string]*actor.PID{}
	}
	s.system = ctx.ActorSystem()
	owner := ctx.Self()
	reg := s.system.ProcessRegistry
	pid, _ := reg.Add(&relay{root: s.system.Root, owner: owner, target: target}, owner.GetId()+"/sender"+reg.NextId())
	s.byTarget[key] = pid
	return pid
}

// SentBy reports whether sender, the sender of a message, is owner or
// one of owner's Senders (a request's answer goes to the latter).
func SentBy(sender, owner *actor.PID) bool {
	if sender == nil || owner == nil || sender.GetAddress() != owner.GetAddress() {
		return false
	}
	id := sender.GetId()
	return id == owner.GetId() || strings.HasPrefix(id, owner.GetId()+"/sender")
}

// Forget removes target's sender: an answer still on its way to it goes
// to the dead letters.
func (s *Senders) Forget(target *actor.PID) {
	key := Key(target)
	if pid := s.byTarget[key]; pid != nil {
		s.system.ProcessRegistry.Remove(pid)
		delete(s.byTarget, key)
	}
}

// Close removes every sender.
func (s *Senders) Close() {
	for key, pid := range s.byTarget {
		s.system.ProcessRegistry.Remove(pid)
		delete(s.byTarget, key)
	}
}

// Len is the number of senders registered.
func (s *Senders) Len() int { return len(s.byTarget) }

// relay is one target's sender.
type relay struct {
	root   *actor.RootContext
	owner  *actor.PID
	target *actor.PID
}

var _ actor.Process = (*relay)(nil)

// SendUserMessage implements actor.Process: msg goes on to the owner as
// it came (an envelope keeps its sender and headers).
func (r *relay) SendUserMessage(_ *actor.PID, message any) {
	if dl, ok := actor.UnwrapEnvelopeMessage(message).(*actor.DeadLetterResponse); ok && dl.GetTarget() == nil {
		message = &actor.DeadLetterResponse{Target: r.target}
	}
	r.root.Send(r.owner, message)
}

// SendSystemMessage implements actor.Process. Nothing watches a sender
// (its owner's requests watch their targets, not the reverse), so system
// messages are dropped.
func (*relay) SendSystemMessage(*actor.PID, any) {}

// Stop implements actor.Process: a sender ends with Forget or Close.
func (*relay) Stop(*actor.PID) {}
