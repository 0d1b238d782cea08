package barrieractor_test

import (
	"context"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/barrier"
	"github.com/hoplite-go/hoplite/internal/actors/barrieractor"
)

// TestStateShowsTheCounts: the acting primary publishes a barrier's
// numbers as they change: a throttled barrier's entries, passes and the
// labels its throttle still holds, a semaphore's holders, queue and
// level, the replicas with the primary marked; a close publishes a last,
// closed State. Backups publish nothing.
func TestStateShowsTheCounts(t *testing.T) {
	h := startHosts(t, 2, barrieractor.HostConfig{})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	states := make(chan *barrieractor.State, 256)
	h.sys.EventStream.Subscribe(func(e any) {
		if s, ok := e.(*barrieractor.State); ok {
			states <- s
		}
	})
	// until reads States of barrier name until one satisfies ok.
	until := func(name, what string, ok func(*barrieractor.State) bool) *barrieractor.State {
		t.Helper()
		for {
			select {
			case s := <-states:
				if s.Acting && len(s.Replicas) == 2 && !s.Replicas[0].Primary {
					t.Fatalf("a State from a replica that is not the primary: %+v", s)
				}
				if s.Barrier == name && ok(s) {
					return s
				}
			case <-ctx.Done():
				t.Fatalf("%s: no State showed %s", name, what)
			}
		}
	}
	enter := func(b *barrier.Barrier, labels ...string) {
		for _, l := range labels {
			go func() { _, _ = b.Enter(ctx, l) }()
		}
	}

	tb, err := barrier.New(ctx, h, "throttled", barrier.Max(3), barrier.Throttle(1, time.Hour), barrier.Replicas(2))
	if err != nil {
		t.Fatal(err)
	}
	rs := tb.Replicas()
	enter(tb, "a", "b", "c")
	s := until("throttled", "3 entered, 1 passed, 2 throttled", func(s *barrieractor.State) bool {
		return s.Entered == 3 && s.Passed == 1 && s.Throttled == 2
	})
	if s.Kind != "throttled" || s.Max != 3 || !s.Fired || s.Reason != "max" || s.Queued != 0 || !s.Acting || s.Member != rs[0] ||
		len(s.Replicas) != 2 || s.Replicas[0].Member != rs[0] || !s.Replicas[0].Primary || s.Replicas[1].Member != rs[1] ||
		s.Replicas[1].Primary || s.Replicas[1].Down {
		t.Fatalf("throttled: %+v", s)
	}

	sem, err := barrier.New(ctx, h, "sem", barrier.Max(3), barrier.Semaphore(1), barrier.Replicas(2))
	if err != nil {
		t.Fatal(err)
	}
	enter(sem, "x", "y")
	s = until("sem", "1 holder, 1 queued", func(s *barrieractor.State) bool { return s.Holders == 1 && s.Queued == 1 })
	if s.Kind != "semaphore" || s.Limit != 1 || s.Entered != 2 || s.Fired {
		t.Fatalf("semaphore: %+v", s)
	}
	if err := sem.Close(ctx); err != nil {
		t.Fatal(err)
	}
	s = until("sem", "closed", func(s *barrieractor.State) bool { return s.Closed })
	if s.Acting {
		t.Fatalf("a closed barrier's primary still acts: %+v", s)
	}
}
