package processtest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

// TestProcessMemorySoak (HOPLITE_MEMORY_SOAK=rounds, e.g. 50; a short
// small run by default): four
// `hoplite node` members live through rounds of a 16 MiB broadcast to
// three members and a Reduce of four 4 MiB sources, each round's objects
// deleted at its end. Every member's resident memory and Go heap are read
// from its /metrics after each round (after a collection): once warm
// (round 10), neither may keep growing — the last rounds stay within
// 64 MiB of the warm round — and the resident size stays within the
// documented bound of the store: 2 × capacity + 256 MiB.
func TestProcessMemorySoak(t *testing.T) {
	// The default run is short and small (20 rounds of a 2 MiB broadcast
	// and 512 KiB sources): the soak's sizes come with the env var.
	rounds, size := 20, 2<<20
	if v := os.Getenv("HOPLITE_MEMORY_SOAK"); v != "" {
		var err error
		if rounds, err = strconv.Atoi(v); err != nil || rounds < 20 {
			t.Fatalf("HOPLITE_MEMORY_SOAK=%q: want at least 20 rounds", v)
		}
		size = 16 << 20
	}
	const capacity = 256 << 20
	bin := hopliteBinary(t)
	slots, seeds := memberSlots(t, 4)
	var nodes []*nodeProc
	for i := range 4 {
		nodes = append(nodes, startNode(t, bin, slots[i], seeds, "-pprof"))
	}
	for _, n := range nodes {
		n.waitStarted(t, 60*time.Second)
	}
	c := newTestClient(t)
	c.converge(t, nodes...)
	rng := rand.New(rand.NewPCG(5, 6))
	type mem struct{ rss, heap, objects, cached float64 }
	const warm = 9
	at := make([][]mem, rounds)
	for r := range rounds {
		creator := nodes[rng.IntN(4)]
		id := fmt.Sprintf("soak-%d", r)
		data := randomBytes(uint64(r), size)
		putRetry(t, c.of(creator), id, data)
		for _, n := range without(nodes, creator) {
			getExact(t, c.of(n), id, data)
		}
		var sources []string
		for i, n := range nodes {
			sid := fmt.Sprintf("soak-src-%d-%d", r, i)
			putRetry(t, c.of(n), sid, randomBytes(uint64(1000*r+i), size/4))
			sources = append(sources, sid)
		}
		target := fmt.Sprintf("soak-sum-%d", r)
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		if _, err := c.of(nodes[0]).Reduce(ctx, target, sources, 4, messages.ReduceOp_SUM, messages.DType_INT32); err != nil {
			t.Fatalf("round %d: reduce: %v", r, err)
		}
		for _, del := range append(sources, id, target) {
			if err := c.of(nodes[rng.IntN(4)]).Delete(ctx, del); err != nil {
				t.Fatalf("round %d: delete %s: %v", r, del, err)
			}
		}
		cancel()
		for _, n := range nodes {
			// A heap profile with gc=1 collects first: the heap read next is
			// what is live, not what the collector has yet to free.
			scrape(t, n, "/debug/pprof/heap?gc=1")
			_, m := scrape(t, n, "/metrics")
			at[r] = append(at[r], mem{rss: sample(m, "process_resident_memory_bytes", ""), heap: sample(m, "go_memstats_heap_inuse_bytes", ""),
				objects: sample(m, "hoplite_store_objects", ""), cached: sample(m, "hoplite_store_cached_bytes", "")})
		}
		if dir := os.Getenv("HOPLITE_SOAK_PROFILES"); dir != "" && (r == warm || r == rounds-1) {
			// For `go tool pprof -base warm end`: what the rounds left behind.
			for i, n := range nodes {
				_, prof := scrape(t, n, "/debug/pprof/heap")
				_ = os.WriteFile(fmt.Sprintf("%s/heap-node%d-round%d.pb.gz", dir, i, r+1), []byte(prof), 0o644)
				_, gr := scrape(t, n, "/debug/pprof/goroutine?debug=1")
				_ = os.WriteFile(fmt.Sprintf("%s/goroutines-node%d-round%d.txt", dir, i, r+1), []byte(gr), 0o644)
			}
		}
		if r%10 == 9 || r == rounds-1 {
			t.Logf("round %d: RSS MiB %v, heap in use MiB %v, store objects %v, cached MiB %v", r+1,
				mib(at[r], func(m mem) float64 { return m.rss }), mib(at[r], func(m mem) float64 { return m.heap }),
				mib(at[r], func(m mem) float64 { return m.objects * (1 << 20) }), mib(at[r], func(m mem) float64 { return m.cached }))
		}
	}
	for i, n := range nodes {
		for r := rounds - 5; r < rounds; r++ {
			if grew := at[r][i].rss - at[warm][i].rss; grew > 64<<20 {
				t.Errorf("%s: resident memory grew %.0f MiB from round %d to round %d", n.id, grew/(1<<20), warm+1, r+1)
			}
			if grew := at[r][i].heap - at[warm][i].heap; grew > 64<<20 {
				t.Errorf("%s: heap in use grew %.0f MiB from round %d to round %d", n.id, grew/(1<<20), warm+1, r+1)
			}
			if at[r][i].rss > 2*capacity+256<<20 {
				t.Errorf("%s: resident memory %.0f MiB at round %d, above 2 × capacity + 256 MiB", n.id, at[r][i].rss/(1<<20), r+1)
			}
		}
	}
}

func mib[T any](xs []T, f func(T) float64) []int {
	var out []int
	for _, x := range xs {
		out = append(out, int(f(x)/(1<<20)))
	}
	return out
}
