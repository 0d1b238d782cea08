package messages

import (
	"errors"
	"testing"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
)

// Every request of the application API has an undeliverable reply of its
// own type, UNAVAILABLE and naming the target, and its reply's key is
// the request's, so the remote layer matches them.
func TestEveryRequestHasItsUndeliverableReply(t *testing.T) {
	target := actor.NewPID("127.0.0.1:7001", "node#1/store")
	for _, c := range []struct {
		request, reply any
	}{
		{&Put{ObjectId: "a"}, &PutReply{ObjectId: "a"}},
		{&Get{ObjectId: "a"}, &GetReply{ObjectId: "a"}},
		{&Delete{ObjectId: "a"}, &DeleteReply{ObjectId: "a"}},
		{&QueryObject{ObjectId: "a"}, &ObjectInfo{ObjectId: "a"}},
		{&Reduce{TargetId: "a"}, &ReduceReply{TargetId: "a"}},
		{&WaitObjects{ObjectIds: []string{"a", "b"}, NumReady: 1}, &WaitObjectsReply{Ready: []string{"a"}}},
	} {
		rk, _, ok := requestKey(c.request)
		if !ok {
			t.Fatalf("%T is not a known request", c.request)
		}
		if k, ok := replyKey(c.reply); !ok || k != rk {
			t.Fatalf("%T's key %v, its reply %T's %v", c.request, rk, c.reply, k)
		}
		u, ok := undeliverableReply(c.request, target, "is not running")
		if !ok {
			t.Fatalf("%T has no undeliverable reply", c.request)
		}
		if k, ok := replyKey(u); !ok || k != rk {
			t.Fatalf("%T's undeliverable reply %T does not match it", c.request, u)
		}
		e, _ := u.(interface{ GetError() *Error })
		if e == nil || !errors.Is(e.GetError(), ErrUnavailable) || !IsUndeliveredBy(e.GetError(), target) {
			t.Fatalf("%T's undeliverable reply: %v", c.request, u)
		}
		tl, ok := tooLargeReply(c.request, target, 300<<20, 256<<20)
		if k, _ := replyKey(tl); !ok || k != rk || !errors.Is(tl.(interface{ GetError() *Error }).GetError(), ErrInvalidArgument) {
			t.Fatalf("%T's too-large reply: %v", c.request, tl)
		}
		b, ok := busyReply(c.request, target, 70000, 65536)
		if k, _ := replyKey(b); !ok || k != rk || !errors.Is(b.(interface{ GetError() *Error }).GetError(), ErrResourceExhausted) {
			t.Fatalf("%T's busy reply: %v", c.request, b)
		}
	}
}

// An undelivered answer says whether the request never reached its
// target: a Reduce may be sent elsewhere only then.
func TestUndeliveredSaysWhetherTheRequestArrived(t *testing.T) {
	target := actor.NewPID("127.0.0.1:7001", "node#1/store")
	for why, never := range map[string]bool{actor.WhyNotRunning: true, actor.WhyUnreachable: true, actor.WhyFailedBefore: false} {
		e := UndeliveredError(target, why)
		if NeverReachedBy(e, target) != never {
			t.Fatalf("%q: NeverReachedBy = %v, want %v", why, !never, never)
		}
		if NeverReachedBy(e, actor.NewPID("127.0.0.1:7001", "node#1/shard-3")) {
			t.Fatalf("%q: another actor's undelivered answer counts as the target's", why)
		}
	}
}
