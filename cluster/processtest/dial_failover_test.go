package processtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/storenode"
)

// TestDialFailsOver: a Dial client given three `hoplite node` processes
// keeps working while two of them are SIGKILLed one after the other: the
// Put, Get and Wait after each kill go to a live member within the
// call's deadline (Gets, and the first Put, on the data plane), and the client names a live member first. A second
// client given only the first member's address learned the others from
// its handshake and fails over too. Wait answers with the first of a
// set to appear, Put by another member.
func TestDialFailsOver(t *testing.T) {
	t.Parallel()
	bin := hopliteBinary(t)
	slots, seeds := memberSlots(t, 3)
	nodes, tc, _ := startConverged(t, bin, slots, seeds)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := cluster.Dial(ctx, strings.Join([]string{nodes[0].address, nodes[1].address, nodes[2].address}, ","))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	one, err := cluster.Dial(ctx, nodes[0].address)
	if err != nil {
		t.Fatal(err)
	}
	defer one.Close()
	if got := c.Endpoints(); len(got) != 3 || got[0] != nodes[0].address {
		t.Fatalf("endpoints %v: want the three, %s in use", got, nodes[0].address)
	}

	// Wait for the first of two ids, one Put meanwhile by another member.
	waited := make(chan error, 1)
	go func() {
		wctx, wcancel := context.WithTimeout(ctx, 30*time.Second)
		defer wcancel()
		ready, notReady, err := c.Wait(wctx, []string{"wait-x", "wait-y"}, 1)
		if err == nil && (!slices.Equal(ready, []string{"wait-y"}) || !slices.Equal(notReady, []string{"wait-x"})) {
			err = fmt.Errorf("ready %v, not ready %v; want [wait-y], [wait-x]", ready, notReady)
		}
		waited <- err
	}()
	putRetry(t, tc.of(nodes[2]), "wait-y", []byte("y"))
	if err := <-waited; err != nil {
		t.Fatalf("wait for the first of two: %v", err)
	}
	// At its deadline: what exists, without an error.
	sctx, scancel := context.WithTimeout(ctx, 500*time.Millisecond)
	ready, notReady, err := c.Wait(sctx, []string{"wait-y", "wait-z"}, 2)
	scancel()
	if err != nil || !slices.Equal(ready, []string{"wait-y"}) || !slices.Equal(notReady, []string{"wait-z"}) {
		t.Fatalf("wait for 2 of which 1 exists, until a deadline: ready %v, not ready %v, %v", ready, notReady, err)
	}
	// More ids than one Wait takes: INVALID_ARGUMENT naming the cap, from
	// the client, and from the node for a client that does not check.
	many := make([]string, storenode.MaxWaitObjects+1)
	for i := range many {
		many[i] = fmt.Sprintf("many-%d", i)
	}
	if _, _, err := c.Wait(ctx, many, 1); !errors.Is(err, messages.ErrInvalidArgument) || !strings.Contains(err.Error(), "1024") {
		t.Fatalf("wait for %d ids: %v, want INVALID_ARGUMENT naming 1024", len(many), err)
	}
	res, err := tc.system.Root.RequestFuture(nodes[1].store(), &messages.WaitObjects{ObjectIds: many, NumReady: 1}, 20*time.Second).Result()
	if r, ok := res.(*messages.WaitObjectsReply); err != nil || !ok || r.GetError().GetCode() != messages.ErrorCode_INVALID_ARGUMENT ||
		!strings.Contains(r.GetError().GetMessage(), "1024") {
		t.Fatalf("a WaitObjects of %d ids to a member: %v, %v; want INVALID_ARGUMENT naming 1024", len(many), res, err)
	}

	round := func(cl *cluster.Client, step string) {
		t.Helper()
		var ids []string
		for i := range 4 {
			id := fmt.Sprintf("fo-%s-%d", step, i)
			size := 300<<10 + i
			if i == 0 {
				// The first call after a kill: a Put that the member
				// fetches from the client, sent again to a live one.
				size = 3<<20 + i
			}
			data := randomBytes(uint64(len(step)*10+i), size)
			cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
			err := cl.Put(cctx, id, data)
			var got []byte
			if err == nil {
				got, err = cl.Get(cctx, id)
			}
			ccancel()
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("%s: put and get %s: %v (%d bytes back of %d)", step, id, err, len(got), len(data))
			}
			ids = append(ids, id)
		}
		cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
		defer ccancel()
		if ready, _, err := cl.Wait(cctx, ids, len(ids)); err != nil || len(ready) != len(ids) {
			t.Fatalf("%s: wait for the %d objects put: ready %v, %v", step, len(ids), ready, err)
		}
	}
	round(c, "three-alive")

	kill := func(victim *nodeProc) {
		t.Helper()
		if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-victim.exited
	}
	kill(nodes[0])
	round(c, "first-killed")
	round(one, "first-killed-one")
	inUse := c.Endpoints()[0]
	if inUse == nodes[0].address {
		t.Fatalf("the client still names the killed member %s first", inUse)
	}
	second := nodes[1]
	if inUse == nodes[2].address {
		second = nodes[2]
	}
	kill(second)
	survivor := without(without(nodes, nodes[0]), second)[0]
	// A Reduce is the first call after the kill: sent again at the
	// survivor if it never reached the dead member, else UNAVAILABLE,
	// with the client moved to the survivor for the next call.
	putRetry(t, tc.of(survivor), "fo-r1", storenode.Encode([]int32{1, 2}))
	putRetry(t, tc.of(survivor), "fo-r2", storenode.Encode([]int32{10, 20}))
	reduce := func() (*messages.ReduceReply, error) {
		rctx, rcancel := context.WithTimeout(ctx, 30*time.Second)
		defer rcancel()
		return c.Reduce(rctx, "fo-sum", []string{"fo-r1", "fo-r2"}, 2, messages.ReduceOp_SUM, messages.DType_INT32)
	}
	r, err := reduce()
	if errors.Is(err, messages.ErrUnavailable) {
		t.Logf("the Reduce after the kill: %v; again at %s", err, c.Endpoints()[0])
		r, err = reduce()
	}
	if err != nil || len(r.GetReducedIds()) != 2 {
		t.Fatalf("reduce after the second kill: %v, %v", r, err)
	}
	if got, err := c.GetInt32s(ctx, "fo-sum"); err != nil || !slices.Equal(got, []int32{11, 22}) {
		t.Fatalf("the sum: %v, %v", got, err)
	}
	round(c, "second-killed")
	if got := c.Endpoints()[0]; got != survivor.address {
		t.Fatalf("the client names %s first; the survivor is %s", got, survivor.address)
	}
	// The survivor's view drops the dead as it detects them.
	for {
		ms, err := c.Members(ctx)
		if err == nil && len(ms) == 1 && ms[0].ID == survivor.id {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("members %v, %v; want the survivor %s alone", ms, err, survivor.id)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestEventsAcrossProcesses: a Dial client subscribed to the events of
// three `hoplite node` processes sees, in this process, the NodeFailed
// of a member SIGKILLed during a Reduce (from each survivor) and the
// Reduce's ReduceDone from the member that coordinated it.
func TestEventsAcrossProcesses(t *testing.T) {
	t.Parallel()
	bin := hopliteBinary(t)
	slots, seeds := memberSlots(t, 3)
	nodes, tc, view := startConverged(t, bin, slots, seeds)

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := cluster.Dial(ctx, nodes[0].address)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	evs, err := c.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seen []*messages.ClusterEvent
	go func() {
		for ev := range evs {
			mu.Lock()
			seen = append(seen, ev)
			mu.Unlock()
		}
	}()

	victim, coordinator := nodes[2], nodes[1]
	target := idOwnedBy(t, view, coordinator.id, "ev-sum")
	const elems = 256 << 10
	put := func(n *nodeProc, k int) {
		putRetry(t, tc.of(n), fmt.Sprintf("ev-src-%d", k), randomBytes(uint64(200+k), 4*elems))
	}
	var sources []string
	for k := range 6 {
		sources = append(sources, fmt.Sprintf("ev-src-%d", k))
	}
	put(nodes[0], 0)
	put(victim, 1)
	put(nodes[1], 2)
	type result struct {
		r   *messages.ReduceReply
		err error
	}
	done := make(chan result, 1)
	go func() {
		rctx, rcancel := context.WithTimeout(ctx, 60*time.Second)
		defer rcancel()
		r, err := c.Reduce(rctx, target, sources, 4, messages.ReduceOp_SUM, messages.DType_INT32)
		done <- result{r, err}
	}()
	waitReducing(t)
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-victim.exited
	put(nodes[0], 3)
	put(nodes[1], 4)
	put(nodes[0], 5)
	res := <-done
	if res.err != nil || len(res.r.GetReducedIds()) != 4 || slices.Contains(res.r.GetReducedIds(), "ev-src-1") {
		t.Fatalf("reduce with a member killed: %v, %v; want 4 sources, not the killed member's", res.r.GetReducedIds(), res.err)
	}

	for {
		failedAt, doneBy := map[string]bool{}, ""
		mu.Lock()
		for _, ev := range seen {
			if f := ev.GetNodeFailed(); f != nil && f.GetNode() == victim.id {
				failedAt[ev.GetMember()] = true
			}
			if d := ev.GetReduceDone(); d != nil && d.GetTarget() == target && d.GetError() == nil &&
				slices.Equal(d.GetReduced(), res.r.GetReducedIds()) {
				doneBy = ev.GetMember()
			}
		}
		n := len(seen)
		mu.Unlock()
		if failedAt[nodes[0].id] && failedAt[nodes[1].id] && doneBy == coordinator.id {
			t.Logf("%d events; NodeFailed from %v, ReduceDone from %s", n, failedAt, doneBy)
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("after %d events: NodeFailed of %s from %v, ReduceDone of %s from %q; want from both survivors, and from %s",
				n, victim.id, failedAt, target, doneBy, coordinator.id)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// TestDialLearnsJoinedMembers: a Dial client given one `hoplite node`
// process learns a member that joins afterwards (it asks its member for
// the live members as it goes), and keeps working on that member alone
// once the two it knew at Dial are SIGKILLed.
func TestDialLearnsJoinedMembers(t *testing.T) {
	t.Parallel()
	bin := hopliteBinary(t)
	slots, seeds := memberSlots(t, 3)
	nodes, tc, _ := startConverged(t, bin, slots[:2], seeds)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	c, err := cluster.Dial(ctx, nodes[0].address)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	evs, err := c.Events(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	doneBy := map[string]string{} // ReduceDone: target -> member
	go func() {
		for ev := range evs {
			if d := ev.GetReduceDone(); d != nil {
				mu.Lock()
				doneBy[d.GetTarget()] = ev.GetMember()
				mu.Unlock()
			}
		}
	}()
	joined := startNode(t, bin, slots[2], seeds)
	joined.waitStarted(t, 60*time.Second)
	tc.converge(t, append(nodes, joined)...)
	for !slices.Contains(c.Endpoints(), joined.address) {
		select {
		case <-ctx.Done():
			t.Fatalf("the client never learned the member that joined, %s: it knows %v", joined.address, c.Endpoints())
		case <-time.After(100 * time.Millisecond):
		}
	}
	for _, n := range nodes {
		if err := n.cmd.Process.Signal(syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		<-n.exited
	}
	data := randomBytes(5, 200<<10)
	cctx, ccancel := context.WithTimeout(ctx, 60*time.Second)
	defer ccancel()
	if err := c.Put(cctx, "learned", data); err != nil {
		t.Fatalf("put with only the joined member alive: %v", err)
	}
	if got, err := c.Get(cctx, "learned"); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("get with only the joined member alive: %d bytes, %v", len(got), err)
	}
	if got := c.Endpoints()[0]; got != joined.address {
		t.Fatalf("the client names %s first; only %s is alive", got, joined.address)
	}
	// The event stream, subscribed when the joined member did not exist,
	// outlives the two members it started with: it carries the joined
	// member's ReduceDone (Reduces until one comes: the stream looks for
	// new members as it goes).
	for k := 0; ; k++ {
		target := fmt.Sprintf("learned-sum-%d", k)
		for _, src := range []string{target + "-a", target + "-b"} {
			if err := c.PutInt32s(cctx, src, []int32{int32(k), 1}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.Reduce(cctx, target, []string{target + "-a", target + "-b"}, 2, messages.ReduceOp_SUM, messages.DType_INT32); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		seen := false
		for tg, by := range doneBy {
			if strings.HasPrefix(tg, "learned-sum-") && by != joined.id {
				t.Errorf("ReduceDone of %s from %s; only %s is alive", tg, by, joined.id)
			}
			seen = seen || by == joined.id
		}
		mu.Unlock()
		if seen {
			break
		}
		select {
		case <-cctx.Done():
			t.Fatalf("no ReduceDone from the joined member %s after %d Reduces", joined.id, k+1)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// heldSubscription subscribes to a relay and keeps the subscription
// (acknowledging nothing), handing on the relay's answer.
type heldSubscription struct {
	relay    *actor.PID
	answered chan *messages.SubscribeEventsReply
}

func (h *heldSubscription) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		ctx.Request(h.relay, &messages.SubscribeEvents{})
	case *messages.SubscribeEventsReply:
		h.answered <- m
	}
}

// TestEventRelaySubscribers: a member's event relay keeps 64
// subscriptions from other processes and refuses one more with
// RESOURCE_EXHAUSTED; a subscriber whose process is SIGKILLed (a
// `hoplite events` process) is forgotten, and its place taken.
func TestEventRelaySubscribers(t *testing.T) {
	t.Parallel()
	bin := hopliteBinary(t)
	slots, seeds := memberSlots(t, 1)
	node := startNode(t, bin, slots[0], seeds)
	node.waitStarted(t, 60*time.Second)
	tc := newTestClient(t)
	tc.converge(t, node)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	events := exec.CommandContext(ctx, bin, "events", "--addr", node.address)
	var evErr syncBuffer
	events.Stderr = &evErr
	if err := events.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = events.Process.Kill(); _ = events.Wait() }()
	for !strings.Contains(evErr.String(), "subscribed") {
		select {
		case <-ctx.Done():
			t.Fatalf("hoplite events did not subscribe: %s", evErr.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
	subscribe := func() *messages.SubscribeEventsReply {
		t.Helper()
		h := &heldSubscription{relay: cluster.EventRelayPID(node.address), answered: make(chan *messages.SubscribeEventsReply, 1)}
		pid := tc.system.Root.Spawn(actor.PropsFromProducer(func() actor.Actor { return h }))
		t.Cleanup(func() { tc.system.Root.Stop(pid) })
		select {
		case r := <-h.answered:
			return r
		case <-ctx.Done():
			t.Fatal("the relay did not answer")
			return nil
		}
	}
	for i := range 63 {
		if r := subscribe(); r.GetError() != nil || r.GetMember() != node.id {
			t.Fatalf("subscription %d of 64: %v", i+2, r)
		}
	}
	if r := subscribe(); r.GetError().GetCode() != messages.ErrorCode_RESOURCE_EXHAUSTED || !strings.Contains(r.GetError().GetMessage(), "64") {
		t.Fatalf("the 65th subscription: %v, want RESOURCE_EXHAUSTED naming 64", r)
	}
	if err := events.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = events.Wait()
	for {
		r := subscribe()
		if r.GetError() == nil {
			break
		}
		if r.GetError().GetCode() != messages.ErrorCode_RESOURCE_EXHAUSTED {
			t.Fatalf("subscribe after the subscriber process died: %v", r)
		}
		select {
		case <-ctx.Done():
			t.Fatal("the relay never forgot the subscriber whose process was killed")
		case <-time.After(100 * time.Millisecond):
		}
	}
}
