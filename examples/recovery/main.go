// Command recovery shows Hoplite repairing itself while an application
// actor watches. A monitor actor subscribes to the actor system's
// EventStream and prints every recovery event as it arrives (Hoplite's
// domain events and Proto.Actor's *actor.SupervisorEvent), while the
// program kills a node in the middle of a broadcast and in the middle of a
// reduce, and checks every result byte for byte.
//
// The kills are deterministic: test hooks of the embedded cluster hold a
// node's copy (or a source's Put) at a chosen offset, so the failure always
// hits the same step (thesis Figures 2.4 c'/d' and 2.5b):
//
//   - broadcast: node-1 receives half of the object and stops there; the
//     other receivers fetch behind it (node-2 from node-1's partial copy,
//     node-3 from node-2's, ...). node-1 is killed: node-2 resumes from
//     node-0 at its offset, only the missing bytes move, nobody else
//     notices.
//   - reduce: SUM of 6 of 8 sources on a binary tree; R1..R6 are placed,
//     R7 waits as a backup, R6's Put is held so the tree cannot finish, and
//     node-1 (R2, an inner position) is killed: R7 takes R2's position, the
//     root clears and pulls again, the other subtree keeps its progress.
package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hoplite-go/hoplite/internal/testhooks"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/eventstream"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/events"
	"github.com/hoplite-go/hoplite/internal/experiments"
	"github.com/hoplite-go/hoplite/messages"
)

const (
	nodes      = 8
	chunkSize  = 1 << 20
	objectSize = 16 << 20 // the broadcast object
	sourceSize = 8 << 20  // each reduce source: 1 Mi int64s
	reduceNum  = 6        // reduce 6 of the 8 sources
	linkBps    = 125e6    // emulated link per node: 1 Gbit/s up and down
	opTimeout  = 20 * time.Second
	objectID   = "weights-v1" // its directory shard is not on the victim
	targetID   = "sum"        // its shard (and the coordinator) sits on node-0, the caller
	victim     = 1            // the node killed, twice
)

// ---- the monitor: an application actor watching recovery ----

// Messages to the monitor. They stay in this process, so plain structs do.
type (
	// say prints a line of narrative, in order with the events.
	say struct{ text string }
	// await answers with the first event (seen before or later) that
	// matches.
	await struct{ match func(any) bool }
	// flush answers once everything sent before it is printed.
	flush struct{}
)

type waiter struct {
	match func(any) bool
	who   *actor.PID
}

// monitor prints each recovery event as it happens, stamped with the time
// since it started.
type monitor struct {
	out   io.Writer
	start time.Time
	sub   *eventstream.Subscription
	seen  []any
	waits []waiter
}

func newMonitor(out io.Writer) *actor.Props {
	return actor.PropsFromProducer(func() actor.Actor { return &monitor{out: out} })
}

// recoveryEvent is what the monitor subscribes to.
func recoveryEvent(e any) bool {
	switch e.(type) {
	case *events.NodeFailed, *events.SenderSwitched, *events.TreeNodeReplaced, *events.AncestorsInvalidated,
		*events.ShardRebuilt, *events.ReduceDone, *actor.SupervisorEvent:
		return true
	}
	return false
}

func (m *monitor) Receive(ctx actor.Context) {
	switch msg := ctx.Message().(type) {
	case *actor.Started:
		m.start = time.Now()
		// The stream calls the handler on the publisher's goroutine: hand
		// the event to the mailbox and handle it here, one at a time.
		system, self := ctx.ActorSystem(), ctx.Self()
		m.sub = system.EventStream.SubscribeWithPredicate(func(e any) { system.Root.Send(self, e) }, recoveryEvent)
	case *actor.Stopping:
		ctx.ActorSystem().EventStream.Unsubscribe(m.sub)
	case say:
		fmt.Fprintln(m.out, msg.text)
	case flush:
		ctx.Respond(flush{})
	case await:
		for _, e := range m.seen {
			if msg.match(e) {
				ctx.Respond(e)
				return
			}
		}
		m.waits = append(m.waits, waiter{match: msg.match, who: ctx.Sender()})
	default:
		if !recoveryEvent(msg) {
			return // lifecycle messages
		}
		kind, text := describe(msg)
		fmt.Fprintf(m.out, "  %+7.3fs [%s] %s\n", time.Since(m.start).Seconds(), kind, text)
		m.seen = append(m.seen, msg)
		m.waits = slices.DeleteFunc(m.waits, func(w waiter) bool {
			if w.match(msg) {
				ctx.Send(w.who, msg)
				return true
			}
			return false
		})
	}
}

// describe turns an event into a line a person reads.
func describe(e any) (string, string) {
	switch e := e.(type) {
	case *events.NodeFailed:
		return "NodeFailed", fmt.Sprintf("%s failed (seen by %s)", e.Node, e.DetectedBy)
	case *events.SenderSwitched:
		return "SenderSwitched", fmt.Sprintf("%s switched sender %s → %s at %s of %s (only the rest moves)",
			e.Receiver, e.From, e.To, mib(e.Offset), e.Object)
	case *events.TreeNodeReplaced:
		if e.Replacement == "" {
			return "TreeNodeReplaced", fmt.Sprintf("reduce %s: position %d lost %s, waits for the next arrival", reduceName(e.Reduce), e.Position, e.Failed)
		}
		return "TreeNodeReplaced", fmt.Sprintf("reduce %s: position %d lost %s, %s takes it", reduceName(e.Reduce), e.Position, e.Failed, e.Replacement)
	case *events.AncestorsInvalidated:
		return "AncestorsInvalidated", fmt.Sprintf("reduce %s: ancestors %v cleared, they pull again", reduceName(e.Reduce), e.Positions)
	case *events.ShardRebuilt:
		_, shard, _ := strings.Cut(e.Shard, "/")
		return "ShardRebuilt", fmt.Sprintf("directory %s restarted on %s, rebuilt from the store nodes' copies", shard, e.Host)
	case *events.ReduceDone:
		if e.Err != nil {
			return "ReduceDone", fmt.Sprintf("reduce %s failed after %v: %v", reduceName(e.Reduce), e.Elapsed.Round(time.Millisecond), e.Err)
		}
		return "ReduceDone", fmt.Sprintf("reduce %s done in %v: reduced %v", reduceName(e.Reduce), e.Elapsed.Round(time.Millisecond), e.Reduced)
	case *actor.SupervisorEvent:
		return "Supervisor", fmt.Sprintf("%s: %v after %v", e.Child.GetId(), e.Directive, e.Reason)
	}
	return "?", fmt.Sprint(e)
}

// reduceName drops the nonce from a reduce id ("sum#1a2b" → "sum").
func reduceName(id string) string {
	name, _, _ := strings.Cut(id, "#")
	return name
}

func mib(n int64) string {
	if n%(1<<20) == 0 {
		return fmt.Sprintf("%d MiB", n>>20)
	}
	return fmt.Sprintf("%.2f MiB", float64(n)/(1<<20))
}

// ---- fault injection ----

// faults holds the hooks that make both failures hit the same step on
// every run. The hooks run on the nodes' copy goroutines; each blocks only
// while the program wants it to, and closing done frees all of them.
type faults struct {
	stallOnce sync.Once
	stalled   chan struct{} // the victim holds half the object
	holdID    string        // a source whose Put is held after its first chunk
	hold      chan struct{} // closed: the held Put goes on
	holdOnce  sync.Once
	done      chan struct{} // closed when run ends: nothing stays blocked
}

func newFaults() *faults {
	return &faults{stalled: make(chan struct{}), hold: make(chan struct{}), done: make(chan struct{})}
}

func (f *faults) hooks() cluster.Config {
	var cfg cluster.Config
	testhooks.In(&cfg).Store.BeforeFetchChunk = func(node, id string, off int64) {
		if node == nodeName(victim) && id == objectID && off == objectSize/2 {
			first := false
			f.stallOnce.Do(func() { first = true }) // not the restarted node
			if first {
				close(f.stalled)
				<-f.done // killed while it waits here
			}
		}
	}
	testhooks.In(&cfg).Store.BeforePutChunk = func(node, id string, off int64) {
		if id == f.holdID && off > 0 {
			select {
			case <-f.hold:
			case <-f.done:
			}
		}
	}
	return cfg
}

func (f *faults) releaseHold() { f.holdOnce.Do(func() { close(f.hold) }) }

func nodeName(i int) string { return fmt.Sprintf("node-%d", i) }

// ---- the program ----

type program struct {
	l   *cluster.Local
	mon *actor.PID
	f   *faults
}

func (p *program) say(format string, args ...any) {
	p.l.System().Root.Send(p.mon, say{text: fmt.Sprintf(format, args...)})
}

// await waits (bounded) until the monitor has printed an event of type T
// that satisfies ok.
func awaitEvent[T any](p *program, what string, ok func(T) bool) (T, error) {
	var zero T
	res, err := p.l.System().Root.RequestFuture(p.mon, await{match: func(e any) bool {
		v, is := e.(T)
		return is && ok(v)
	}}, 10*time.Second).Result()
	if err != nil {
		return zero, fmt.Errorf("no %s event: %w", what, err)
	}
	v, ok2 := res.(T)
	if !ok2 {
		return zero, fmt.Errorf("waiting for %s: got %T", what, res)
	}
	return v, nil
}

// waitFor polls cond until it holds, for at most 10 s.
func waitFor(ctx context.Context, what string, cond func() bool) error {
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

// written is how much of id node i holds.
func (p *program) written(i int, id string) int64 {
	return p.l.Written(i, id)
}

// senders lists "receiver <- sender" for the transfers the directory
// recorded, in receiver order.
func (p *program) senders(ctx context.Context, id string) (string, error) {
	info, err := p.l.Client(0).Info(ctx, id, false)
	if err != nil {
		return "", err
	}
	var edges []string
	for _, tr := range info.GetTransfers() {
		if !tr.GetAborted() {
			edges = append(edges, tr.GetReceiver()+" <- "+tr.GetSender())
		}
	}
	slices.Sort(edges)
	return strings.Join(edges, ", "), nil
}

func (p *program) broadcast(ctx context.Context) error {
	data := make([]byte, objectSize)
	_, _ = rand.NewChaCha8([32]byte{1}).Read(data) // incompressible, reproducible
	p.say("== Broadcast: %s (%s) Put on node-0, Get on node-1..node-%d, link 1 Gbit/s per node ==", objectID, mib(objectSize), nodes-1)
	if err := p.l.Client(0).Put(ctx, objectID, data); err != nil {
		return fmt.Errorf("put: %w", err)
	}
	gets := make([]chan error, nodes)
	get := func(i int) chan error {
		c := make(chan error, 1)
		go func() {
			b, err := p.l.Client(i).GetReadOnly(ctx, objectID)
			if err == nil && !bytes.Equal(b, data) {
				err = fmt.Errorf("%s received other bytes than were Put", nodeName(i))
			}
			c <- err
		}()
		return c
	}
	gets[victim] = get(victim) // fails with its node: nobody waits for it
	select {
	case <-p.f.stalled:
	case <-ctx.Done():
		return ctx.Err()
	}
	p.say("%s holds %s and stops there (a hook); the others start their Gets one by one", nodeName(victim), mib(objectSize/2))
	for i := victim + 1; i < nodes; i++ {
		gets[i] = get(i)
		if err := waitFor(ctx, nodeName(i)+" to get a sender", func() bool { return p.written(i, objectID) > 0 }); err != nil {
			return err
		}
	}
	tree, err := p.senders(ctx, objectID)
	if err != nil {
		return err
	}
	p.say("who fetches from whom: %s", tree)
	if err := waitFor(ctx, "node-2 to hold all node-1 has", func() bool { return p.written(victim+1, objectID) == objectSize/2 }); err != nil {
		return err
	}
	p.say("killing %s: %s streams from its partial copy", nodeName(victim), nodeName(victim+1))
	killed := time.Now()
	if err := p.l.Kill(victim); err != nil {
		return err
	}
	for i := victim + 1; i < nodes; i++ {
		select {
		case err := <-gets[i]:
			if err != nil {
				return err
			}
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	p.say("all %d live receivers have the same %d bytes (verified), %v after the kill", nodes-2, objectSize, time.Since(killed).Round(time.Millisecond))
	if tree, err = p.senders(ctx, objectID); err != nil {
		return err
	}
	p.say("who fetched from whom: %s", tree)
	if err := p.l.Restart(victim); err != nil {
		return err
	}
	if err := <-get(victim); err != nil {
		return fmt.Errorf("restarted %s: %w", nodeName(victim), err)
	}
	p.say("%s restarted empty and fetched %s again (verified)", nodeName(victim), objectID)
	return nil
}

// int64s is n little-endian int64s small enough that sums never overflow.
func int64s(seed uint64, n int) []byte {
	r := rand.New(rand.NewPCG(seed, 3))
	b := make([]byte, 8*n)
	for i := range n {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(r.Int64N(1<<40)-1<<39))
	}
	return b
}

func (p *program) reduce(ctx context.Context) error {
	const m = nodes
	ids := make([]string, m)
	data := map[string][]byte{}
	for i := range ids {
		ids[i] = fmt.Sprintf("R%d", i+1)
		data[ids[i]] = int64s(uint64(i+1), sourceSize/8)
	}
	p.say("\n== Reduce: %s = SUM of %d of %d int64 sources of %s (Ri on node-(i-1)), binary tree, caller on node-0 ==",
		targetID, reduceNum, m, mib(sourceSize))
	type result struct {
		r   *messages.ReduceReply
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := p.l.Client(0).Reduce(ctx, targetID, ids, reduceNum, messages.ReduceOp_SUM, messages.DType_INT64)
		done <- result{r, err}
	}()
	arrived := func(id string) func() bool {
		return func() bool {
			info, err := p.l.Client(0).Info(ctx, id, false)
			return err == nil && len(info.GetLocations()) > 0
		}
	}
	time.Sleep(20 * time.Millisecond) // the coordinator subscribes first: arrival order = Put order
	held := make(chan error, 1)
	for i, id := range ids[:reduceNum+1] {
		if id == p.f.holdID {
			go func() { held <- p.l.Client(i).Put(ctx, id, data[id]) }()
		} else if err := p.l.Client(i).Put(ctx, id, data[id]); err != nil {
			return fmt.Errorf("put %s: %w", id, err)
		}
		if err := waitFor(ctx, id+" to arrive", arrived(id)); err != nil {
			return err
		}
	}
	p.say("R1..R6 are placed as they arrived (R2 at position 1 reduces R1 and R3 for the root, position 3); R7 waits as a backup;")
	p.say("R6's Put is held (a hook), so the tree cannot finish; R8 never comes: 6 of 8 need only six")
	time.Sleep(50 * time.Millisecond) // R7's arrival reaches the coordinator
	p.say("killing %s, which holds R2", nodeName(victim))
	if err := p.l.Kill(victim); err != nil {
		return err
	}
	_, err := awaitEvent(p, "TreeNodeReplaced", func(e *events.TreeNodeReplaced) bool { return e.Failed == "R2" })
	p.f.releaseHold()
	if err != nil {
		return err
	}
	if err := <-held; err != nil {
		return fmt.Errorf("put %s: %w", p.f.holdID, err)
	}
	var res result
	select {
	case res = <-done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if res.err != nil {
		return res.err
	}
	reduced := res.r.GetReducedIds()
	want := map[string]bool{"R1": true, "R3": true, "R4": true, "R5": true, "R6": true, "R7": true}
	seen := map[string]bool{}
	for _, id := range reduced {
		if !want[id] || seen[id] {
			return fmt.Errorf("reduced %v: want R1, R3..R7 each once (R2 was lost)", reduced)
		}
		seen[id] = true
	}
	if len(seen) != reduceNum {
		return fmt.Errorf("reduced %v: want %d sources", reduced, reduceNum)
	}
	got, err := p.l.Client(nodes-1).GetReadOnly(ctx, targetID)
	if err != nil {
		return err
	}
	if len(got) != sourceSize {
		return fmt.Errorf("%s has %d bytes, want %d", targetID, len(got), sourceSize)
	}
	for k := 0; k < sourceSize; k += 8 {
		var sum int64
		for _, id := range reduced {
			sum += int64(binary.LittleEndian.Uint64(data[id][k:]))
		}
		if g := int64(binary.LittleEndian.Uint64(got[k:])); g != sum {
			return fmt.Errorf("%s element %d is %d, want %d", targetID, k/8, g, sum)
		}
	}
	if _, err := awaitEvent(p, "ReduceDone", func(e *events.ReduceDone) bool { return e.Target == targetID }); err != nil {
		return err
	}
	p.say("%s = %s: R2 is out, every source counted once; %d int64s verified element by element",
		targetID, strings.Join(reduced, "+"), sourceSize/8)
	return nil
}

// run starts the cluster and the monitor, runs both scenarios and stops
// everything; nothing writes to out after it returns.
func run(ctx context.Context, out io.Writer) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	log := logrus.New()
	log.SetLevel(logrus.ErrorLevel) // the monitor tells the story
	f := newFaults()
	f.holdID = "R6"
	cfg := f.hooks()
	cfg.Nodes, cfg.ChunkSize, cfg.LinkBandwidth = nodes, chunkSize, linkBps
	experiments.In(&cfg).ReduceDegree = 2 // the binary tree the story above tells
	cfg.DefaultTimeout, cfg.Log = opTimeout, log
	l, err := cluster.StartLocal(cfg)
	if err != nil {
		return err
	}
	defer l.Stop()
	defer close(f.done) // before Stop: no hook stays blocked
	p := &program{l: l, f: f, mon: l.System().Root.Spawn(newMonitor(out))}
	defer func() {
		// Everything said is printed before the monitor stops.
		_, _ = l.System().Root.RequestFuture(p.mon, flush{}, 5*time.Second).Result()
		_ = l.System().Root.StopFuture(p.mon).Wait()
	}()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if err := p.broadcast(ctx); err != nil {
		return fmt.Errorf("broadcast: %w", err)
	}
	if err := p.reduce(ctx); err != nil {
		return fmt.Errorf("reduce: %w", err)
	}
	return nil
}

func main() {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := run(ctx, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "recovery:", err)
		os.Exit(1)
	}
}
