package member

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/reduction"
	"github.com/hoplite-go/hoplite/internal/testhooks"
	"github.com/hoplite-go/hoplite/messages"
)

// TestReduceCancelStopsItsCoordinator: a Reduce canceled by its caller's
// context while it waits for a source that was not Put yet never commits
// its target, also once the source comes; its coordinator heard the
// cancel, every store's space goes back to the sources' bytes, and the
// target's reservation is gone (a new Reduce into it runs).
func TestReduceCancelStopsItsCoordinator(t *testing.T) {
	for _, all := range []bool{false, true} {
		t.Run(fmt.Sprintf("all_reduce=%v", all), func(t *testing.T) {
			var mu sync.Mutex
			located := map[string]bool{}
			var canceled []string // the call ids of the cancels coordinators received
			hook := func(_ string, msg any) {
				mu.Lock()
				defer mu.Unlock()
				switch m := msg.(type) {
				case *messages.LocationUpdate:
					if !m.GetDeleted() && m.GetNode() != nil {
						located[m.GetObjectId()] = true
					}
				case *messages.CancelReduce:
					canceled = append(canceled, m.GetCallId())
				}
			}
			const nodes, size = 4, 256 << 10 // above the inline limit: a tree
			l := start(t, Config{Nodes: nodes, Shards: nodes, ChunkSize: 32 << 10, hooks: testhooks.Set{Coordinator: hook}})
			ctx := deadline(t, 20*time.Second)
			sources := []string{"c-src-0", "c-src-1", "c-src-2"}
			data := map[string][]byte{}
			for i, id := range sources {
				data[id] = randomBytes(uint64(i+1), size)
			}
			for i, id := range sources[:2] {
				if err := l.Client(i+1).Put(ctx, id, data[id]); err != nil {
					t.Fatal(err)
				}
			}
			target := idOwnedBy(t, l, 3, "c-target")
			reduce := l.Client(0).Reduce
			if all {
				reduce = l.Client(0).AllReduce
			}
			rctx, cancel := context.WithTimeout(ctx, 15*time.Second)
			defer cancel()
			done := make(chan reduceResult, 1)
			go func() {
				r, err := reduce(rctx, target, sources, 3, messages.ReduceOp_SUM, messages.DType_INT64)
				done <- reduceResult{r, err}
			}()
			eventually(t, 10*time.Second, "the coordinator located the two sources Put", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return located[sources[0]] && located[sources[1]]
			})
			// Cancels that name another call, none, or come from another
			// requester than the caller reach no coordinator; they reach
			// their mailboxes before the caller's, which passes the
			// caller's store node first.
			shard := l.Shard(directory.ShardIndex(target, nodes))
			sendIn(l, shard, &messages.CancelReduce{TargetId: target, CallId: "another-call"})
			sendIn(l, shard, &messages.CancelReduce{TargetId: target})
			sendIn(l, l.StoreNode(0), &messages.CancelReduce{TargetId: target})
			cancel()
			select {
			case res := <-done:
				if !errors.Is(res.err, messages.ErrCanceled) {
					t.Fatalf("canceled Reduce answered %v, want CANCELED", res.err)
				}
				// Said by the coordinator when it came within the
				// caller's grace; the oracle's tight rule rests on it.
				t.Logf("the cancel's answer: %v (the coordinator's: %v)", res.err, reduction.AbandonedAtCancel(res.err))
			case <-ctx.Done():
				t.Fatal("the canceled Reduce did not return")
			}
			eventually(t, 10*time.Second, "the cancel reached the coordinator", func() bool {
				mu.Lock()
				defer mu.Unlock()
				return len(canceled) > 0
			})
			// The missing source comes: an abandoned run takes nothing.
			if err := l.Client(3).Put(ctx, sources[2], data[sources[2]]); err != nil {
				t.Fatal(err)
			}
			for i := range nodes {
				gctx, gcancel := context.WithTimeout(ctx, 300*time.Millisecond)
				b, err := l.Client(i).Get(gctx, target)
				gcancel()
				if err == nil {
					t.Fatalf("node-%d read %d bytes of the canceled Reduce's target", i, len(b))
				}
				if !errors.Is(err, messages.ErrNotFound) && !errors.Is(err, messages.ErrTimeout) {
					t.Fatalf("node-%d Get of the canceled target: %v, want NOT_FOUND or TIMEOUT", i, err)
				}
			}
			// Only the sources are held: the run's outputs and target
			// copies were released.
			eventually(t, 10*time.Second, "every store holds only its source", func() bool {
				var used int64
				for i := range nodes {
					if l.Store(i).Lookup(target) != nil {
						return false
					}
					used += l.Store(i).Used()
				}
				return used == 3*size
			})
			// The reservation went with the run: the target can be made.
			r, err := reduce(ctx, target, sources, 3, messages.ReduceOp_SUM, messages.DType_INT64)
			if err != nil {
				t.Fatalf("a new Reduce into the canceled one's target: %v", err)
			}
			if len(r.GetReducedIds()) != 3 {
				t.Fatalf("the new Reduce reduced %v", r.GetReducedIds())
			}
			mu.Lock()
			defer mu.Unlock()
			if len(canceled) != 1 || canceled[0] == "" || canceled[0] == "another-call" {
				t.Fatalf("coordinators received cancels of calls %q, want the caller's one", canceled)
			}
		})
	}
}
