package barrier_test

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/barrier"
)

// BenchmarkReleaseLatency measures, on a 4-node embedded cluster, the time
// from the last required entry to every participant released: n-1 labels
// wait (entered through one handle per node), then the timer runs from the
// last Enter until all n Enters returned. ns/op is that latency.
func BenchmarkReleaseLatency(b *testing.B) {
	for _, replicas := range []int{1, 2} {
		for _, n := range []int{10, 100, 1000} {
			b.Run(fmt.Sprintf("replicas=%d/participants=%d", replicas, n), func(b *testing.B) {
				benchRelease(b, n, replicas)
			})
		}
	}
}

func benchRelease(b *testing.B, n, replicas int) {
	const nodes = 4
	l := startCluster(b, nodes)
	ctx := deadline(b, 10*time.Minute)
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		b.StopTimer()
		name := fmt.Sprintf("bench-%d", it)
		ctrl, err := barrier.New(ctx, l, name, barrier.Max(n), barrier.Replicas(replicas))
		if err != nil {
			b.Fatal(err)
		}
		var handles []*barrier.Barrier
		for i := range nodes {
			h, err := barrier.Open(ctx, l, name, barrier.Host(fmt.Sprintf("node-%d", i)))
			if err != nil {
				b.Fatal(err)
			}
			handles = append(handles, h)
		}
		var wg sync.WaitGroup
		errs := make(chan error, n)
		enter := func(i int) {
			defer wg.Done()
			if _, err := handles[i%nodes].Enter(ctx, fmt.Sprintf("p%d", i)); err != nil {
				errs <- err
			}
		}
		wg.Add(n)
		for i := 1; i < n; i++ {
			go enter(i)
		}
		for {
			s, err := ctrl.Status(ctx)
			if err != nil {
				b.Fatal(err)
			}
			if s.Entered == n-1 {
				break
			}
			time.Sleep(time.Millisecond)
		}
		b.StartTimer()
		go enter(0)
		wg.Wait()
		b.StopTimer()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		for _, h := range handles {
			h.Stop()
		}
		if err := ctrl.Close(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}

// BenchmarkTreeVsDirect measures a traditional barrier of 256 labels on
// an embedded cluster, its arrivals up the tree of members (fan-out 4)
// beside every Enter straight to the replicas (Fanout(0)): ns/op is the
// time from the first Enter to the last release.
func BenchmarkTreeVsDirect(b *testing.B) {
	for _, nodes := range []int{8, 16} {
		for _, fanout := range []int{0, 4} {
			b.Run(fmt.Sprintf("nodes=%d/fanout=%d", nodes, fanout), func(b *testing.B) {
				benchTree(b, nodes, fanout, 256)
			})
		}
	}
}

func benchTree(b *testing.B, nodes, fanout, n int) {
	l := startCluster(b, nodes)
	ctx := deadline(b, 10*time.Minute)
	labels := make([]string, n)
	for i := range labels {
		labels[i] = fmt.Sprintf("p%d", i)
	}
	b.ResetTimer()
	for it := 0; it < b.N; it++ {
		b.StopTimer()
		name := fmt.Sprintf("tree-%d", it)
		ctrl, err := barrier.New(ctx, l, name, barrier.Max(n), barrier.Fanout(fanout))
		if err != nil {
			b.Fatal(err)
		}
		var wg sync.WaitGroup
		errs := make(chan error, n)
		wg.Add(n)
		b.StartTimer()
		for _, label := range labels {
			go func() {
				defer wg.Done()
				if _, err := ctrl.Enter(ctx, label); err != nil {
					errs <- err
				}
			}()
		}
		wg.Wait()
		b.StopTimer()
		close(errs)
		for err := range errs {
			b.Fatal(err)
		}
		if err := ctrl.Close(ctx); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
	}
}
