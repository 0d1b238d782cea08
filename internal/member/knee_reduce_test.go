package member

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/reduction"
	"github.com/hoplite-go/hoplite/messages"
)

// An async-SGD step without choosing n: five workers' gradients arrive
// within milliseconds, three straggle; a Reduce with a knee policy
// (at least half) reduces the fast ones, streaming through the tree once
// the knee fixed the count, and says so. Where the knee falls among the
// fast five is the machine's timing (on a loaded machine the fifth came
// late enough to be past it, and four were reduced); that it never takes
// a straggler, reduces at least half, and that the target is exactly the
// sum of what it names is not.
func TestReduceUntilKneeReducesTheFastSources(t *testing.T) {
	l := start(t, Config{Nodes: 8})
	ctx := deadline(t, 30*time.Second)
	const elems = 64 << 10 // 256 KiB of float32: not inline
	var ids []string
	grads := map[string][]byte{}
	for i := range 8 {
		id := fmt.Sprintf("grad-%d", i)
		ids = append(ids, id)
		b := make([]byte, 4*elems)
		for e := range elems {
			binary.LittleEndian.PutUint32(b[4*e:], math.Float32bits(float32(i+1)*0.5+float32(e%7)))
		}
		grads[id] = b
	}
	type result struct {
		r   *messages.ReduceReply
		err error
	}
	done := make(chan result, 1)
	go func() {
		r, err := l.Client(0).ReduceUntilKnee(ctx, "step-1", ids, &messages.ReduceKnee{MinPercent: 50},
			messages.ReduceOp_SUM, messages.DType_FLOAT32)
		done <- result{r, err}
	}()
	time.Sleep(20 * time.Millisecond) // the coordinator subscribes first
	for i := range 5 {
		if err := l.Client(i).Put(ctx, ids[i], grads[ids[i]]); err != nil {
			t.Fatal(err)
		}
		time.Sleep(3 * time.Millisecond)
	}
	var res result
	select {
	case res = <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the knee never fixed the count")
	}
	if res.err != nil {
		t.Fatal(res.err)
	}
	got := slices.Sorted(slices.Values(res.r.GetReducedIds()))
	if len(got) < 4 || !slices.Equal(got, ids[:len(got)]) || res.r.GetCompletedBy() != reduction.CompletedByKnee {
		t.Fatalf("reduced %v (completed by %q), want at least four of the five fast ones, in arrival order, by the knee", got, res.r.GetCompletedBy())
	}
	// The stragglers arrive later: they are not in the result.
	for i := 5; i < 8; i++ {
		if err := l.Client(i).Put(ctx, ids[i], grads[ids[i]]); err != nil {
			t.Fatal(err)
		}
	}
	out, err := l.Client(7).Get(ctx, "step-1")
	if err != nil {
		t.Fatal(err)
	}
	for e := range elems {
		var want float32
		for i := range got {
			want += math.Float32frombits(binary.LittleEndian.Uint32(grads[ids[i]][4*e:]))
		}
		if g := math.Float32frombits(binary.LittleEndian.Uint32(out[4*e:])); math.Abs(float64(g-want)) > 1e-3 {
			t.Fatalf("element %d: %v, want %v", e, g, want)
		}
	}
}

// Fewer than min_percent ever arrive: TIMEOUT saying so, nothing reserved.
func TestReduceUntilKneeTimesOutBelowTheMinimum(t *testing.T) {
	l := start(t, Config{Nodes: 4})
	ctx := deadline(t, 30*time.Second)
	ids := []string{"k0", "k1", "k2", "k3"}
	if err := l.Client(1).Put(ctx, "k0", make([]byte, 256<<10)); err != nil {
		t.Fatal(err)
	}
	// Long enough that the coordinator's answer at its deadline reaches
	// the caller before the caller's own (at 500 ms, on a loaded machine,
	// the caller's store node gave up first).
	rctx, cancel := contextWithTimeout(ctx, 2*time.Second)
	defer cancel()
	_, err := l.Client(0).ReduceUntilKnee(rctx, "never", ids, &messages.ReduceKnee{MinPercent: 75},
		messages.ReduceOp_SUM, messages.DType_FLOAT32)
	if !errors.Is(err, messages.ErrTimeout) || !strings.Contains(err.Error(), "1 of 4 sources arrived") {
		t.Fatalf("want the coordinator's TIMEOUT naming the arrivals, got %v", err)
	}
	// The target was released: a Put of its id works.
	if err := l.Client(2).Put(ctx, "never", make([]byte, 8)); err != nil {
		t.Fatalf("target still reserved: %v", err)
	}
}
