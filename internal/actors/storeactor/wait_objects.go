package storeactor

import (
	"context"
	"errors"
	"sync/atomic"
	"time"

	"github.com/hoplite-go/hoplite/internal/storeproto"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/messages"
)

// maxWaitingIDs bounds the ids that the WaitObjects of one process wait
// for at once: each holds a goroutine here and a parked query at its
// shard until it is answered or its wait ends.
const maxWaitingIDs = 16 << 10

// waitingIDs counts them.
var waitingIDs atomic.Int64

// waitAnswer is one id's answer to a WaitObjects's query.
type waitAnswer struct {
	id   string
	info *messages.ObjectInfo
	err  error
}

// waitObjects answers a WaitObjects from a goroutine that asks each id's
// shard with a waiting QueryObject (retried while the shard moves) and
// answers once num_ready exist, once too many failed for that, or at
// the deadline. The shard queries still parked when it answered end at
// that deadline too.
func (n *StoreNode) waitObjects(ctx actor.Context, m *messages.WaitObjects) {
	ids, k := m.GetObjectIds(), int(m.GetNumReady())
	if err := storeproto.CheckWait(ids, k); err != nil {
		ctx.Respond(&messages.WaitObjectsReply{Error: err})
		return
	}
	for _, id := range ids {
		if err := n.validate(id); err != nil {
			ctx.Respond(&messages.WaitObjectsReply{Error: err})
			return
		}
	}
	if waitingIDs.Add(int64(len(ids))) > maxWaitingIDs {
		waitingIDs.Add(-int64(len(ids)))
		ctx.Respond(&messages.WaitObjectsReply{Error: messages.Errorf(messages.ErrorCode_RESOURCE_EXHAUSTED,
			"wait: this member waits for %d objects at most at once; try again later", maxWaitingIDs)})
		return
	}
	system, to, timeout := ctx.ActorSystem(), ctx.Sender(), n.cfg.timeout(m.GetTimeoutMs())
	go func() {
		defer waitingIDs.Add(-int64(len(ids)))
		reply(system, to, waitObjectsFor(system.Root, n.cfg.ShardFor, ids, k, timeout))
	}()
}

// waitObjectsFor is the WaitObjectsReply for ids after at most timeout.
func waitObjectsFor(root *actor.RootContext, shardFor func(string) *actor.PID, ids []string, k int, timeout time.Duration) *messages.WaitObjectsReply {
	wctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	answers := make(chan waitAnswer, len(ids))
	for _, id := range ids {
		go func() {
			info, err := queryWaiting(wctx, root, shardFor, id)
			answers <- waitAnswer{id, info, err}
		}()
	}
	r := &messages.WaitObjectsReply{}
	ready := map[string]bool{}
	failed := 0
	for range ids {
		a := <-answers
		switch {
		case a.err == nil:
			ready[a.id] = true
			r.Ready = append(r.Ready, a.id)
		case wctx.Err() == nil && !errors.Is(a.err, messages.ErrTimeout):
			// Deleted, lost: it never will be.
			failed++
			r.Failed = append(r.Failed, &messages.ObjectInfo{ObjectId: a.id, Error: messages.AsError(a.err)})
		}
		if len(r.Ready) >= k || len(ids)-failed < k || wctx.Err() != nil {
			break
		}
	}
	for _, id := range ids {
		if !ready[id] {
			r.NotReady = append(r.NotReady, id)
		}
	}
	return r
}

// queryWaiting asks id's shard for it, waiting for its creation, until
// ctx ends; a shard that moves or restarts (UNAVAILABLE) is asked again.
func queryWaiting(ctx context.Context, root *actor.RootContext, shardFor func(string) *actor.PID, id string) (*messages.ObjectInfo, error) {
	for wait := 10 * time.Millisecond; ; wait = min(2*wait, 200*time.Millisecond) {
		res, err := actorutil.Request(ctx, root, shardFor(id), &messages.QueryObject{ObjectId: id, Wait: true, TimeoutMs: actorutil.TimeoutMs(ctx)})
		if info, ok := res.(*messages.ObjectInfo); err == nil && ok {
			err = messages.ErrOrNil(info.GetError())
			if err == nil {
				return info, nil
			}
		} else if err == nil {
			err = messages.Errorf(messages.ErrorCode_INTERNAL, "unexpected reply %s to QueryObject", actorutil.TypeName(res))
		}
		if !errors.Is(err, messages.ErrUnavailable) {
			return nil, err
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, err
		case <-t.C:
		}
	}
}
