package storeactor

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/internal/storeproto"
	"github.com/hoplite-go/hoplite/messages"
)

// batchNode starts a store node holding sources s0..s{n-1} of size bytes
// (source i's bytes all i+1) and a coordinator stand-in that forwards
// every report to the returned channel.
func batchNode(t *testing.T, n int, size int64) (*actor.ActorSystem, *actor.PID, *actor.PID, *objstore.Store, chan any) {
	t.Helper()
	system := putQuietSystem(t)
	store := objstore.NewStore(1 << 20)
	for i := range n {
		o, _, err := store.Create(fmt.Sprintf("s%d", i), size, 0)
		if err != nil {
			t.Fatal(err)
		}
		wr := o.NewWriter()
		buf, err := wr.Tail()
		if err != nil {
			t.Fatal(err)
		}
		for j := range buf {
			buf[j] = byte(i + 1)
		}
		if err := wr.Advance(len(buf)); err != nil {
			t.Fatal(err)
		}
		if err := store.Complete(o); err != nil {
			t.Fatal(err)
		}
	}
	log := logrus.New()
	log.SetOutput(io.Discard)
	shard := system.Root.Spawn(actor.PropsFromFunc(func(actor.Context) {}))
	cfg := Config{Self: &messages.NodeRef{NodeId: "n"}, Store: store, ShardFor: func(string) *actor.PID { return shard },
		Log: logrus.NewEntry(log)}
	node := system.Root.Spawn(NewProps(cfg))
	reports := make(chan any, 64)
	coord := system.Root.Spawn(actor.PropsFromFunc(func(ctx actor.Context) {
		switch m := ctx.Message().(type) {
		case *messages.ReduceTaskStarted, *messages.ReduceTaskDone:
			reports <- m
		}
	}))
	return system, node, coord, store, reports
}

// leafTask is position p of reduce r: it reduces source src alone into an
// intermediate output.
func leafTask(r string, p int, src string, size int64) *messages.ReduceTask {
	return &messages.ReduceTask{ReduceId: r, TargetId: "target", Op: messages.ReduceOp_SUM, Dtype: messages.DType_INT32, Size: size,
		Position: int32(p), SourceId: src, OutputId: fmt.Sprintf("\x00reduce/%s/%d/1", r, p), Generation: 1, TimeoutMs: 10_000}
}

// reportsOf collects reports until every position in want has started
// and finished (a refused position only starts), or fails after 10 s.
func reportsOf(t *testing.T, reports chan any, started, done int) (map[int32]*messages.ReduceTaskStarted, map[int32]*messages.ReduceTaskDone) {
	t.Helper()
	s, d := map[int32]*messages.ReduceTaskStarted{}, map[int32]*messages.ReduceTaskDone{}
	deadline := time.After(10 * time.Second)
	for len(s) < started || len(d) < done {
		select {
		case m := <-reports:
			switch m := m.(type) {
			case *messages.ReduceTaskStarted:
				if s[m.GetPosition()] != nil {
					t.Fatalf("position %d started twice", m.GetPosition())
				}
				s[m.GetPosition()] = m
			case *messages.ReduceTaskDone:
				d[m.GetPosition()] = m
			}
		case <-deadline:
			t.Fatalf("after 10 s: %d of %d started, %d of %d done (%v, %v)", len(s), started, len(d), done, s, d)
		}
	}
	return s, d
}

// A ReduceTaskBatch starts every task in it, each as its own position
// that reports to the batch's sender: every output exists and holds its
// source's bytes, and the release frees them all.
func TestReduceTaskBatchStartsEveryTask(t *testing.T) {
	const n, size = 4, 64
	system, node, coord, store, reports := batchNode(t, n, size)
	b := &messages.ReduceTaskBatch{}
	for p := range n {
		b.Tasks = append(b.Tasks, leafTask("r#1", p, fmt.Sprintf("s%d", p), size))
	}
	system.Root.RequestWithCustomSender(node, b, coord)
	started, done := reportsOf(t, reports, n, n)
	for p := range int32(n) {
		if err := messages.ErrOrNil(started[p].GetError()); err != nil || started[p].GetGeneration() != 1 || started[p].GetReduceId() != "r#1" {
			t.Fatalf("position %d started: %v", p, started[p])
		}
		if err := messages.ErrOrNil(done[p].GetError()); err != nil {
			t.Fatalf("position %d: %v", p, err)
		}
		o := store.Lookup(b.Tasks[p].GetOutputId())
		if o == nil {
			t.Fatalf("position %d's output is not in the store", p)
		}
		if got, err := o.Bytes(); err != nil || !bytes.Equal(got, bytes.Repeat([]byte{byte(p + 1)}, size)) {
			t.Fatalf("position %d's output: %v, %v", p, got, err)
		}
	}
	system.Root.Send(node, &messages.ReduceRelease{ReduceId: "r#1"})
	putWaitFor(t, "release of the outputs", func() bool {
		for _, tk := range b.Tasks {
			if store.Lookup(tk.GetOutputId()) != nil {
				return false
			}
		}
		return true
	})
}

// A task in a batch that the node cannot run is answered as that
// position's start error (INVALID_ARGUMENT), at once; the batch's other
// tasks, before and after it, run as if it were not there.
func TestReduceTaskBatchReportsABadTaskAlone(t *testing.T) {
	const n, size = 3, 64
	system, node, coord, store, reports := batchNode(t, n, size)
	bad := leafTask("r#1", 1, "s1", size)
	bad.OutputId = "" // names nothing to create
	b := &messages.ReduceTaskBatch{Tasks: []*messages.ReduceTask{leafTask("r#1", 0, "s0", size), bad, leafTask("r#1", 2, "s2", size)}}
	system.Root.RequestWithCustomSender(node, b, coord)
	started, done := reportsOf(t, reports, n, n-1)
	if err := messages.ErrOrNil(started[1].GetError()); !errors.Is(err, messages.ErrInvalidArgument) || started[1].GetGeneration() != 1 || started[1].GetReduceId() != "r#1" {
		t.Fatalf("the bad position started: %v, want INVALID_ARGUMENT", started[1])
	}
	if done[1] != nil {
		t.Fatalf("the bad position reported done: %v", done[1])
	}
	for _, p := range []int32{0, 2} {
		if messages.ErrOrNil(started[p].GetError()) != nil || messages.ErrOrNil(done[p].GetError()) != nil {
			t.Fatalf("position %d: %v, %v", p, started[p], done[p])
		}
		if store.Lookup(b.Tasks[p].GetOutputId()) == nil {
			t.Fatalf("position %d's output is not in the store", p)
		}
	}
	select {
	case m := <-reports:
		t.Fatalf("a report more: %v", m)
	case <-time.After(100 * time.Millisecond):
	}
}

// A batch whose ring share names no sliced run (here: two participants)
// runs its listed tasks and answers the share as its gather's start,
// INVALID_ARGUMENT, at once: the coordinator does not wait for a run
// that never starts.
func TestReduceTaskBatchRefusesABadRingShare(t *testing.T) {
	const n, size = 2, 64
	system, node, coord, _, reports := batchNode(t, n, size)
	share := &messages.SlicedRingShare{ReduceId: "r#1", TargetId: "target", Dtype: messages.DType_INT64, Size: 64, Slices: 2,
		Index: 1, SourceId: "s1", Node: &messages.NodeRef{NodeId: "n"}, Predecessor: &messages.NodeRef{NodeId: "m"}, GatherPosition: 5}
	b := &messages.ReduceTaskBatch{Tasks: []*messages.ReduceTask{leafTask("r#1", 0, "s0", size)}, Ring: share}
	system.Root.RequestWithCustomSender(node, b, coord)
	started, done := reportsOf(t, reports, 2, 1)
	if err := messages.ErrOrNil(started[5].GetError()); !errors.Is(err, messages.ErrInvalidArgument) || started[5].GetReduceId() != "r#1" {
		t.Fatalf("the share's gather started: %v, want INVALID_ARGUMENT", started[5])
	}
	if messages.ErrOrNil(started[0].GetError()) != nil || messages.ErrOrNil(done[0].GetError()) != nil {
		t.Fatalf("the listed task: %v, %v", started[0], done[0])
	}
}

// CheckTask refuses what no worker could run.
func TestCheckTask(t *testing.T) {
	ok := leafTask("r#1", 0, "s0", 8)
	if err := storeproto.CheckTask(ok); err != nil {
		t.Fatalf("a good task: %v", err)
	}
	gather := leafTask("r#1", 9, "", 8)
	gather.Gather = true
	gather.Children = []*messages.ReduceInput{{Node: &messages.NodeRef{NodeId: "m"}, ObjectId: "x"}}
	if err := storeproto.CheckTask(gather); err != nil {
		t.Fatalf("a gather (no source): %v", err)
	}
	relay := func() *messages.ReduceTask {
		r := leafTask("r#1", 20, "", 8)
		r.Relay = true
		r.Children = []*messages.ReduceInput{{Node: &messages.NodeRef{NodeId: "m"}, ObjectId: "x"}}
		return r
	}
	if err := storeproto.CheckTask(relay()); err != nil {
		t.Fatalf("a relay (no source, one input): %v", err)
	}
	for name, mut := range map[string]func(*messages.ReduceTask){
		"relay with a source": func(t *messages.ReduceTask) { t.SourceId = "s0" },
		"relay of nothing":    func(t *messages.ReduceTask) { t.Children = nil },
		"relay of two":        func(t *messages.ReduceTask) { t.Children = append(t.Children, t.Children[0]) },
		"relay and gather":    func(t *messages.ReduceTask) { t.Gather = true },
	} {
		bad := relay()
		mut(bad)
		if err := storeproto.CheckTask(bad); !errors.Is(err, messages.ErrInvalidArgument) {
			t.Errorf("%s: %v, want INVALID_ARGUMENT", name, err)
		}
	}
	for name, mut := range map[string]func(*messages.ReduceTask){
		"no reduce id":   func(t *messages.ReduceTask) { t.ReduceId = "" },
		"negative":       func(t *messages.ReduceTask) { t.Position = -1 },
		"generation 0":   func(t *messages.ReduceTask) { t.Generation = 0 },
		"negative size":  func(t *messages.ReduceTask) { t.Size = -1 },
		"no output":      func(t *messages.ReduceTask) { t.OutputId = "" },
		"no source":      func(t *messages.ReduceTask) { t.SourceId = "" },
		"input, no node": func(t *messages.ReduceTask) { t.Children = []*messages.ReduceInput{{ObjectId: "x"}} },
	} {
		bad := leafTask("r#1", 0, "s0", 8)
		mut(bad)
		if err := storeproto.CheckTask(bad); !errors.Is(err, messages.ErrInvalidArgument) {
			t.Errorf("%s: %v, want INVALID_ARGUMENT", name, err)
		}
	}
	if err := storeproto.CheckTask(nil); !errors.Is(err, messages.ErrInvalidArgument) {
		t.Errorf("nil: %v", err)
	}
}
