package storenode

import (
	"context"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/transport"
)

// locateEnd is how a Locate on the data plane ended: the shard's answer
// (reply), or forwarded (the answer names a sender: it comes as an actor
// message to the Locate's reply_to, ordered with the shard's later
// messages to this node), or err (not sent, not answered, malformed).
type locateEnd struct {
	attempt   uint64
	reply     *messages.LocateReply
	forwarded bool
	err       error
}

// locateEnder turns a Locate's end into the message its actor takes (nil:
// none). An interface rather than a func, so that a light fetch passes
// itself without a closure to allocate.
type locateEnder interface {
	locateEnded(locateEnd) any
}

// callLocate sends l on the data plane to the shard's member at addr,
// and hands its end to the actor self of system as the message end makes
// of it (nothing if it makes nil). replyTo is where an answer that
// names a sender goes; it is set on l in place, not on a clone (a
// reflective deep copy was 6% of an inline Get's CPU): the protocol
// builds each Locate anew and keeps no reference to it. The call runs on
// the actors' pooled workers (callRunner), bounded by the Locate's own
// timeout and a margin for the shard's answer at that deadline; the
// returned cancel hangs it up, which withdraws exactly this request at
// the shard. A Locate that cannot be encoded ends at once and returns a
// nil cancel.
//
// Both the fetch session's Locates and a store node's light fetch's go
// this one way: a Locate and its reply are most of a small Get's latency
// (across two processes an inline Get took 0.93x the time this way, 1.28x
// a bare actor round trip instead of 1.51x).
func callLocate(system *actor.ActorSystem, self *actor.PID, caller transport.Caller, addr string, replyTo *messages.NodeRef,
	l *messages.Locate, end locateEnder) context.CancelFunc {
	attempt := l.GetAttempt()
	l.ReplyTo = replyTo
	req, err := proto.Marshal(l)
	if err != nil {
		if m := end.locateEnded(locateEnd{attempt: attempt, err: messages.Errorf(messages.ErrorCode_INTERNAL, "encode Locate: %v", err)}); m != nil {
			system.Root.Send(self, m)
		}
		return nil
	}
	cctx, cancel := context.WithTimeout(context.Background(), time.Duration(l.GetTimeoutMs())*time.Millisecond+locateCallMargin)
	callRunner.Schedule(func() {
		defer cancel()
		r := locateEnd{attempt: attempt}
		b, err := caller.Call(cctx, addr, messages.ControlLocate, req)
		switch {
		case err == nil && len(b) == 0:
			r.forwarded = true
		case err == nil:
			reply := &messages.LocateReply{}
			if uerr := proto.Unmarshal(b, reply); uerr != nil {
				r.err = messages.Errorf(messages.ErrorCode_UNAVAILABLE, "malformed LocateReply from %s: %v", addr, uerr)
			} else {
				r.reply = reply
			}
		default:
			r.err = err
		}
		if m := end.locateEnded(r); m != nil {
			system.Root.Send(self, m)
		}
	})
	return cancel
}

// locateCallMargin is how long a Locate on the data plane waits past the
// timeout it gives the shard.
const locateCallMargin = time.Second
