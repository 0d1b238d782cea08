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
		{"no shard here", &messages.BenchTargetIDReply{Error: messages.Errorf(messages.ErrorCode_UNAVAILABLE, "no id with prefix %q has its shard on %s", "p", "198.18.3.1:20002#c76a4f72")}, true},
		{"another failure", &messages.BenchTargetIDReply{Error: messages.Errorf(messages.ErrorCode_UNAVAILABLE, "the member is stopping")}, false},
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
			if c.reply.GetObjectId() != "" && (err != nil || id != c.reply.GetObjectId()) {
				t.Fatalf("TargetID = %q, %v; want %q", id, err, c.reply.GetObjectId())
			}
			if c.reply.GetError() != nil && err == nil {
				t.Fatalf("TargetID = %q and no error for %v", id, c.reply.GetError())
			}
		})
	}
}
