package cluster

import (
	"bytes"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/actor"
)

// crash is a message that makes the store node's BeforeReceive hook panic.
type crash struct{}

func crashHook(node string, msg any) {
	if _, ok := msg.(crash); ok {
		panic(fmt.Sprintf("injected crash of %s's store node", node))
	}
}

func TestStoreNodeRestartUnderLoadLosesNoPinnedObject(t *testing.T) {
	const chunk = 64 << 10
	var gate atomic.Bool // when set, node-2 stalls its fetch of "big" mid-way
	stalled := make(chan struct{}, 1)
	release := make(chan struct{})
	cfg := Config{Nodes: 4, ChunkSize: chunk}
	var node2Starts atomic.Int32
	cfg.Hooks.BeforeReceive = func(node string, msg any) {
		if _, ok := msg.(*actor.Started); ok && node == "node-2" {
			node2Starts.Add(1)
		}
		crashHook(node, msg)
	}
	cfg.Hooks.BeforeFetchChunk = func(node, id string, off int64) {
		if node == "node-2" && id == "big" && off == 8*chunk && gate.CompareAndSwap(true, false) {
			stalled <- struct{}{}
			<-release
		}
	}
	l := start(t, cfg)
	ctx := deadline(t, 60*time.Second)

	var restarts atomic.Int32
	sub := l.System().EventStream.Subscribe(func(evt any) {
		if e, ok := evt.(*actor.SupervisorEvent); ok && e.Directive == actor.RestartDirective {
			restarts.Add(1)
		}
	})
	defer l.System().EventStream.Unsubscribe(sub)

	objs := map[string][]byte{}
	for i := range 12 {
		id := fmt.Sprintf("pinned-%d", i)
		objs[id] = randomBytes(uint64(100+i), (i+1)*100<<10)
		if err := l.Client(1).Put(ctx, id, objs[id]); err != nil {
			t.Fatal(err)
		}
	}
	objs["big"] = randomBytes(99, 40*chunk)
	if err := l.Client(1).Put(ctx, "big", objs["big"]); err != nil {
		t.Fatal(err)
	}

	// Load: Gets of every pinned object from the other nodes while the
	// creator's store node crashes twice.
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for _, reader := range []int{0, 3} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id, want := range objs {
				if id == "big" {
					continue
				}
				got, err := l.Client(reader).Get(ctx, id)
				if err == nil && !bytes.Equal(got, want) {
					err = fmt.Errorf("node-%d got wrong bytes for %s", reader, id)
				}
				if err != nil {
					errs <- err
				}
			}
		}()
	}
	l.System().Root.Send(l.StoreNode(1), crash{})
	// A receiver crashes mid-fetch: its session is stopped with it, and the
	// restarted node resumes from the bytes it already has.
	gate.Store(true)
	got := make(chan error, 1)
	go func() {
		b, err := l.Client(2).Get(ctx, "big")
		if err == nil && !bytes.Equal(b, objs["big"]) {
			err = fmt.Errorf("node-2 got wrong bytes for big after its restart")
		}
		got <- err
	}()
	<-stalled
	l.System().Root.Send(l.StoreNode(2), crash{})
	// A second Started means the restart is done: protoactor restarts an
	// actor only after all its children (the fetch session) have stopped.
	eventually(t, 10*time.Second, "node-2's store node restarted", func() bool { return node2Starts.Load() >= 2 })
	close(release)
	l.System().Root.Send(l.StoreNode(1), crash{})
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if err := <-got; err != nil {
		t.Fatal(err)
	}
	// The shard saw node-2 locate again after its restart: its first
	// transfer was cut short and a second one finished the copy.
	info, err := l.Client(0).Info(ctx, "big", false)
	if err != nil {
		t.Fatal(err)
	}
	var aborted, finished int
	for _, tr := range info.GetTransfers() {
		if tr.GetReceiver() == "node-2" {
			if tr.GetAborted() {
				aborted++
			} else if tr.GetEndSeq() != 0 {
				finished++
			}
		}
	}
	if aborted != 1 || finished != 1 {
		t.Fatalf("node-2 transfers: %d aborted, %d finished; want 1 and 1 (resumed fetch): %v", aborted, finished, info.GetTransfers())
	}
	eventually(t, 10*time.Second, "three supervisor restarts published", func() bool { return restarts.Load() >= 3 })
	// After the restarts every pinned object is still whole on its creator.
	for id, want := range objs {
		o := l.Store(1).Lookup(id)
		if o == nil || !o.Pinned() {
			t.Fatalf("%s lost its pinned creator copy", id)
		}
		if got, err := l.Client(1).Get(ctx, id); err != nil || !bytes.Equal(got, want) {
			t.Fatalf("%s after restarts: %v", id, err)
		}
	}
}
