package processtest

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/reduction"
	"github.com/hoplite-go/hoplite/messages"
)

// staggerCluster is one cluster of `hoplite node` members of the stagger
// benchmark, all started with the same flags.
type staggerCluster struct {
	name    string
	nodes   []*nodeProc
	sources []string
}

// posTimeline is one "reduce position timeline" debug line of a member.
type posTimeline struct {
	node                                           int
	position                                       int
	gather                                         bool
	received, started, run, created, opened, first int64 // unix ns (0: never)
}

// staggerRep is what one sliced AllReduce's logs say about its start.
type staggerRep struct {
	sentAt, sendNs int64 // the coordinator's first task send, and how long its sends took
	// per member: its last task's arrival, its last worker's start, its
	// last run's start, its last chain output's creation (its whole share
	// of the chains is ready: every chain through it can pass it; a
	// gather's output is nobody's input), its last chain input's first
	// byte; all from sentAt.
	recv, spawn, run, created, first []time.Duration
}

// stagger is the spread of the members' ready times (the last and the
// first member to have its whole share in place).
func (r staggerRep) stagger() time.Duration {
	return slices.Max(r.created) - slices.Min(r.created)
}

func parseStagger(nodes []*nodeProc, target string) (staggerRep, error) {
	var rep staggerRep
	var tls []posTimeline
	num := func(e logEntry, k string) int64 { f, _ := e[k].(float64); return int64(f) }
	for i, n := range nodes {
		for _, e := range n.logs() {
			if !strings.HasPrefix(e.str("reduce"), target+"#") {
				continue
			}
			switch e.str("msg") {
			case "reduce tasks sent":
				if rep.sentAt == 0 || num(e, "sent_at_ns") < rep.sentAt {
					rep.sentAt, rep.sendNs = num(e, "sent_at_ns"), num(e, "send_ns")
				}
			case "reduce position timeline":
				r := num(e, "received_ns")
				at := func(k string) int64 {
					if d := num(e, k); d >= 0 {
						return r + d
					}
					return 0
				}
				g, _ := e["gather"].(bool)
				tls = append(tls, posTimeline{node: i, position: int(num(e, "position")), gather: g, received: r,
					started: at("spawn_ns"), run: at("run_ns"), created: at("created_ns"), opened: at("opened_ns"), first: at("first_ns")})
			}
		}
	}
	if rep.sentAt == 0 {
		return rep, fmt.Errorf("no coordinator logged sending the tasks of %s", target)
	}
	if want := len(nodes) * (len(nodes) + 1); len(tls) != want {
		return rep, fmt.Errorf("%d position timelines of %s, want %d", len(tls), target, want)
	}
	last := func(node int, f func(posTimeline) int64) time.Duration {
		var m int64
		for _, t := range tls {
			if t.node == node {
				m = max(m, f(t))
			}
		}
		return time.Duration(m - rep.sentAt)
	}
	for i := range nodes {
		rep.recv = append(rep.recv, last(i, func(t posTimeline) int64 { return t.received }))
		rep.spawn = append(rep.spawn, last(i, func(t posTimeline) int64 { return t.started }))
		rep.run = append(rep.run, last(i, func(t posTimeline) int64 { return t.run }))
		rep.created = append(rep.created, last(i, func(t posTimeline) int64 {
			if t.gather {
				return 0
			}
			return t.created
		}))
		rep.first = append(rep.first, last(i, func(t posTimeline) int64 {
			if t.gather {
				return 0 // a gather's first byte waits for a whole chain
			}
			return t.first
		}))
	}
	return rep, nil
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f", float64(d.Microseconds())/1000) }

func msList(ds []time.Duration) string {
	var s []string
	for _, d := range ds {
		s = append(s, ms(d))
	}
	return strings.Join(s, " ")
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[len(s)/2]
}

// BenchmarkSlicedAllReduceStagger measures how far apart eight `hoplite
// node` members on loopback start their shares of a sliced AllReduce of
// 32 MiB (forced sliced, paced at 400 Mbit/s, debug logs): from the
// coordinator's first task send to each member's last position having
// its output (its whole share in place), and the stages before it. Two
// clusters side by side, their reps interleaved: one whose coordinators
// send each task alone (-unbatched-reduce-tasks, without
// ReduceTaskBatch) and one that batches them per node. Run with
// -benchtime 1x; it reports the medians of the reps and the ratios of
// the stagger medians to the first cluster's. HOPLITE_STAGGER_BEFORE=BIN
// adds a cluster of BIN, a hoplite binary of an earlier commit (one that
// logs the timelines, 9166f89 on), first: before and after in one run.
//
//	HOPLITE_STAGGER_BEFORE=/tmp/hoplite-9166f89 go test -run '^$' -bench SlicedAllReduceStagger -benchtime 1x ./cluster/processtest/
func BenchmarkSlicedAllReduceStagger(b *testing.B) {
	const (
		members = 8
		size    = 32 << 20
		reps    = 7
	)
	type mode struct {
		name  string
		bin   string
		flags []string
	}
	bin := hopliteBinary(b)
	sliced := "allreduce-shape=" + reduction.ShapeSliced
	modes := []mode{{"per-task", bin, []string{"-experiments", sliced + ",unbatched-reduce-tasks"}}, {"batched", bin, []string{"-experiments", sliced}}}
	if before := os.Getenv("HOPLITE_STAGGER_BEFORE"); before != "" {
		// A hoplite binary of an earlier commit (with the debug
		// timelines, 9166f89 on, whose node took the shape as a flag of
		// its own): a third cluster, first in each round.
		modes = append([]mode{{"before", before, []string{"-allreduce-shape", reduction.ShapeSliced}}}, modes...)
	}
	c := newTestClient(b)
	var clusters []*staggerCluster
	for _, m := range modes {
		slots, seeds := memberSlots(b, members)
		cl := &staggerCluster{name: m.name}
		for i := range slots {
			args := append([]string{"-link-rate", "400mbit", "-log-level", "debug", "-capacity", "512MiB"}, m.flags...)
			cl.nodes = append(cl.nodes, startNode(b, m.bin, slots[i], seeds, args...))
		}
		for _, n := range cl.nodes {
			n.waitStarted(b, 60*time.Second)
		}
		c.converge(b, cl.nodes...)
		for i, n := range cl.nodes {
			id := fmt.Sprintf("stagger-%s-src%d", m.name, i)
			putRetry(b, c.of(n), id, randomBytes(uint64(i), size))
			cl.sources = append(cl.sources, id)
		}
		clusters = append(clusters, cl)
	}
	run := func(cl *staggerCluster, target string) (staggerRep, time.Duration) {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		begin := time.Now()
		r, err := c.of(cl.nodes[0]).AllReduce(ctx, target, cl.sources, members, messages.ReduceOp_SUM, messages.DType_FLOAT32)
		took := time.Since(begin)
		if err != nil {
			b.Fatalf("%s: AllReduce: %v", cl.name, err)
		}
		if got := r.GetPlan().GetShape(); got != reduction.ShapeSliced {
			b.Fatalf("%s: shape %q", cl.name, got)
		}
		if err := c.of(cl.nodes[0]).Delete(ctx, target); err != nil {
			b.Fatalf("%s: delete: %v", cl.name, err)
		}
		time.Sleep(200 * time.Millisecond) // the workers log when they end
		rep, err := parseStagger(cl.nodes, target)
		if err != nil {
			b.Fatal(err)
		}
		return rep, took
	}
	for range b.N {
		stag := map[string][]time.Duration{}
		took := map[string][]time.Duration{}
		for rep := -1; rep < reps; rep++ { // rep -1: a warm-up
			for _, cl := range clusters {
				target := fmt.Sprintf("stagger-%s-%d", cl.name, rep+1)
				r, d := run(cl, target)
				if rep < 0 {
					continue
				}
				stag[cl.name] = append(stag[cl.name], r.stagger())
				took[cl.name] = append(took[cl.name], d)
				b.Logf("%s rep %d: AllReduce %s ms, stagger %s ms, sends %s ms; per member from the first send (ms):\n  received %s\n  spawned  %s\n  run      %s\n  created  %s\n  1st byte %s",
					cl.name, rep, ms(d), ms(r.stagger()), ms(time.Duration(r.sendNs)), msList(r.recv), msList(r.spawn), msList(r.run), msList(r.created), msList(r.first))
			}
		}
		for _, cl := range clusters {
			b.ReportMetric(float64(median(stag[cl.name]).Microseconds())/1000, "stagger-ms-"+cl.name)
			b.ReportMetric(float64(median(took[cl.name]).Microseconds())/1000, "allreduce-ms-"+cl.name)
		}
		// Each cluster's median stagger over the first's.
		for _, cl := range clusters[1:] {
			b.ReportMetric(float64(median(stag[cl.name]))/float64(median(stag[clusters[0].name])), "stagger-ratio-"+cl.name)
		}
	}
}
