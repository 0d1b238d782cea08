package remote

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
)

// Hoplite patch (this whole file): a request sent to another process is
// answered even if that process dies before it answers. The sender's
// system remembers each request of a type registered with
// actor.SetRequestReplies, with a sender in this system, from its send
// until its reply comes back; when the target's address terminates
// (its connection broke, or the program published an
// EndpointTerminatedEvent on its own failure detection) it answers every
// request still remembered for that address with the registered
// undeliverable reply. Upstream answered nothing: a requester that did
// not watch its target waited for good. Messages within one process never
// come here, so the in-process path pays nothing.

// Bounds on what is remembered. A request is forgotten a little after
// its own deadline (its target answers TIMEOUT by then), or after
// pendingDefaultWait if it names none; past maxPending requests at once,
// new ones are not remembered (they are answered as upstream answered
// them: not at all if the target dies).
const (
	pendingGrace       = 2 * time.Second
	pendingDefaultWait = 5 * time.Minute
	pendingMaxWait     = time.Hour
	maxPending         = 1 << 16
	pendingSweepEvery  = time.Second
)

// localAddress is Proto.Actor's address of a PID of its own process
// (actor/process_registry.go).
const localAddress = "nonhost"

// pendingKey is what a reply is matched on: the requester (a process in
// this system, by id) and the request's key.
type pendingKey struct {
	sender string
	key    actor.ReplyKey
}

// pendingRequest is one request sent and not yet answered (or, answered
// by this system, one whose late reply from its target is dropped).
type pendingRequest struct {
	address  string // the target's
	target   *actor.PID
	sender   *actor.PID
	request  interface{}
	deadline time.Time
	answered bool // by this system: the target's own reply is dropped
}

// pendingRequests is the requests of one Remote that wait for replies.
// A nil one (a Remote built without NewRemote) remembers nothing.
type pendingRequests struct {
	system *actor.ActorSystem
	count  atomic.Int64 // len of every list in byKey, read without the lock

	mu        sync.Mutex
	byKey     map[pendingKey][]*pendingRequest
	nextSweep time.Time
}

func newPendingRequests(system *actor.ActorSystem) *pendingRequests {
	return &pendingRequests{system: system, byKey: map[pendingKey][]*pendingRequest{}}
}

// isLocal says whether pid is a process of this system.
func (p *pendingRequests) isLocal(pid *actor.PID) bool {
	return pid.GetAddress() == p.system.Address() || pid.GetAddress() == localAddress
}

// sent remembers a request about to go to target's address, if its type
// is registered and its sender is in this system.
func (p *pendingRequests) sent(target *actor.PID, message interface{}, sender *actor.PID) {
	if p == nil || sender == nil || !p.isLocal(sender) {
		return
	}
	r := actor.GetRequestReplies()
	if r == nil || r.Request == nil {
		return
	}
	key, wait, ok := r.Request(message)
	if !ok {
		return
	}
	if wait <= 0 {
		wait = pendingDefaultWait
	}
	now := time.Now()
	req := &pendingRequest{address: target.GetAddress(), target: target, sender: sender, request: message,
		deadline: now.Add(min(wait, pendingMaxWait) + pendingGrace)}
	k := pendingKey{sender: sender.GetId(), key: key}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.sweepLocked(now)
	if p.count.Load() >= maxPending {
		return
	}
	list := p.byKey[k]
	// A request again after this system answered one of the same key
	// at the same address: its reply is the one to deliver, so the old
	// one's late reply is no longer dropped.
	for i, old := range list {
		if old.answered && old.address == req.address {
			list = removeAt(list, i)
			p.count.Add(-1)
			break
		}
	}
	p.byKey[k] = append(list, req)
	p.count.Add(1)
}

// replied reports whether message, arriving from address for target (a
// process of this system), is to be dropped: the reply of a request that
// this system has already answered. Otherwise it forgets the request the
// reply answers: the oldest of its key sent to address, else the oldest
// unanswered one sent anywhere (a store node hands a QueryObject to the
// directory shard, which answers from its own process).
func (p *pendingRequests) replied(address string, target *actor.PID, message interface{}) (drop bool) {
	if p == nil || p.count.Load() == 0 {
		return false
	}
	r := actor.GetRequestReplies()
	if r == nil || r.Reply == nil {
		return false
	}
	key, ok := r.Reply(message)
	if !ok {
		return false
	}
	k := pendingKey{sender: target.GetId(), key: key}
	p.mu.Lock()
	defer p.mu.Unlock()
	list := p.byKey[k]
	i := -1
	for j, req := range list {
		if req.address == address {
			i = j
			break
		}
	}
	if i < 0 {
		// From another process (the target handed the request on): the
		// oldest unanswered request; if this system answered them all,
		// the reply comes too late and is dropped.
		for j, req := range list {
			if !req.answered {
				i = j
				break
			}
		}
		if i < 0 && len(list) > 0 {
			i = 0
		}
	}
	if i < 0 {
		return false
	}
	drop = list[i].answered
	p.forgetLocked(k, list, i)
	return drop
}

// undelivered answers a request that a writer dropped unsent (its
// connection never came up) with its undeliverable reply, and forgets
// it; false if its type has none (the caller answers as upstream did).
// A request the termination of its address answered already (the
// writer publishes the termination before it drops its messages) is
// only forgotten.
func (p *pendingRequests) undelivered(target *actor.PID, message interface{}, sender *actor.PID) bool {
	if p == nil || sender == nil {
		return false
	}
	reply, ok := actor.UndeliverableReply(message, target, actor.WhyUnreachable)
	if !ok {
		return false
	}
	return p.answerDropped(target, message, sender, reply)
}

// tooLarge answers a request the writer did not send because, encoded,
// it is past the remote's message limit (Config.MaxMessageSize), and
// forgets it; false if its type has no such reply.
func (p *pendingRequests) tooLarge(target *actor.PID, message interface{}, sender *actor.PID, size, limit int) bool {
	if p == nil || sender == nil {
		return false
	}
	reply, ok := actor.TooLargeReply(message, target, size, limit)
	if !ok {
		return false
	}
	return p.answerDropped(target, message, sender, reply)
}

// answerDropped answers a request its writer dropped with reply, once.
func (p *pendingRequests) answerDropped(target *actor.PID, message interface{}, sender *actor.PID, reply interface{}) bool {
	if p.count.Load() > 0 {
		if r := actor.GetRequestReplies(); r != nil && r.Request != nil {
			if key, _, ok := r.Request(message); ok {
				k := pendingKey{sender: sender.GetId(), key: key}
				p.mu.Lock()
				list := p.byKey[k]
				i := -1
				for j, req := range list {
					if req.address == target.GetAddress() && (i < 0 || list[i].answered && !req.answered) {
						i = j
					}
				}
				answered := false
				if i >= 0 {
					answered = list[i].answered
					p.forgetLocked(k, list, i)
				}
				p.mu.Unlock()
				if answered {
					return true
				}
			}
		}
	}
	p.system.Root.Send(sender, reply)
	return true
}

// handedToRemoved answers a request that was handed to an endpoint
// removed meanwhile, if nothing answered it yet. Its address terminated
// as it was sent: the termination may have answered the requests it
// knew before this one was remembered, and the writer may have stopped
// before it got this one. It stays remembered as answered, in case the
// writer sent it after all.
func (p *pendingRequests) handedToRemoved(target *actor.PID, message interface{}, sender *actor.PID) {
	if p == nil || sender == nil || p.count.Load() == 0 {
		return
	}
	r := actor.GetRequestReplies()
	if r == nil || r.Request == nil {
		return
	}
	key, _, ok := r.Request(message)
	if !ok {
		return
	}
	k := pendingKey{sender: sender.GetId(), key: key}
	var req *pendingRequest
	p.mu.Lock()
	for _, q := range p.byKey[k] {
		if q.address == target.GetAddress() && !q.answered {
			req = q // the last one: this request
		}
	}
	if req != nil {
		req.answered = true
	}
	p.mu.Unlock()
	if req == nil {
		return
	}
	if reply, ok := actor.UndeliverableReply(message, target, actor.WhyFailedBefore); ok {
		p.system.Root.Send(sender, reply)
	}
}

// terminated answers every request remembered for address, and drops
// their targets' replies should any still arrive.
func (p *pendingRequests) terminated(address string) {
	if p == nil || p.count.Load() == 0 {
		return
	}
	var answer []*pendingRequest
	p.mu.Lock()
	for _, list := range p.byKey {
		for _, req := range list {
			if req.address == address && !req.answered {
				req.answered = true
				answer = append(answer, req)
			}
		}
	}
	p.mu.Unlock()
	for _, req := range answer {
		if reply, ok := actor.UndeliverableReply(req.request, req.target, actor.WhyFailedBefore); ok {
			p.system.Root.Send(req.sender, reply)
		}
	}
}

// forgetLocked removes list[i], the list of k.
func (p *pendingRequests) forgetLocked(k pendingKey, list []*pendingRequest, i int) {
	list = removeAt(list, i)
	if len(list) == 0 {
		delete(p.byKey, k)
	} else {
		p.byKey[k] = list
	}
	p.count.Add(-1)
}

// sweepLocked forgets the requests past their deadlines, at most once per
// pendingSweepEvery.
func (p *pendingRequests) sweepLocked(now time.Time) {
	if now.Before(p.nextSweep) {
		return
	}
	p.nextSweep = now.Add(pendingSweepEvery)
	for k, list := range p.byKey {
		kept := list[:0]
		for _, req := range list {
			if now.Before(req.deadline) {
				kept = append(kept, req)
			}
		}
		p.count.Add(int64(len(kept) - len(list)))
		clear(list[len(kept):])
		if len(kept) == 0 {
			delete(p.byKey, k)
		} else {
			p.byKey[k] = kept
		}
	}
}

func removeAt(list []*pendingRequest, i int) []*pendingRequest {
	copy(list[i:], list[i+1:])
	list[len(list)-1] = nil
	return list[:len(list)-1]
}
