package member

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/events"
	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/experiments"
	"github.com/hoplite-go/hoplite/internal/memberview"
	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/messages"
)

// Benchmarks of recovery (the "with failure" figures): broadcast
// 64 MiB to 7 receivers and reduce 8×64 MiB over an emulated 1 Gbit/s
// link, with one node killed at 50 % progress. Every iteration runs the
// failure-free case and the failure case back to back on fresh clusters.
//
//	go test -run x -bench WithFailure -benchtime 2x ./internal/member/
//
// Metrics:
//   - failure/free: time of the failure run over the failure-free run
//     (median of the iterations);
//   - resent-MiB: bytes moved over the data plane beyond what was needed;
//   - detect-ms: from Kill to the first recovery event (NodeFailed,
//     SenderSwitched or TreeNodeReplaced).

func faultBenchSize() int {
	if testing.Short() {
		return 8 << 20
	}
	return 64 << 20
}

// idOnShard returns prefix-N, the first such id whose directory shard is
// shard: benchmarks keep the shard (and a Reduce's coordinator) on node-0,
// which is never killed, so that only the data plane and the tree fail.
func idOnShard(prefix string, shard, shards int) string {
	for n := 0; ; n++ {
		if id := fmt.Sprintf("%s-%d", prefix, n); directory.ShardIndex(id, shards) == shard {
			return id
		}
	}
}

// idOnNode returns an id whose directory shard an embedded cluster of
// nodes members (shards shards, no restarts) places on node i: placement
// is rendezvous hashing of the member ids, the same in every run.
func idOnNode(prefix string, i, nodes, shards int) string {
	var live []string
	for k := range nodes {
		live = append(live, memberName(k, 0))
	}
	slices.Sort(live)
	owners := memberview.ShardOwners(live, shards)
	for n := 0; ; n++ {
		if id := fmt.Sprintf("%s-%d", prefix, n); owners[directory.ShardIndex(id, shards)] == memberName(i, 0) {
			return id
		}
	}
}

// idOnNodeAcrossRestart is an id whose directory shard node i holds
// both in its first incarnation and in its second (node-i#1), and the
// shard count (at least nodes) that makes one exist: placement hashes
// member ids, so a test that kills and restarts node i and wants the
// shard back there needs a shard both incarnations win.
func idOnNodeAcrossRestart(prefix string, i, nodes int) (id string, shards int) {
	var first, second []string
	for k := range nodes {
		first = append(first, memberName(k, 0))
		if k == i {
			second = append(second, memberName(k, 1))
		} else {
			second = append(second, memberName(k, 0))
		}
	}
	slices.Sort(first)
	slices.Sort(second)
	for shards = nodes; ; shards++ {
		before, after := memberview.ShardOwners(first, shards), memberview.ShardOwners(second, shards)
		kept := -1
		for j := range before {
			if before[j] == memberName(i, 0) && after[j] == memberName(i, 1) {
				kept = j
				break
			}
		}
		if kept < 0 {
			continue
		}
		for n := 0; ; n++ {
			if id = fmt.Sprintf("%s-%d", prefix, n); directory.ShardIndex(id, shards) == kept {
				return id, shards
			}
		}
	}
}

// faultLog drops the warnings every kill logs: the events are measured.
func faultLog() *logrus.Logger {
	l := logrus.New()
	l.SetLevel(logrus.ErrorLevel)
	return l
}

// firstRecovery records when the first recovery event was published.
type firstRecovery struct{ at atomic.Int64 }

func watchRecovery(l *Local) (*firstRecovery, func()) {
	f := &firstRecovery{}
	sub := l.System().EventStream.Subscribe(func(e any) {
		switch e.(type) {
		case *events.NodeFailed, *events.SenderSwitched, *events.TreeNodeReplaced:
			f.at.CompareAndSwap(0, time.Now().UnixNano())
		}
	})
	return f, func() { l.System().EventStream.Unsubscribe(sub) }
}

// detectDelay is the time from kill to the first recovery event.
func (f *firstRecovery) detectDelay(b *testing.B, kill time.Time) time.Duration {
	at := f.at.Load()
	if at == 0 {
		b.Fatal("no recovery event was published after the kill")
	}
	return time.Unix(0, at).Sub(kill)
}

type faultRun struct {
	elapsed time.Duration
	resent  int64         // bytes moved beyond what was needed
	detect  time.Duration // kill → first recovery event (failure runs)
}

type faultStats struct{ ratios, resent, freeResent, detect, free, fail []float64 }

func (s *faultStats) add(free, fail faultRun) {
	s.ratios = append(s.ratios, fail.elapsed.Seconds()/free.elapsed.Seconds())
	s.resent = append(s.resent, float64(fail.resent)/(1<<20))
	s.freeResent = append(s.freeResent, float64(free.resent)/(1<<20))
	s.detect = append(s.detect, float64(fail.detect.Microseconds())/1000)
	s.free = append(s.free, float64(free.elapsed.Milliseconds()))
	s.fail = append(s.fail, float64(fail.elapsed.Milliseconds()))
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if n := len(s); n%2 == 0 {
		return (s[n/2-1] + s[n/2]) / 2
	}
	return s[len(s)/2]
}

func (s *faultStats) report(b *testing.B) {
	b.ReportMetric(median(s.ratios), "failure/free")
	b.ReportMetric(median(s.resent), "resent-MiB")
	b.ReportMetric(median(s.freeResent), "free-resent-MiB") // 0 unless the count is off
	b.ReportMetric(median(s.detect), "detect-ms")
	b.ReportMetric(median(s.free), "free-ms")
	b.ReportMetric(median(s.fail), "failure-ms")
}

// BenchmarkBroadcastWithFailure: node-0 Puts the object, nodes 1..7 Get
// it at once. In the failure case the first receiver that holds half the
// object while another receiver streams from it is killed; the run ends
// when the six survivors hold the object. Bytes are counted per node from
// the chunk offsets each one stores: a chunk stored twice was re-sent.
func BenchmarkBroadcastWithFailure(b *testing.B) {
	size := faultBenchSize()
	data := randomBytes(21, size)
	var st faultStats
	for i := 0; b.Loop(); i++ {
		free := broadcastFaultRun(b, data, fmt.Sprintf("free%d", i), false)
		fail := broadcastFaultRun(b, data, fmt.Sprintf("fail%d", i), true)
		st.add(free, fail)
	}
	st.report(b)
}

func broadcastFaultRun(b *testing.B, data []byte, tag string, kill bool) faultRun {
	const nodes = benchNodes
	const chunk = 1 << 20
	size := len(data)
	id := idOnShard("bcast-"+tag, 0, nodes)
	var mu sync.Mutex
	stored := map[string]map[int64]int{} // node → chunk offset → times stored
	reported := map[string]bool{}
	halfway := make(chan string, nodes) // receivers that reached half
	cfg := Config{Nodes: nodes, ChunkSize: chunk, LinkBandwidth: benchGbit, Capacity: int64(size) * 2, Log: faultLog()}
	cfg.hooks.Store.BeforeFetchChunk = func(node, obj string, off int64) {
		if obj != id {
			return
		}
		mu.Lock()
		if stored[node] == nil {
			stored[node] = map[int64]int{}
		}
		stored[node][off]++
		first := off >= int64(size/2) && !reported[node]
		reported[node] = reported[node] || first
		mu.Unlock()
		if first && kill {
			halfway <- node // never blocks: one per node
		}
	}
	l, err := StartLocal(cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Stop()
	rec, unwatch := watchRecovery(l)
	defer unwatch()
	ctx := benchContext(b, benchTimeout)
	if err := l.Client(0).Put(ctx, id, data); err != nil {
		b.Fatal(err)
	}

	var victim atomic.Int64
	victim.Store(-1)
	var killedAt time.Time
	stop := make(chan struct{})
	var killer sync.WaitGroup
	if kill {
		// Kill from here, never from the hook: Kill waits for the node's
		// actors to stop, and the hook runs on one of its copies.
		killer.Go(func() {
			for {
				var node string
				select {
				case node = <-halfway:
				case <-stop:
					return
				}
				info, err := l.Client(0).Info(ctx, id, false)
				if err != nil {
					b.Error(err)
					return
				}
				dependent := false
				for _, tr := range info.GetTransfers() {
					dependent = dependent || (tr.GetSender() == node && tr.GetEndSeq() == 0 && !tr.GetAborted())
				}
				if !dependent {
					continue // nobody streams from it: not the failure we want
				}
				n, _ := strconv.Atoi(strings.TrimPrefix(node, "node-"))
				killedAt = time.Now()
				victim.Store(int64(n))
				if err := l.Kill(n); err != nil {
					b.Error(err)
				}
				return
			}
		})
	}
	begin := time.Now()
	errs := make([]error, nodes)
	var gets sync.WaitGroup
	for i := 1; i < nodes; i++ {
		gets.Go(func() {
			got, err := l.Client(i).GetReadOnly(ctx, id)
			if err == nil && len(got) != size {
				err = fmt.Errorf("node-%d got %d bytes", i, len(got))
			}
			errs[i] = err
		})
	}
	gets.Wait()
	elapsed := time.Since(begin)
	close(stop)
	killer.Wait()
	v := int(victim.Load())
	if kill && v < 0 {
		b.Fatal("no receiver was killed: none reached half while another streamed from it")
	}
	for i, err := range errs {
		if err != nil && i != v {
			b.Fatalf("node-%d: %v", i, err)
		}
	}
	run := faultRun{elapsed: elapsed}
	mu.Lock()
	for _, offs := range stored {
		for off, n := range offs {
			if n > 1 {
				run.resent += int64(n-1) * int64(min(chunk, size-int(off)))
			}
		}
	}
	mu.Unlock()
	if kill {
		run.detect = rec.detectDelay(b, killedAt)
	}
	return run
}

// BenchmarkReduceWithFailure: SUM of 8 of 9 float32 sources of 64 MiB,
// one per node, all Put at once after the Reduce call; the ninth is the
// backup. In the failure case the node of the first inner tree position
// (neither a leaf nor the root, not the caller) whose output reaches half
// is killed. Bytes moved are counted from the tree's outputs: a position
// reducing k children pulls k bytes for each byte of output it writes, so
// the outputs' writes (every epoch, sampled every 500 µs) times their
// child counts is what crossed the data plane; the tree needs (n−1)·S.
// degree=chosen lets the cost model pick (a chain on this link); degree=2
// is a binary tree, where a failure clears only the ancestors.
func BenchmarkReduceWithFailure(b *testing.B) {
	const nodes, num = 9, 8
	size := faultBenchSize()
	srcs := reduceSources(nodes, size)
	for _, degree := range []int{0, 2} {
		name := "degree=chosen"
		if degree > 0 {
			name = fmt.Sprintf("degree=%d", degree)
		}
		b.Run(name, func(b *testing.B) {
			var st faultStats
			for i := 0; b.Loop(); i++ {
				free := reduceFaultRun(b, srcs, num, degree, fmt.Sprintf("free%d", i), false)
				fail := reduceFaultRun(b, srcs, num, degree, fmt.Sprintf("fail%d", i), true)
				st.add(free, fail)
			}
			st.report(b)
		})
	}
}

// outputTrack follows one tree output object through its rewinds.
type outputTrack struct {
	id         string
	epoch      uint64
	max, total int64 // max written in this epoch; bytes of earlier epochs
}

func reduceFaultRun(b *testing.B, srcs [][]byte, num, degree int, tag string, wantKill bool) faultRun {
	nodes, size := len(srcs), len(srcs[0])
	target := idOnShard("sum-"+tag, 0, nodes) // the coordinator runs on node-0 with the caller
	ids := make([]string, nodes)
	for i := range ids {
		ids[i] = fmt.Sprintf("%s-src-%d", tag, i)
	}
	l, err := StartLocal(Config{Nodes: nodes, LinkBandwidth: benchGbit, Capacity: int64(size) * 4,
		exp: experiments.Set{ReduceDegree: degree}, Log: faultLog()})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Stop()
	rec, unwatch := watchRecovery(l)
	defer unwatch()
	ctx := benchContext(b, benchTimeout)

	// The sampler follows every inner output and the target, and picks
	// the victim: the first inner output past half on a node other than
	// the caller's.
	tracks := map[*objstore.Object]*outputTrack{}
	victimCh := make(chan int, 1)
	stop := make(chan struct{})
	kill := wantKill // cleared once a victim is chosen
	sample := func() {
		for n := range nodes {
			for _, o := range l.Store(n).Objects() {
				inner := strings.HasPrefix(o.ID(), "\x00reduce/")
				if !inner && o.ID() != target {
					continue
				}
				t := tracks[o]
				if t == nil {
					t = &outputTrack{id: o.ID()}
					tracks[o] = t
				}
				w, _, _ := o.Progress()
				if e := o.Epoch(); e != t.epoch {
					t.total, t.max, t.epoch = t.total+t.max, 0, e
				}
				t.max = max(t.max, w)
				if kill && inner && n != 0 && w >= int64(size/2) {
					select {
					case victimCh <- n:
						kill = false // one victim
					default:
					}
				}
			}
		}
	}
	var workers sync.WaitGroup
	workers.Go(func() {
		tick := time.NewTicker(500 * time.Microsecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				sample()
				return
			case <-tick.C:
				sample()
			}
		}
	})
	victim := -1
	var killedAt time.Time
	workers.Go(func() { // kills outside the sampler, which keeps counting
		select {
		case victim = <-victimCh:
			killedAt = time.Now()
			if err := l.Kill(victim); err != nil {
				b.Error(err)
			}
		case <-stop:
		}
	})

	type result struct {
		r   *messages.ReduceReply
		err error
	}
	done := make(chan result, 1)
	begin := time.Now()
	go func() {
		r, err := l.Client(0).Reduce(ctx, target, ids, num, messages.ReduceOp_SUM, messages.DType_FLOAT32)
		done <- result{r, err}
	}()
	putErrs := make([]error, nodes)
	var puts sync.WaitGroup
	for i := range srcs {
		puts.Go(func() { putErrs[i] = l.Client(i).Put(ctx, ids[i], srcs[i]) })
	}
	res := <-done
	elapsed := time.Since(begin)
	close(stop)
	workers.Wait()
	puts.Wait()
	if res.err != nil {
		b.Fatal(res.err)
	}
	if wantKill && victim < 0 {
		b.Fatal("no inner tree position reached half on a node that could be killed")
	}
	for i, err := range putErrs {
		if err != nil && i != victim {
			b.Fatalf("put %s: %v", ids[i], err)
		}
	}
	// Children per position, from the plan the Reduce reports.
	plan := res.r.GetPlan()
	kids := map[int]int{}
	root := -1
	for _, p := range plan.GetPositions() {
		if p.GetParent() < 0 {
			root = int(p.GetPosition())
		} else {
			kids[int(p.GetParent())]++
		}
	}
	var moved int64
	for _, t := range tracks {
		pos := root
		if t.id != target {
			p, err := strconv.Atoi(t.id[strings.LastIndexByte(t.id, '/')+1:])
			if err != nil {
				b.Fatalf("inner output %q: %v", t.id, err)
			}
			pos = p
		}
		moved += (t.total + t.max) * int64(kids[pos])
	}
	run := faultRun{elapsed: elapsed, resent: moved - int64(num-1)*int64(size)}
	if wantKill {
		run.detect = rec.detectDelay(b, killedAt)
	}
	return run
}
