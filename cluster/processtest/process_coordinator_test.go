package processtest

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

// The member that runs a Reduce's coordinator (it hosts the target's
// directory shard) is SIGKILLed while the Reduce waits for a source: the
// caller, on another member, gets UNAVAILABLE (not its deadline's
// TIMEOUT: it watches the coordinator's shard), no partial target is left,
// and the same Reduce succeeds when retried.
func TestProcessCoordinatorHostKilled(t *testing.T) {
	bin := hopliteBinary(t)
	slots, seeds := memberSlots(t, 4)
	var nodes []*nodeProc
	for i := range 4 {
		nodes = append(nodes, startNode(t, bin, slots[i], seeds))
	}
	for _, n := range nodes {
		n.waitStarted(t, 60*time.Second)
	}
	c := newTestClient(t)
	view := c.converge(t, nodes...)
	host := nodes[3]
	target := idOwnedBy(t, view, host.id, "coord-kill")

	const elems = 64 << 10
	want := make([]int64, elems)
	var sources []string
	data := map[string][]byte{}
	for i := range 3 {
		id := fmt.Sprintf("coord-src-%d", i)
		b := make([]byte, 8*elems)
		for k := range elems {
			v := int64(k*(i+1) + 7*i)
			binary.LittleEndian.PutUint64(b[8*k:], uint64(v))
			want[k] += v
		}
		sources, data[id] = append(sources, id), b
	}
	// Two of the three sources exist; the Reduce waits for the third.
	putRetry(t, c.of(nodes[0]), sources[0], data[sources[0]])
	putRetry(t, c.of(nodes[1]), sources[1], data[sources[1]])
	caller := c.of(nodes[0])
	type result struct {
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, err := caller.Reduce(ctx, target, sources, 3, messages.ReduceOp_SUM, messages.DType_INT64)
		done <- result{err, time.Now()}
	}()
	waitReducing(t)
	killed := time.Now()
	if err := host.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-host.exited
	r := <-done
	if !errors.Is(r.err, messages.ErrUnavailable) {
		t.Fatalf("Reduce whose coordinator's member was killed: %v, want UNAVAILABLE", r.err)
	}
	t.Logf("the caller learned of the coordinator's loss %v after the kill", r.at.Sub(killed).Round(time.Millisecond))

	survivors := nodes[:3]
	c.converge(t, survivors...)
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	_, err := c.of(nodes[1]).Get(ctx, target)
	cancel()
	if err == nil {
		t.Fatal("a Get of the failed Reduce's target returned bytes: a partial target was left")
	}

	// The retry, with the missing source Put, succeeds exactly.
	putRetry(t, c.of(nodes[2]), sources[2], data[sources[2]])
	ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var rep *messages.ReduceReply
	for {
		rep, err = caller.Reduce(ctx, target, sources, 3, messages.ReduceOp_SUM, messages.DType_INT64)
		if !errors.Is(err, messages.ErrUnavailable) || ctx.Err() != nil {
			break // UNAVAILABLE: the target's shard is still moving
		}
		time.Sleep(50 * time.Millisecond)
	}
	if err != nil {
		t.Fatalf("retried Reduce: %v", err)
	}
	if len(rep.GetReducedIds()) != 3 {
		t.Fatalf("reduced %v", rep.GetReducedIds())
	}
	got, err := c.of(nodes[1]).Get(ctx, target)
	if err != nil {
		t.Fatal(err)
	}
	for k := range elems {
		if v := int64(binary.LittleEndian.Uint64(got[8*k:])); v != want[k] {
			t.Fatalf("element %d is %d, want %d", k, v, want[k])
		}
	}
}
