package actorutil

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/internal/membername"
	"github.com/hoplite-go/hoplite/messages"
)

// Request sends msg to pid and waits for the reply until ctx ends. It
// watches pid while it waits: an actor that stops before answering (a
// directory shard on a node that was killed, a store node that left)
// fails the request with UNAVAILABLE, at once in this process and within
// RemoteWatchDelay of its stop on another member. (An unwatched future would
// wait for its whole deadline, since a stopped actor's mailbox is dropped
// without a reply; the caller would hang although it could have retried
// at the shard's new home at once.)
func Request(ctx context.Context, root *actor.RootContext, pid *actor.PID, msg any) (any, error) {
	return RequestOrAbandon(ctx, root, pid, msg, nil)
}

// RequestOrAbandon is Request; if ctx ends before the reply, abandon (when
// set) is called with the PID the reply was to go to, so that the caller
// can withdraw exactly this request where pid keeps requests waiting (a
// directory shard parks a Locate until the object exists).
func RequestOrAbandon(ctx context.Context, root *actor.RootContext, pid *actor.PID, msg any, abandon func(replyTo *actor.PID)) (any, error) {
	return request(ctx, root, pid, msg, abandon, 0, 0, false, false)
}

// RequestGrace is Request for a target that answers by the deadline
// itself (a store node's TIMEOUT names what it waited for: the sources
// that never arrived, the object nobody located): once ctx ends it waits
// up to grace more for that answer, which a busy machine can deliver a
// little late, rather than replace it with "no reply". The call then
// returns at most grace after its deadline.
func RequestGrace(ctx context.Context, root *actor.RootContext, pid *actor.PID, msg any, grace time.Duration) (any, error) {
	return request(ctx, root, pid, msg, nil, 0, grace, false, false)
}

// RequestGraceOrWithdraw is RequestGrace for a request whose target goes
// on working on it after its caller gave up (a Reduce's coordinator):
// withdraw (called with the PID the reply was to go to) tells the target
// to stop. When ctx is canceled, withdraw goes at once, and the call
// waits up to grace for the target's answer, which then says how the
// request ended (stopped, or done before the withdrawal came). When the
// deadline passes, the target answers by it itself (see RequestGrace),
// and withdraw goes only if no answer came within grace.
func RequestGraceOrWithdraw(ctx context.Context, root *actor.RootContext, pid *actor.PID, msg any, grace time.Duration, withdraw func(replyTo *actor.PID)) (any, error) {
	return request(ctx, root, pid, msg, withdraw, 0, grace, true, false)
}

// RequestEvery is Request for a request the target may receive more than
// once (it answers a repeat as it answered the first, or ignores it): it
// sends msg again after every, then after twice as long each time, until
// the reply comes or ctx ends, so that one request or answer lost in
// transit (a connection that broke) costs a re-send rather than the whole
// deadline. Every send has the same sender, so the answer to any of them
// counts: on a loaded machine, where a round trip can take longer than
// every, a fresh request per send would throw away each answer that was
// on its way and never get one. The growing interval (at most
// maxResendGrowth times every) keeps the repeats few when answers are
// merely slow.
func RequestEvery(ctx context.Context, root *actor.RootContext, pid *actor.PID, msg any, every time.Duration) (any, error) {
	return request(ctx, root, pid, msg, nil, max(every, time.Millisecond), 0, false, false)
}

// RequestWatchingLate is Request that watches a target in this process
// too only once the reply is late (RemoteWatchDelay), as Request does a
// target on another member. A Watch and an Unwatch are two more messages
// in the target's mailbox for each request: for a request served for
// another member on the data plane (a directory shard's Create or Delete
// from a store node elsewhere), with eight callers at once, they made a
// served request cost more CPU than the same request sent as an actor
// message across the actors' remote. A target that stopped is noticed
// at most RemoteWatchDelay later.
func RequestWatchingLate(ctx context.Context, root *actor.RootContext, pid *actor.PID, msg any) (any, error) {
	return request(ctx, root, pid, msg, nil, 0, 0, false, true)
}

// maxResendGrowth bounds RequestEvery's interval: a request lost while
// answers are slow is still sent again within a few round trips.
const maxResendGrowth = 8

// request is Request, sending msg again after every, 2*every, 4*every...
// while no reply came (never if every is 0), and waiting up to grace
// past ctx's end for a reply on its way; withdraw: see
// RequestGraceOrWithdraw.
func request(ctx context.Context, root *actor.RootContext, pid *actor.PID, msg any, abandon func(replyTo *actor.PID), every, grace time.Duration, withdraw, watchLate bool) (any, error) {
	if _, ok := ctx.Deadline(); !ok {
		return nil, messages.Errorf(messages.ErrorCode_INTERNAL, "request without a deadline")
	}
	if err := ctx.Err(); err == context.DeadlineExceeded {
		return nil, messages.Errorf(messages.ErrorCode_TIMEOUT, "deadline passed before the request was sent")
	} else if err != nil {
		return nil, messages.AsError(err)
	}
	if pid == nil {
		return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "no actor to send %T to", msg)
	}
	system := root.ActorSystem()
	// A catcher, not an actor, waits for the reply: it needs no mailbox,
	// no goroutine and no Started/Stop round, which a request pays on
	// every hop of a small Get. It also watches the target: the
	// Terminated that a stopped target sends its watchers ends the wait.
	c := &replyCatcher{target: pid, done: make(chan any, 1)}
	self, _ := system.ProcessRegistry.Add(c, "request"+system.ProcessRegistry.NextId())
	defer system.ProcessRegistry.Remove(self) // a late reply goes to the dead letters
	// A target in this process is watched at once (unless watchLate);
	// one on another member only once the request is late
	// (RemoteWatchDelay). The target is looked up when watched: one that
	// stopped since the request went is the dead letters by then, which
	// answer a Watch with Terminated.
	var target actor.Process
	watch := func() {
		target, _ = system.ProcessRegistry.Get(pid)
		target.SendSystemMessage(pid, &actor.Watch{Watcher: self})
	}
	defer func() {
		if target != nil {
			target.SendSystemMessage(pid, &actor.Unwatch{Watcher: self})
		}
	}()
	var watchDue <-chan time.Time
	if watchLate || IsRemote(system, pid) {
		t := time.NewTimer(RemoteWatchDelay())
		defer t.Stop()
		watchDue = t.C
	} else {
		watch()
	}
	root.RequestWithCustomSender(pid, msg, self)
	// Without every, resend stays nil and never fires.
	var resend <-chan time.Time
	var timer *time.Timer
	again := every
	if every > 0 {
		timer = time.NewTimer(again)
		defer timer.Stop()
		resend = timer.C
	}
	var reply any
	for waiting := true; waiting; {
		select {
		case reply = <-c.done:
			waiting = false
		case <-watchDue:
			watch()
			watchDue = nil
		case <-resend:
			root.RequestWithCustomSender(pid, msg, self)
			again = min(2*again, maxResendGrowth*every)
			timer.Reset(again)
		case <-ctx.Done():
			select {
			case reply = <-c.done: // a reply that came with the deadline still counts
				waiting = false
				continue
			default:
			}
			withdrawn := withdraw && abandon != nil && ctx.Err() == context.Canceled
			if withdrawn {
				abandon(self)
				abandon = nil
			}
			if grace > 0 && (withdrawn || ctx.Err() == context.DeadlineExceeded) {
				t := time.NewTimer(grace)
				select {
				case reply = <-c.done: // so does one within grace of it
					t.Stop()
					waiting = false
					continue
				case <-t.C:
				}
			}
			if abandon != nil {
				abandon(self)
			}
			if ctx.Err() == context.DeadlineExceeded {
				return nil, messages.Errorf(messages.ErrorCode_TIMEOUT, "no reply from %s before the deadline", membername.Actor(pid))
			}
			return nil, messages.AsError(ctx.Err())
		}
	}
	switch reply.(type) {
	case *actor.Terminated:
		return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "%s stopped before it answered (its member failed, left or stopped)", membername.Actor(pid))
	case *actor.DeadLetterResponse:
		return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "%s%s", membername.Actor(pid), notRunning)
	}
	return reply, nil
}

// RemoteWatchDelay is how long a wait for an actor on another member
// goes unwatched. A remote watch is a Watch across the network, a run of
// the target's mailbox, and an Unwatch the same way at the end; on the
// request's own path, each cost a 1 KiB broadcast to 7 on the testbed a
// third of its time (a store node that watched each new shard at its
// first Locate: 1.26 ms against 0.89 ms, 5 runs each). Most answers come
// well within it, and a watch sent late still ends at once when the
// target is already gone (the target's member answers a Watch of an
// actor it does not hold with Terminated, and the remote one of an
// address it lost as well), so a target that stopped is noticed at most
// this much later.
func RemoteWatchDelay() time.Duration { return time.Duration(remoteWatchDelay.Load()) }

var remoteWatchDelay atomic.Int64

func init() { remoteWatchDelay.Store(int64(25 * time.Millisecond)) }

// SetRemoteWatchDelay sets RemoteWatchDelay (for tests) and returns a
// func that puts the one before back.
func SetRemoteWatchDelay(d time.Duration) (restore func()) {
	old := remoteWatchDelay.Swap(int64(d))
	return func() { remoteWatchDelay.Store(old) }
}

// IsRemote reports whether pid lives on another member than system.
func IsRemote(system *actor.ActorSystem, pid *actor.PID) bool {
	addr := pid.GetAddress()
	return addr != system.Address() && addr != localAddress
}

// localAddress is Proto.Actor's address of a PID of its own process
// (actor/process_registry.go), which any system takes for its own.
const localAddress = "nonhost"

// replyCatcher is the sender of one request: a process in the actor
// system's registry (so a reply from another member reaches it through
// the remote as one from this system does) that hands the first reply,
// or the watched target's Terminated, to the waiting request.
type replyCatcher struct {
	target *actor.PID
	done   chan any // buffered: one outcome, the first
}

var _ actor.Process = (*replyCatcher)(nil)

// SendUserMessage implements actor.Process: a reply, or the dead letter
// process's DeadLetterResponse when the target was not running.
func (c *replyCatcher) SendUserMessage(_ *actor.PID, message any) {
	_, msg, _ := actor.UnwrapEnvelope(message)
	c.offer(msg)
}

// SendSystemMessage implements actor.Process: the watch's Terminated
// (the target stopped, was not found, or its member is gone).
func (c *replyCatcher) SendSystemMessage(_ *actor.PID, message any) {
	if t, ok := message.(*actor.Terminated); ok && c.target.Equal(t.GetWho()) {
		c.offer(t)
	}
}

// Stop implements actor.Process. It does nothing: the request removes
// its catcher from the registry when it ends, whatever ended it.
func (*replyCatcher) Stop(*actor.PID) {}

// offer keeps the first outcome; later ones are dropped (the request
// reads one).
func (c *replyCatcher) offer(msg any) {
	select {
	case c.done <- msg:
	default:
	}
}

// TimeoutMs is the time left before ctx's deadline in whole milliseconds
// (at least 1), for the timeout_ms fields of requests; 0 without one.
func TimeoutMs(ctx context.Context) int64 {
	deadline, ok := ctx.Deadline()
	if !ok {
		return 0
	}
	return max(1, time.Until(deadline).Milliseconds())
}

// Answer is one target's reply to RequestAll: Index is the target's place
// in the list, Msg the reply, Err why there is none.
type Answer struct {
	Index int
	Msg   any
	Err   error
}

// RequestAll sends msg to every pid at once, each as RequestEvery does,
// and returns a channel with room for every answer, on which each
// target's reply (or error) comes as it arrives: one round trip for all,
// not one per target. The requests still waiting stop when ctx ends, each
// then with its error, so exactly len(pids) answers come.
func RequestAll(ctx context.Context, root *actor.RootContext, pids []*actor.PID, msg any, every time.Duration) <-chan Answer {
	answers := make(chan Answer, len(pids))
	for i, pid := range pids {
		go func() {
			res, err := RequestEvery(ctx, root, pid, msg, every)
			answers <- Answer{Index: i, Msg: res, Err: err}
		}()
	}
	return answers
}

// notRunning ends the message of a request whose target's actor system
// answered that no such actor runs there (a DeadLetterResponse).
const notRunning = " is not running"

// IsNotRunning says whether err is Request's answer for a target that
// its actor system says is not running, as opposed to one that did not
// answer at all: the system at the address is up, the actor is not.
func IsNotRunning(err error) bool {
	var e *messages.Error
	return errors.As(err, &e) && e.GetCode() == messages.ErrorCode_UNAVAILABLE && strings.HasSuffix(e.GetMessage(), notRunning)
}
