package member

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/events"
	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/testhooks"
	"github.com/hoplite-go/hoplite/messages"
)

// crashShard makes the shard hook panic: the shard crashes and its
// supervisor restarts it with empty (soft) state.
type crashShard struct{}

func shardCrashHook(shard string, msg any) {
	if _, ok := msg.(crashShard); ok {
		panic("injected crash of " + shard)
	}
}

func TestShardCrashUnderLoadRebuildsAndLosesNothing(t *testing.T) {
	const chunk = 32 << 10
	l := start(t, Config{Nodes: 6, Shards: 3, ChunkSize: chunk, hooks: testhooks.Set{Shard: shardCrashHook}})
	evs := recordEvents(t, l)
	ctx := deadline(t, 30*time.Second)
	objs := map[string][]byte{}
	for i := range 12 {
		id := fmt.Sprintf("obj-%d", i)
		objs[id] = randomBytes(uint64(200+i), (i%4+1)*100<<10+i)
		if err := l.Client(i%3).Put(ctx, id, objs[id]); err != nil {
			t.Fatal(err)
		}
	}
	// Load: every object fetched on nodes 3..5 while every shard crashes
	// twice. In-flight Gets keep going or retry on their own.
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for node := 3; node < 6; node++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id, want := range objs {
				got, err := l.Client(node).Get(ctx, id)
				if err == nil && !bytes.Equal(got, want) {
					err = fmt.Errorf("node-%d: wrong bytes for %s", node, id)
				}
				if err != nil {
					errs <- fmt.Errorf("node-%d get %s: %w", node, id, err)
				}
			}
		}()
	}
	for round := 0; round < 2; round++ {
		for j := 0; j < 3; j++ {
			sendIn(l, l.Shard(j), crashShard{})
		}
		time.Sleep(5 * time.Millisecond)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	eventually(t, 5*time.Second, "six ShardRebuilt events", func() bool { return len(eventsOf[*events.ShardRebuilt](evs)) >= 6 })
	// The rebuilt directory knows every copy again: creators and receivers.
	for id := range objs {
		eventually(t, 5*time.Second, id+" fully republished", func() bool {
			info, err := l.Client(0).Info(ctx, id, false)
			if err != nil {
				return false
			}
			complete := 0
			for _, loc := range info.GetLocations() {
				if loc.GetState() == messages.LocationState_COMPLETE {
					complete++
				}
			}
			return complete == 4 // the creator and nodes 3, 4, 5
		})
	}
	// And it serves new receivers as before, from complete copies.
	for id, want := range objs {
		if got, err := l.Client(1+(len(id)%2)).Get(ctx, id); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("after the crashes, get %s: %v", id, err)
		}
	}
}

// A Reduce whose caller's member is killed fails UNAVAILABLE and leaves
// nothing half-done. (A crash of the target's shard, which takes the
// coordinator with it, does not fail the Reduce: it starts again there,
// TestCoordinatorShardCrashedReduceResumes; a coordinator's own crash
// fails it, TestCoordinatorPanicFailsReduce.)
func TestReduceFailsCleanlyWhenItsCallerDies(t *testing.T) {
	const chunk = 32 << 10
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	cfg := Config{Nodes: 6, ChunkSize: chunk, hooks: testhooks.Set{Shard: shardCrashHook}}
	cfg.hooks.Store.BeforePutChunk = func(node, id string, off int64) {
		if strings.HasSuffix(id, "-slow") && off > 0 {
			<-hold // keeps the Reduce from finishing
		}
	}
	l := start(t, cfg)
	ctx := deadline(t, 30*time.Second)

	cases := []struct {
		name   string
		caller int
		fault  func(target string)
		want   string
	}{
		{"caller killed", 5, func(string) {
			if err := l.Kill(5); err != nil {
				t.Error(err)
			}
			// The client's own request sees its store node stop, or the
			// coordinator's reply says the caller's node failed: either
			// is UNAVAILABLE.
		}, ""},
	}
	for k, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			target := fmt.Sprintf("t%d", k)
			ids := []string{fmt.Sprintf("a%d", k), fmt.Sprintf("b%d", k), fmt.Sprintf("c%d-slow", k)}
			for i, id := range ids[:2] {
				if err := l.Client(i+1).Put(ctx, id, int64s(uint64(i), 8*chunk/8)); err != nil {
					t.Fatal(err)
				}
			}
			go func() { _ = l.Client(3).Put(ctx, ids[2], int64s(9, 8*chunk/8)) }()
			done := make(chan error, 1)
			go func() {
				_, err := l.Client(c.caller).Reduce(ctx, target, ids, 3, messages.ReduceOp_SUM, messages.DType_INT64)
				done <- err
			}()
			// Once the slow source is announced the tree is being built.
			eventually(t, 5*time.Second, "the slow source to arrive", func() bool {
				info, err := l.Client(0).Info(ctx, ids[2], false)
				return err == nil && len(info.GetLocations()) > 0
			})
			time.Sleep(10 * time.Millisecond)
			c.fault(target)
			select {
			case err := <-done:
				if !errors.Is(err, messages.ErrUnavailable) || !strings.Contains(err.Error(), c.want) {
					t.Fatalf("want UNAVAILABLE %q, got %v", c.want, err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the Reduce hung after its caller failed")
			}
			// Nothing half-done: no partial target, no intermediates.
			eventually(t, 5*time.Second, "the partial target and intermediates to be freed", func() bool {
				for i := 0; i < l.Nodes(); i++ {
					if !l.Alive(i) {
						continue
					}
					for _, o := range l.Store(i).Objects() {
						if o.ID() == target || strings.HasPrefix(o.ID(), "\x00reduce/") {
							return false
						}
					}
				}
				return true
			})
		})
	}
}

// A Reduce that waits for sources keeps waiting correctly when the
// sources' shards restart: the restarted shards have forgotten the
// coordinator's subscriptions, and it subscribes again.
func TestReduceWaitingForSourcesSurvivesTheirShardsRestarting(t *testing.T) {
	const shards = 4
	l := start(t, Config{Nodes: 4, Shards: shards, hooks: testhooks.Set{Shard: shardCrashHook}})
	ctx := deadline(t, 30*time.Second)
	target := "sum"
	var ids []string
	crash := map[int]bool{}
	for k := 0; len(ids) < 4; k++ {
		id := fmt.Sprintf("src-%d", k)
		if j := directory.ShardIndex(id, shards); j != directory.ShardIndex(target, shards) {
			ids, crash[j] = append(ids, id), true
		}
	}
	const elems = 64 << 10 // 512 KiB of int64: not inline
	want := make([]int64, elems)
	put := func(k int) {
		data := int64s(uint64(k), elems)
		for e := range want {
			want[e] += int64(binary.LittleEndian.Uint64(data[8*e:]))
		}
		if err := l.Client(k).Put(ctx, ids[k], data); err != nil {
			t.Fatal(err)
		}
	}
	put(0)
	put(1)
	done := make(chan error, 1)
	go func() {
		_, err := l.Client(0).Reduce(ctx, target, ids, 4, messages.ReduceOp_SUM, messages.DType_INT64)
		done <- err
	}()
	time.Sleep(50 * time.Millisecond) // the coordinator subscribes within microseconds
	for j := range crash {
		sendIn(l, l.Shard(j), crashShard{})
	}
	time.Sleep(20 * time.Millisecond)
	put(2)
	put(3)
	if err := <-done; err != nil {
		t.Fatalf("reduce after its sources' shards restarted: %v", err)
	}
	got, err := l.Client(3).Get(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	for e := range want {
		if v := int64(binary.LittleEndian.Uint64(got[8*e:])); v != want[e] {
			t.Fatalf("element %d: %d, want %d", e, v, want[e])
		}
	}
}

// A Get whose Locate sits unprocessed in a shard's mailbox when the
// shard's node is killed: a stopping actor drops its mailbox without a
// reply, so the fetch must notice the shard stopped and ask the shard's
// new home at once. Before requests watched their target, the Get waited
// for its whole deadline and failed with TIMEOUT although the object was
// Put meanwhile (the bench failure scenario hit this in half its runs).
func TestLocateDroppedByAStoppingShardIsSentToItsNewHome(t *testing.T) {
	pick := func(prefix string) string {
		for k := 0; ; k++ {
			if c := fmt.Sprintf("%s-%d", prefix, k); directory.ShardIndex(c, 4) == 1 {
				return c // shard-1 starts on node-1
			}
		}
	}
	id, blocker := pick("late"), pick("blocker")
	inHook, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	l := start(t, Config{Nodes: 4, ChunkSize: 64 << 10, hooks: testhooks.Set{Shard: func(_ string, msg any) {
		if m, ok := msg.(*messages.Locate); ok && m.GetObjectId() == blocker {
			once.Do(func() {
				close(inHook)
				<-release // the shard is busy: id's Locate queues behind
			})
		}
	}}})
	ctx := deadline(t, 20*time.Second)
	bctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	go func() { _, _ = l.Client(3).Get(bctx, blocker) }() // never Put
	<-inHook
	data := randomBytes(7, 256<<10)
	got := make(chan error, 1)
	go func() {
		b, err := l.Client(2).Get(ctx, id)
		if err == nil && !bytes.Equal(b, data) {
			err = fmt.Errorf("got %d bytes that differ from the Put", len(b))
		}
		got <- err
	}()
	time.Sleep(20 * time.Millisecond) // id's Locate reaches the mailbox
	go func() {
		time.Sleep(50 * time.Millisecond) // the Stop is queued first
		close(release)
	}()
	if err := l.Kill(1); err != nil {
		t.Fatal(err)
	}
	if err := l.Client(0).Put(ctx, id, data); err != nil {
		t.Fatal(err)
	}
	if err := <-got; err != nil {
		t.Fatalf("Get after its shard's node died: %v", err)
	}
}
