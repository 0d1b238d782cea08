package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hoplite-go/hoplite/internal/testhooks"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/events"
	"github.com/hoplite-go/hoplite/internal/experiments"
	"github.com/hoplite-go/hoplite/messages"
)

// The recovery part of the demo: a compact copy of examples/recovery (the
// example watches with an actor and narrates more). One node is killed in
// the middle of a broadcast and in the middle of a reduce, at steps fixed
// by hooks, and the recovery events are printed as they are published.
const (
	recoveryNodes  = 8
	recoveryVictim = 1
	recoveryObject = "demo-recovery-object" // shard-2: not on the victim
	recoveryTarget = "demo-recovery-sum"    // shard-0: the caller's node
	recoveryNum    = 6                      // reduce 6 of the 8 sources
)

// eventPrinter prints recovery events as the EventStream delivers them,
// in one order with the narrative, and lets the scenario wait for one.
type eventPrinter struct {
	mu     sync.Mutex
	out    io.Writer
	seen   []any
	closed bool // nothing is written after the demo moved on
}

func (p *eventPrinter) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
}

func (p *eventPrinter) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.out, format, args...)
}

func (p *eventPrinter) handle(e any) {
	var line string
	switch e := e.(type) {
	case *events.NodeFailed:
		line = fmt.Sprintf("[NodeFailed] %s failed (seen by %s)", e.Node, e.DetectedBy)
	case *events.SenderSwitched:
		line = fmt.Sprintf("[SenderSwitched] %s switched sender %s → %s at %.1f MiB", e.Receiver, e.From, e.To, float64(e.Offset)/(1<<20))
	case *events.TreeNodeReplaced:
		line = fmt.Sprintf("[TreeNodeReplaced] position %d lost %s, %s takes it", e.Position, e.Failed, orElse(e.Replacement, "the next arrival"))
	case *events.AncestorsInvalidated:
		line = fmt.Sprintf("[AncestorsInvalidated] ancestors %v cleared, they pull again", e.Positions)
	case *events.ShardRebuilt:
		_, shard, _ := strings.Cut(e.Shard, "/")
		line = fmt.Sprintf("[ShardRebuilt] directory %s restarted on %s", shard, e.Host)
	case *events.ReduceDone:
		line = fmt.Sprintf("[ReduceDone] done in %v: reduced %v", e.Elapsed.Round(time.Millisecond), e.Reduced)
		if e.Err != nil {
			line = fmt.Sprintf("[ReduceDone] failed after %v: %v", e.Elapsed.Round(time.Millisecond), e.Err)
		}
	case *actor.SupervisorEvent:
		line = fmt.Sprintf("[Supervisor] %s: %v after %v", e.Child.GetId(), e.Directive, e.Reason)
	default:
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	fmt.Fprintf(p.out, "    %s\n", line)
	p.seen = append(p.seen, e)
}

func orElse(s, otherwise string) string {
	if s == "" {
		return otherwise
	}
	return s
}

// waitEvent waits (at most 10 s) for a printed event that ok accepts.
func (p *eventPrinter) waitEvent(ctx context.Context, what string, ok func(any) bool) error {
	return poll(ctx, what, func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		for _, e := range p.seen {
			if ok(e) {
				return true
			}
		}
		return false
	})
}

// poll waits until cond holds, for at most 10 s.
func poll(ctx context.Context, what string, cond func() bool) error {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for %s: %w", what, ctx.Err())
		case <-time.After(2 * time.Millisecond):
		}
	}
	return nil
}

// runRecovery runs both failure scenarios on a fresh cluster: size is the
// broadcast object (the reduce sources are half of it, at least 1 MiB).
func runRecovery(ctx context.Context, out io.Writer, size int, link float64, chunk int, log *logrus.Logger) error {
	if size < 2*chunk {
		return fmt.Errorf("the recovery object (%d bytes) must span at least two chunks of %d", size, chunk)
	}
	srcSize := max(size/2, 1<<20) &^ 7
	if !log.IsLevelEnabled(logrus.DebugLevel) {
		// The events tell the story; the warnings that repeat it go.
		quiet := logrus.New()
		quiet.SetOutput(log.Out)
		quiet.SetLevel(logrus.ErrorLevel)
		log = quiet
	}
	var stallAt atomic.Int64
	stalled, hold, done := make(chan struct{}), make(chan struct{}), make(chan struct{})
	var stallOnce, holdOnce sync.Once
	releaseHold := func() { holdOnce.Do(func() { close(hold) }) }
	cfg := cluster.Config{Nodes: recoveryNodes, ChunkSize: chunk, LinkBandwidth: link, Log: log,
		Capacity: int64(size+recoveryNodes*srcSize) * 2}
	// R1..R6 on a binary tree (the thesis figure below), not the cost
	// model's choice for these sizes.
	experiments.In(&cfg).ReduceDegree = 2
	testhooks.In(&cfg).Store.BeforeFetchChunk = func(node, id string, off int64) {
		if node == "node-1" && id == recoveryObject && off >= int64(size/2) {
			first := false
			stallOnce.Do(func() { first = true })
			if first { // the victim stops at half, once
				stallAt.Store(off)
				close(stalled)
				<-done // killed while it waits here
			}
		}
	}
	// What the shards and the Reduce's coordinator received, so that the
	// sources arrive at the coordinator in Put order (R1, R2, …: the tree
	// the events describe) by messages, not by sleeps: each source's shard
	// lives on its own member, and two Puts in a row reached the
	// coordinator out of order under load ("R1+R7+R4+R3+R5+R6").
	var arrMu sync.Mutex
	subscribed, heard := map[string]bool{}, map[string]bool{}
	testhooks.In(&cfg).Shard = func(_ string, msg any) {
		if m, ok := msg.(*messages.Subscribe); ok {
			arrMu.Lock()
			subscribed[m.GetObjectId()] = true
			arrMu.Unlock()
		}
	}
	testhooks.In(&cfg).Coordinator = func(_ string, msg any) {
		if m, ok := msg.(*messages.LocationUpdate); ok && !m.GetDeleted() && m.GetNode() != nil {
			arrMu.Lock()
			heard[m.GetObjectId()] = true
			arrMu.Unlock()
		}
	}
	testhooks.In(&cfg).Store.BeforePutChunk = func(node, id string, off int64) {
		if id == "R6" && off > 0 {
			select { // R6 is placed but cannot finish
			case <-hold:
			case <-done:
			}
		}
	}
	cfg.UI = demoUI
	l, err := cluster.StartLocal(cfg)
	if err != nil {
		return err
	}
	defer stopQuietly(l, log)
	defer func() { close(done); releaseHold() }() // no hook blocks past here
	pr := &eventPrinter{out: out}
	sub := l.System().EventStream.Subscribe(pr.handle)
	defer l.System().EventStream.Unsubscribe(sub)
	defer pr.close()
	written := l.Written

	// Broadcast: node-1 stalls at half, node-2..7 fetch behind it in a
	// chain; node-1 dies and node-2 resumes from node-0 at its offset.
	data := randomData(size)
	if err := l.Client(0).Put(ctx, recoveryObject, data); err != nil {
		return err
	}
	errs := make(chan error, recoveryNodes)
	get := func(i int) {
		go func() {
			b, err := l.Client(i).GetReadOnly(ctx, recoveryObject)
			if err == nil && !bytes.Equal(b, data) {
				err = fmt.Errorf("node-%d received other bytes", i)
			}
			if i != recoveryVictim {
				errs <- err
			}
		}()
	}
	get(recoveryVictim)
	select {
	case <-stalled:
	case <-time.After(10 * time.Second):
		return fmt.Errorf("node-1 did not reach half of the object")
	case <-ctx.Done():
		return ctx.Err()
	}
	for i := recoveryVictim + 1; i < recoveryNodes; i++ {
		get(i)
		if err := poll(ctx, "a sender", func() bool { return written(i, recoveryObject) > 0 }); err != nil {
			return err
		}
	}
	if err := poll(ctx, "node-2 to catch up", func() bool { return written(2, recoveryObject) == stallAt.Load() }); err != nil {
		return err
	}
	pr.printf("  broadcast %d MiB: node-1 stalls at %.1f MiB, node-2..node-%d fetch behind it; killing node-1\n",
		size>>20, float64(stallAt.Load())/(1<<20), recoveryNodes-1)
	killed := time.Now()
	if err := l.Kill(recoveryVictim); err != nil {
		return err
	}
	for range recoveryNodes - 2 {
		if err := <-errs; err != nil {
			return err
		}
	}
	pr.printf("  broadcast: all %d live receivers have the same %d bytes (verified), %v after the kill\n",
		recoveryNodes-2, size, time.Since(killed).Round(time.Millisecond))
	if err := l.Restart(recoveryVictim); err != nil {
		return err
	}

	// Reduce (thesis Figure 2.5b): R1..R6 placed on a binary tree, R7 a
	// backup, R6's Put held; node-1 (R2, position 1) dies.
	ids := make([]string, recoveryNodes)
	src := map[string][]byte{}
	for i := range ids {
		ids[i] = fmt.Sprintf("R%d", i+1)
		src[ids[i]] = make([]byte, srcSize)
		for k := 0; k < srcSize; k += 8 {
			binary.LittleEndian.PutUint64(src[ids[i]][k:], uint64(k*(i+1))) // small: no overflow
		}
	}
	type result struct {
		r   *messages.ReduceReply
		err error
	}
	res := make(chan result, 1)
	go func() {
		r, err := l.Client(0).Reduce(ctx, recoveryTarget, ids, recoveryNum, messages.ReduceOp_SUM, messages.DType_INT64)
		res <- result{r, err}
	}()
	// The coordinator subscribes to every source first: each Put's
	// location is then pushed to it, none replayed out of order.
	if err := poll(ctx, "the coordinator's subscriptions", func() bool {
		arrMu.Lock()
		defer arrMu.Unlock()
		return len(subscribed) >= len(ids)
	}); err != nil {
		return err
	}
	held := make(chan error, 1)
	for i, id := range ids[:recoveryNum+1] {
		if id == "R6" {
			go func() { held <- l.Client(i).Put(ctx, id, src[id]) }()
		} else if err := l.Client(i).Put(ctx, id, src[id]); err != nil {
			return err
		}
		if err := poll(ctx, id+" to reach the coordinator", func() bool {
			arrMu.Lock()
			defer arrMu.Unlock()
			return heard[id]
		}); err != nil {
			return err
		}
	}
	pr.printf("  reduce: SUM of %d of %d int64 sources of %d MiB, R6's Put held, R7 a backup; killing node-1 (R2)\n",
		recoveryNum, recoveryNodes, srcSize>>20)
	if err := l.Kill(recoveryVictim); err != nil {
		return err
	}
	err = pr.waitEvent(ctx, "TreeNodeReplaced", func(e any) bool { _, ok := e.(*events.TreeNodeReplaced); return ok })
	releaseHold()
	if err != nil {
		return err
	}
	if err := <-held; err != nil {
		return err
	}
	r := <-res
	if r.err != nil {
		return r.err
	}
	reduced := r.r.GetReducedIds()
	once := map[string]bool{"R1": true, "R3": true, "R4": true, "R5": true, "R6": true, "R7": true}
	for _, id := range reduced {
		if !once[id] {
			return fmt.Errorf("reduced %v, want R1, R3..R7 each once (R2 was lost)", reduced)
		}
		once[id] = false
	}
	sum, err := l.Client(recoveryNodes-1).GetReadOnly(ctx, recoveryTarget)
	if err != nil {
		return err
	}
	if len(reduced) != recoveryNum || len(sum) != srcSize {
		return fmt.Errorf("reduced %d sources into %d bytes, want %d into %d", len(reduced), len(sum), recoveryNum, srcSize)
	}
	for k := 0; k < srcSize; k += 8 {
		var want uint64
		for _, id := range reduced {
			want += binary.LittleEndian.Uint64(src[id][k:])
		}
		if g := binary.LittleEndian.Uint64(sum[k:]); g != want {
			return fmt.Errorf("%s element %d is %d, want %d", recoveryTarget, k/8, g, want)
		}
	}
	if err := pr.waitEvent(ctx, "ReduceDone", func(e any) bool { _, ok := e.(*events.ReduceDone); return ok }); err != nil {
		return err
	}
	pr.printf("  reduce: %s = %s, verified element by element\n", recoveryTarget, strings.Join(reduced, "+"))
	return nil
}
