package processtest

import (
	"context"
	"encoding/binary"
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

// The member that runs a Reduce's coordinator (it hosts the target's
// directory shard) is SIGKILLed while the Reduce waits for a source; the
// caller and the sources live elsewhere. The caller's member starts the
// Reduce again at the shard's new home: once the missing source is Put,
// the same call answers with exactly the sum of the three, within its
// deadline, and the target holds it.
func TestProcessCoordinatorHostKilled(t *testing.T) {
	bin := hopliteBinary(t)
	slots, seeds := memberSlots(t, 4)
	nodes, c, view := startConverged(t, bin, slots, seeds)
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
		rep *messages.ReduceReply
		err error
		at  time.Time
	}
	done := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		rep, err := caller.Reduce(ctx, target, sources, 3, messages.ReduceOp_SUM, messages.DType_INT64)
		done <- result{rep, err, time.Now()}
	}()
	waitReducing(t)
	killed := time.Now()
	if err := host.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-host.exited
	// The missing source comes after the kill: the Reduce can finish only
	// if it went on past its coordinator's death.
	putRetry(t, c.of(nodes[2]), sources[2], data[sources[2]])
	r := <-done
	if r.err != nil {
		t.Fatalf("Reduce whose coordinator's member was killed: %v, want success", r.err)
	}
	if len(r.rep.GetReducedIds()) != 3 {
		t.Fatalf("reduced %v, want all three sources", r.rep.GetReducedIds())
	}
	t.Logf("the Reduce answered %v after its coordinator's member was killed", r.at.Sub(killed).Round(time.Millisecond))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
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
