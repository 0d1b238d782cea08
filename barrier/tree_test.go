package barrier_test

import (
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/barrier"
	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/messages"
)

// managerInbox counts, per barrier manager, the Enters it took in
// straight from participants and those that came combined up the tree.
type managerInbox struct {
	mu       sync.Mutex
	direct   map[string]int // manager -> BarrierEnter messages
	combined map[string]int // manager -> BarrierEnters messages
	arrivals map[string]int // manager -> arrivals in them
}

func (in *managerInbox) hook(manager string, msg any) {
	in.mu.Lock()
	defer in.mu.Unlock()
	switch m := msg.(type) {
	case *messages.BarrierEnter:
		in.direct[manager]++
	case *messages.BarrierEnters:
		in.combined[manager]++
		in.arrivals[manager] += len(m.GetArrivals())
	}
}

// A barrier's participants enter through its combining tree: on a
// cluster of 6 members, 60 labels of a traditional barrier reach each
// manager replica in a few combined messages,
// none straight, and every one passes; a barrier that may fire early (percent) takes its arrivals
// up the tree as they come and fires by its rule.
func TestArrivalsCombineUpTheTree(t *testing.T) {
	in := &managerInbox{direct: map[string]int{}, combined: map[string]int{}, arrivals: map[string]int{}}
	l, err := cluster.StartLocal(barrierHooked(cluster.Config{Nodes: 6, Log: quietLog()}, in.hook))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Stop)
	ctx := deadline(t, 20*time.Second)
	const n = 60
	b, err := barrier.New(ctx, l, "combined", barrier.Max(n), barrier.Fanout(4))
	if err != nil {
		t.Fatal(err)
	}
	labels := make([]string, n)
	for i := range labels {
		labels[i] = fmt.Sprintf("task-%d", i)
	}
	res := enterAll(t, b, labels...)
	for range n {
		r := <-res
		if r.err != nil || r.pass.Reason != "max" {
			t.Fatalf("%s: pass %+v err %v", r.label, r.pass, r.err)
		}
	}
	// The backup takes its copy of the arrivals after the primary
	// answered.
	eventually(ctx, t, "both replicas took every arrival", func() bool {
		in.mu.Lock()
		defer in.mu.Unlock()
		got := 0
		for m, k := range in.arrivals {
			if strings.HasSuffix(m, "b-combined") && k == n {
				got++
			}
		}
		return got == 2
	})
	in.mu.Lock()
	for m, k := range in.direct {
		if strings.Contains(m, "combined") && k > 0 {
			t.Errorf("manager %s took %d Enters straight from participants", m, k)
		}
	}
	managers := 0
	for m, k := range in.combined {
		if !strings.HasSuffix(m, "b-combined") {
			continue
		}
		managers++
		// A position short of its share sends what it holds every
		// tree.DefaultLinger: on a loaded machine the entries spread
		// over a few of those.
		if in.arrivals[m] != n || k > n/2 {
			t.Errorf("manager %s took %d arrivals in %d messages, want %d in at most %d", m, in.arrivals[m], k, n, n/2)
		}
		t.Logf("manager %s: %d arrivals in %d messages", m, in.arrivals[m], k)
	}
	in.mu.Unlock()
	if managers != 2 {
		t.Fatalf("%d replicas took combined arrivals, want 2", managers)
	}

	p, err := barrier.New(ctx, l, "combined-percent", barrier.Max(n), barrier.MinPercent(50), barrier.MinWait(50*time.Millisecond), barrier.Fanout(4))
	if err != nil {
		t.Fatal(err)
	}
	res = enterAll(t, p, labels[:n/2]...)
	for range n / 2 {
		if r := <-res; r.err != nil || r.pass.Reason != "percent" {
			t.Fatalf("%s: pass %+v err %v", r.label, r.pass, r.err)
		}
	}
	late, err := p.Enter(ctx, labels[n-1])
	if err != nil || !late.Late {
		t.Fatalf("late label: pass %+v err %v", late, err)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	for m, k := range in.direct {
		if strings.Contains(m, "combined-percent") && k > 0 {
			t.Errorf("manager %s took %d Enters straight from participants", m, k)
		}
	}
}

// Fanout(0) sends every Enter straight to the replicas; a fan-out the
// tree cannot have is refused.
func TestFanoutZeroEntersStraight(t *testing.T) {
	in := &managerInbox{direct: map[string]int{}, combined: map[string]int{}, arrivals: map[string]int{}}
	l, err := cluster.StartLocal(barrierHooked(cluster.Config{Nodes: 3, Log: quietLog()}, in.hook))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Stop)
	ctx := deadline(t, 20*time.Second)
	for _, k := range []int{-1, 1, 65} {
		if _, err := barrier.New(ctx, l, "bad-fanout", barrier.Max(2), barrier.Fanout(k)); !errors.Is(err, messages.ErrInvalidArgument) {
			t.Fatalf("Fanout(%d): %v, want INVALID_ARGUMENT", k, err)
		}
	}
	b, err := barrier.New(ctx, l, "flat", barrier.Max(4), barrier.Fanout(0))
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range collect(enterAll(t, b, "a", "b", "c", "d"), 4) {
		if r.err != nil {
			t.Fatal(r.err)
		}
	}
	eventually(ctx, t, "8 Enters straight at the 2 replicas", func() bool {
		in.mu.Lock()
		defer in.mu.Unlock()
		direct := 0
		for m, k := range in.direct {
			if strings.HasSuffix(m, "b-flat") {
				direct += k
			}
		}
		return direct >= 8 // and more if an Enter waited past a re-ask
	})
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.combined) != 0 {
		t.Fatalf("combined arrivals at %v", in.combined)
	}
}

// Without Fanout, a barrier of a cluster smaller than
// barrier.TreeFromMembers sends every Enter straight to its replicas:
// there the tree's extra hop costs more than the messages it saves.
func TestSmallClusterEntersStraight(t *testing.T) {
	in := &managerInbox{direct: map[string]int{}, combined: map[string]int{}, arrivals: map[string]int{}}
	l, err := cluster.StartLocal(barrierHooked(cluster.Config{Nodes: 4, Log: quietLog()}, in.hook))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Stop)
	ctx := deadline(t, 20*time.Second)
	const n = 8
	b, err := barrier.New(ctx, l, "straight", barrier.Max(n))
	if err != nil {
		t.Fatal(err)
	}
	labels := make([]string, n)
	for i := range labels {
		labels[i] = fmt.Sprintf("task-%d", i)
	}
	res := enterAll(t, b, labels...)
	for range n {
		if r := <-res; r.err != nil || r.pass.Reason != "max" {
			t.Fatalf("%s: pass %+v err %v", r.label, r.pass, r.err)
		}
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	direct := 0
	for m, k := range in.direct {
		if strings.HasSuffix(m, "b-straight") {
			direct += k
		}
	}
	for m, k := range in.combined {
		if strings.HasSuffix(m, "b-straight") && k > 0 {
			t.Errorf("manager %s took %d combined messages: the small cluster used the tree", m, k)
		}
	}
	if direct < n {
		t.Errorf("the primary took %d Enters straight, want every one of %d", direct, n)
	}
}
