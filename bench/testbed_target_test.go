package bench

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
)

// TargetID tells a host 0 that hosts no directory shard (which open
// answers by starting the nodes again) from any other failure, which the
// measurement reports as before.
func TestTargetIDTellsAHostWithoutShards(t *testing.T) {
	for _, c := range []struct {
		name    string
		reply   *messages.BenchTargetIDReply
		noShard bool
	}{
		{"no shard here", &messages.BenchTargetIDReply{Error: messages.Errorf(messages.ErrorCode_NOT_FOUND, "no id with prefix %q has its shard on %s", "p", "198.18.3.1:20002#c76a4f72")}, true},
		{"not settled", &messages.BenchTargetIDReply{Error: messages.Errorf(messages.ErrorCode_UNAVAILABLE, "holds every directory shard")}, false},
		{"another failure", &messages.BenchTargetIDReply{Error: messages.Errorf(messages.ErrorCode_INTERNAL, "the member is stopping")}, false},
		{"an id", &messages.BenchTargetIDReply{ObjectId: "p-3"}, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			sys := actor.NewActorSystem()
			defer sys.Shutdown()
			if _, err := sys.Root.SpawnNamed(actorutil.Props(func() actor.Actor {
				return actor.ReceiveFunc(func(ctx actor.Context) {
					if _, ok := ctx.Message().(*messages.BenchTargetID); ok {
						ctx.Respond(c.reply)
					}
				})
			}), AgentName); err != nil {
				t.Fatal(err)
			}
			ns := &nodeSet{sys: sys, procs: []*nodeProc{{bind: sys.Address()}}}
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			id, err := ns.TargetID(ctx, "p")
			if got := errors.Is(err, errNoLocalShard); got != c.noShard {
				t.Fatalf("TargetID = %q, %v: errNoLocalShard %v, want %v", id, err, got, c.noShard)
			}
			if got, want := errors.Is(err, errPlacementUnsettled), c.reply.GetError().GetCode() == messages.ErrorCode_UNAVAILABLE; got != want {
				t.Fatalf("TargetID = %q, %v: errPlacementUnsettled %v, want %v", id, err, got, want)
			}
			if c.reply.GetObjectId() != "" && (err != nil || id != c.reply.GetObjectId()) {
				t.Fatalf("TargetID = %q, %v; want %q", id, err, c.reply.GetObjectId())
			}
			if c.reply.GetError() != nil && err == nil {
				t.Fatalf("TargetID = %q and no error for %v", id, c.reply.GetError())
			}
		})
	}
}

// targetID finds the first id whose shard is on self; says NOT_FOUND if
// self hosts none, and UNAVAILABLE while self, among other members,
// still holds every shard (a member's table before its first
// placement); alone, every shard is self's.
func TestTargetIDOfAPlacement(t *testing.T) {
	byLen := func(ids map[int]string) func(string) string {
		return func(id string) string { return ids[len(id)%3] }
	}
	for _, c := range []struct {
		name    string
		members int
		owners  map[int]string
		id      string
		code    messages.ErrorCode
	}{
		{"a shard here", 3, map[int]string{0: "b", 1: "a", 2: "c"}, "p-10", messages.ErrorCode_OK},
		{"no shard here", 3, map[int]string{0: "b", 1: "c", 2: "c"}, "", messages.ErrorCode_NOT_FOUND},
		{"every shard here, others seen", 3, map[int]string{0: "a", 1: "a", 2: "a"}, "", messages.ErrorCode_UNAVAILABLE},
		{"alone", 1, map[int]string{0: "a", 1: "a", 2: "a"}, "p-0", messages.ErrorCode_OK},
	} {
		r := targetID("p", "a", c.members, byLen(c.owners))
		if r.GetObjectId() != c.id || r.GetError().GetCode() != c.code {
			t.Errorf("%s: %q, %v; want %q, %v", c.name, r.GetObjectId(), r.GetError(), c.id, c.code)
		}
	}
}
