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
