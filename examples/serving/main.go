// Command serving is the paper's model-serving experiment (thesis §2.4.4,
// Figure 2.11) in miniature on an embedded Hoplite cluster: an ensemble of
// image classifiers answers each query by majority vote.
//
// A frontend on node-0 Puts each query, a batch of images (a few MiB),
// and tells the model actors, one Proto.Actor actor per node on
// node-1..node-M. Each model Gets the batch on its own node, classifies
// every image (a tiny synthetic linear classifier, plus an injected
// inference time standing for a real network on a GPU) and Puts its
// votes; the frontend Gets every model's votes and answers with the
// majority for each image (ties go to the lowest class).
//
// With Hoplite the models' Gets of one batch form a broadcast tree by
// themselves. The naive baseline (the naive experiment of
// internal/experiments, which only programs of this module can turn on)
// sends the batch to every model from the frontend, like Ray without
// collectives. Both run in the same process, one after the other, and the
// program prints their throughput in queries per second.
package main

import (
	"context"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/internal/experiments"
	"github.com/hoplite-go/hoplite/messages"
)

// opTimeout bounds each Put, Get and Delete inside Hoplite: a reply always
// comes.
const opTimeout = 60 * time.Second

// setup is one serving run's parameters.
type setup struct {
	models   int           // one per node, node-1..node-models
	images   int           // images per query batch
	pixels   int           // float32 values per image
	view     int           // pixels each model looks at (a fixed, downsampled view)
	classes  int           // at most 256: a vote is one byte
	spread   float64       // how much the models differ from their common base
	queries  int           // queries per run
	inflight int           // queries the frontend keeps in flight
	compute  time.Duration // injected inference time of a batch, on average
	linkBps  float64       // emulated link per node in bytes/s (0: memory speed)
	chunk    int           // transfer chunk size in bytes (0: the cluster's default)
	pool     int           // distinct batches; queries cycle through them
	seed     uint64
}

func defaultSetup() setup {
	return setup{models: 8, images: 64, pixels: 16 << 10, view: 256, classes: 10, spread: 0.3,
		queries: 30, inflight: 1, compute: 10 * time.Millisecond, linkBps: 1000e6 / 8, pool: 4, seed: 1}
}

func (s setup) batchBytes() int { return 4 * s.images * s.pixels }

func (s setup) validate() error {
	switch {
	case s.models < 1:
		return fmt.Errorf("need at least one model, got %d", s.models)
	case s.images < 1 || s.pixels < 1 || s.queries < 1 || s.inflight < 1 || s.pool < 1:
		return fmt.Errorf("images, pixels, queries, inflight and pool must be positive")
	case s.view < 1 || s.view > s.pixels:
		return fmt.Errorf("view must be in 1..%d, got %d", s.pixels, s.view)
	case s.classes < 2 || s.classes > 256:
		return fmt.Errorf("classes must be in 2..256, got %d", s.classes)
	case s.compute < 0:
		return fmt.Errorf("compute must be >= 0")
	}
	return nil
}

// ---- the models ----

// model is one member of the ensemble: a linear classifier over a fixed
// view of the pixels. The members share a base and differ by spread, so
// they mostly, but not always, agree.
type model struct {
	view []int       // pixel indices, the same for every member
	w    [][]float32 // classes × view
}

// ensemble builds every member from the seed: the model actors and the
// test build the same ones.
func ensemble(s setup) []*model {
	r := rand.New(rand.NewPCG(s.seed, 0xba5e))
	view := r.Perm(s.pixels)[:s.view]
	slices.Sort(view)
	base := make([][]float32, s.classes)
	for c := range base {
		base[c] = make([]float32, s.view)
		for j := range base[c] {
			base[c][j] = float32(r.NormFloat64())
		}
	}
	out := make([]*model, s.models)
	for m := range out {
		r := rand.New(rand.NewPCG(s.seed, uint64(100+m)))
		md := &model{view: view, w: make([][]float32, s.classes)}
		for c := range md.w {
			md.w[c] = make([]float32, s.view)
			for j := range md.w[c] {
				md.w[c][j] = base[c][j] + float32(s.spread*r.NormFloat64())
			}
		}
		out[m] = md
	}
	return out
}

// classify returns one vote (a class) per image of batch, which holds
// images × pixels little-endian float32s.
func (md *model) classify(s setup, batch []byte) []byte {
	votes := make([]byte, s.images)
	x := make([]float32, len(md.view))
	for img := range s.images {
		off := 4 * img * s.pixels
		for j, p := range md.view {
			x[j] = math.Float32frombits(binary.LittleEndian.Uint32(batch[off+4*p:]))
		}
		best, bestScore := 0, float32(math.Inf(-1))
		for c, wc := range md.w {
			var score float32
			for j, xj := range x {
				score += wc[j] * xj
			}
			if score > bestScore {
				best, bestScore = c, score
			}
		}
		votes[img] = byte(best)
	}
	return votes
}

// majority is, per image, the class most models voted for; a tie goes to
// the lowest class.
func majority(s setup, votes [][]byte) []byte {
	out := make([]byte, s.images)
	counts := make([]int, s.classes)
	for img := range s.images {
		clear(counts)
		for _, v := range votes {
			counts[v[img]]++
		}
		best := 0
		for c, n := range counts {
			if n > counts[best] {
				best = c
			}
		}
		out[img] = byte(best)
	}
	return out
}

// batches makes the pool of distinct query batches: random pixels, so
// nothing compresses or deduplicates them.
func batches(s setup) [][]byte {
	out := make([][]byte, s.pool)
	for k := range out {
		r := rand.New(rand.NewPCG(s.seed, uint64(5000+k)))
		b := make([]byte, s.batchBytes())
		for i := 0; i < len(b); i += 4 {
			binary.LittleEndian.PutUint32(b[i:], math.Float32bits(float32(r.NormFloat64())))
		}
		out[k] = b
	}
	return out
}

// ---- object ids ----

func queryID(k int) string        { return fmt.Sprintf("serve/query/%d", k) }
func votesID(k, model int) string { return fmt.Sprintf("serve/votes/%d/m%d", k, model) }

// parseVotesID is the inverse of votesID.
func parseVotesID(id string) (k, model int, ok bool) {
	n, err := fmt.Sscanf(id, "serve/votes/%d/m%d", &k, &model)
	return k, model, err == nil && n == 2
}

// ---- messages between the application actors (in-process: plain structs) ----

type (
	// infer tells a model actor to classify query k.
	infer struct{ k int }
	// inferred is a model actor's own timer: the votes are ready to be Put.
	inferred struct {
		k     int
		votes []byte
	}
	// failure is a model actor's error, sent to the frontend.
	failure struct {
		model int
		err   error
	}
)

// ---- the model actor ----

// modelActor serves one model on node-(idx+1).
type modelActor struct {
	s         setup
	idx       int
	store     *actor.PID // its own node's store node: the batch lands on this node
	m         *model
	jitter    *rand.Rand
	busyUntil time.Time           // its (emulated) accelerator runs one batch at a time
	timers    map[int]*time.Timer // by query, until they fire
}

func (a *modelActor) fail(ctx actor.Context, err error) {
	ctx.Send(ctx.Parent(), failure{model: a.idx, err: err})
}

func (a *modelActor) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case infer:
		// ReadOnly: the node's own buffer, only read by classify.
		ctx.Request(a.store, &messages.Get{ObjectId: queryID(m.k), ReadOnly: true, TimeoutMs: opTimeout.Milliseconds()})
	case *messages.GetReply:
		if err := m.Err(); err != nil {
			a.fail(ctx, fmt.Errorf("get %s: %w", m.GetObjectId(), err))
			return
		}
		var k int
		if _, err := fmt.Sscanf(m.GetObjectId(), "serve/query/%d", &k); err != nil || len(m.GetData()) != a.s.batchBytes() {
			a.fail(ctx, fmt.Errorf("get %s: unexpected reply (%d bytes)", m.GetObjectId(), len(m.GetData())))
			return
		}
		votes := a.m.classify(a.s, m.GetData())
		start := time.Now()
		if a.busyUntil.After(start) {
			start = a.busyUntil
		}
		a.busyUntil = start.Add(time.Duration(float64(a.s.compute) * (0.75 + 0.5*a.jitter.Float64())))
		self, root := ctx.Self(), ctx.ActorSystem().Root
		if a.timers == nil {
			a.timers = map[int]*time.Timer{}
		}
		a.timers[k] = time.AfterFunc(time.Until(a.busyUntil), func() { root.Send(self, inferred{k: k, votes: votes}) })
	case inferred:
		delete(a.timers, m.k)
		ctx.Request(a.store, &messages.Put{ObjectId: votesID(m.k, a.idx), Data: m.votes, TimeoutMs: opTimeout.Milliseconds()})
	case *messages.PutReply:
		if err := m.Err(); err != nil {
			a.fail(ctx, fmt.Errorf("put %s: %w", m.GetObjectId(), err))
		}
	case *actor.Stopping:
		for _, t := range a.timers {
			t.Stop()
		}
	}
}

// ---- the frontend ----

// result is one serving run.
type result struct {
	answers   [][]byte        // per query: the majority per image
	latencies []time.Duration // per query: Put of the batch to the answer
	elapsed   time.Duration   // first Put to last answer
}

type outcome struct {
	res result
	err error
}

// query is one query in flight.
type query struct {
	start time.Time
	votes [][]byte // per model, once its Get returned
	got   int
}

// frontend is the actor on node-0 that takes queries and answers them.
type frontend struct {
	s        setup
	l        *cluster.Local
	store    *actor.PID
	done     chan<- outcome
	pool     [][]byte
	models   []*actor.PID
	next     int // the next query to submit
	inFlight map[int]*query
	answered int
	deletes  int // Deletes not yet answered
	over     bool
	t0       time.Time
	res      result
}

func (f *frontend) finish(o outcome) {
	select {
	case f.done <- o:
	default:
	}
}

func (f *frontend) fail(err error) {
	f.over = true
	f.finish(outcome{err: err})
}

func (f *frontend) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		for i, md := range ensemble(f.s) {
			store, s := f.l.StoreNode(i+1), f.s
			f.models = append(f.models, ctx.Spawn(actor.PropsFromProducer(func() actor.Actor {
				return &modelActor{s: s, idx: i, store: store, m: md, jitter: rand.New(rand.NewPCG(s.seed, uint64(200+i)))}
			})))
		}
		f.inFlight = map[int]*query{}
		f.res.answers = make([][]byte, f.s.queries)
		f.res.latencies = make([]time.Duration, f.s.queries)
		f.t0 = time.Now()
		for range min(f.s.inflight, f.s.queries) {
			f.submit(ctx)
		}
	case failure:
		f.fail(fmt.Errorf("model %d on node-%d: %w", m.model, m.model+1, m.err))
	case *messages.PutReply:
		if err := m.Err(); err != nil {
			f.fail(fmt.Errorf("put %s: %w", m.GetObjectId(), err))
			return
		}
		var k int
		if _, err := fmt.Sscanf(m.GetObjectId(), "serve/query/%d", &k); err != nil {
			f.fail(fmt.Errorf("unexpected PutReply for %q", m.GetObjectId()))
			return
		}
		// The models fetch the batch; the frontend waits for their votes
		// in the store (a Get waits for an object to be created).
		for i, pid := range f.models {
			ctx.Send(pid, infer{k: k})
			ctx.Request(f.store, &messages.Get{ObjectId: votesID(k, i), TimeoutMs: opTimeout.Milliseconds()})
		}
	case *messages.GetReply:
		if err := m.Err(); err != nil {
			f.fail(fmt.Errorf("get %s: %w", m.GetObjectId(), err))
			return
		}
		k, i, ok := parseVotesID(m.GetObjectId())
		q := f.inFlight[k]
		if !ok || q == nil || i < 0 || i >= f.s.models || q.votes[i] != nil || len(m.GetData()) != f.s.images {
			f.fail(fmt.Errorf("unexpected GetReply for %q (%d bytes)", m.GetObjectId(), len(m.GetData())))
			return
		}
		q.votes[i] = m.GetData()
		if q.got++; q.got == f.s.models {
			f.answer(ctx, k, q)
		}
	case *messages.DeleteReply:
		f.deletes--
		if err := m.Err(); err != nil {
			f.fail(fmt.Errorf("delete %s: %w", m.GetObjectId(), err))
			return
		}
		if f.over && f.deletes == 0 {
			f.finish(outcome{res: f.res})
		}
	}
}

func (f *frontend) submit(ctx actor.Context) {
	k := f.next
	f.next++
	f.inFlight[k] = &query{start: time.Now(), votes: make([][]byte, f.s.models)}
	ctx.Request(f.store, &messages.Put{ObjectId: queryID(k), Data: f.pool[k%len(f.pool)], TimeoutMs: opTimeout.Milliseconds()})
}

// answer takes the majority, frees the query's objects and keeps the
// pipeline full.
func (f *frontend) answer(ctx actor.Context, k int, q *query) {
	f.res.answers[k] = majority(f.s, q.votes)
	f.res.latencies[k] = time.Since(q.start)
	delete(f.inFlight, k)
	f.answered++
	del := []string{queryID(k)}
	for i := range f.models {
		del = append(del, votesID(k, i))
	}
	for _, id := range del {
		f.deletes++
		ctx.Request(f.store, &messages.Delete{ObjectId: id, TimeoutMs: opTimeout.Milliseconds()})
	}
	if f.next < f.s.queries {
		f.submit(ctx)
	}
	if f.answered == f.s.queries {
		f.over = true
		f.res.elapsed = time.Since(f.t0)
	}
}

// serve runs the queries on a fresh embedded cluster: Hoplite's
// collectives, or the naive baseline.
func serve(ctx context.Context, s setup, pool [][]byte, naive bool, log *logrus.Logger) (result, error) {
	if err := ctx.Err(); err != nil {
		return result{}, fmt.Errorf("serving not started: %w", err)
	}
	cfg := cluster.Config{Nodes: s.models + 1, LinkBandwidth: s.linkBps, ChunkSize: s.chunk, DefaultTimeout: opTimeout, Log: log}
	experiments.In(&cfg).Naive = naive
	l, err := cluster.StartLocal(cfg)
	if err != nil {
		return result{}, err
	}
	defer l.Stop()
	return serveOn(ctx, l, s, pool)
}

// serveOn runs the frontend and its models on l and returns when every
// query is answered and its objects deleted.
func serveOn(ctx context.Context, l *cluster.Local, s setup, pool [][]byte) (result, error) {
	done := make(chan outcome, 1)
	pid := l.System().Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &frontend{s: s, l: l, store: l.StoreNode(0), done: done, pool: pool}
	}))
	// Stop the frontend and its models first: nothing runs after serveOn.
	defer func() { _ = l.System().Root.StopFuture(pid).Wait() }()
	select {
	case o := <-done:
		return o.res, o.err
	case <-ctx.Done():
		return result{}, fmt.Errorf("serving did not finish: %w", ctx.Err())
	}
}

// comparison is ours and naive, each over reps runs.
type comparison struct {
	ours, naive []result
}

func rate(rs []result) float64 {
	var n int
	var d time.Duration
	for _, r := range rs {
		n += len(r.answers)
		d += r.elapsed
	}
	return float64(n) / d.Seconds()
}

func median(rs []result) time.Duration {
	var all []time.Duration
	for _, r := range rs {
		all = append(all, r.latencies...)
	}
	sort.Slice(all, func(i, j int) bool { return all[i] < all[j] })
	return all[len(all)/2]
}

// compare serves reps times with each, alternating, so that noise from the
// shared machine hits both alike.
func compare(ctx context.Context, s setup, reps int, log *logrus.Logger) (comparison, error) {
	var c comparison
	pool := batches(s)
	for range reps {
		r, err := serve(ctx, s, pool, false, log)
		if err != nil {
			return c, fmt.Errorf("ours: %w", err)
		}
		c.ours = append(c.ours, r)
		if r, err = serve(ctx, s, pool, true, log); err != nil {
			return c, fmt.Errorf("naive: %w", err)
		}
		c.naive = append(c.naive, r)
	}
	return c, nil
}

func mbps(bps float64) string {
	if bps == 0 {
		return "unlimited (memory speed)"
	}
	return fmt.Sprintf("%g Mbit/s", bps*8/1e6)
}

// run serves with both and prints a summary and the RESULT line.
func run(ctx context.Context, out io.Writer, s setup, reps int, log *logrus.Logger) (comparison, error) {
	if err := s.validate(); err != nil {
		return comparison{}, err
	}
	fmt.Fprintf(out, "model serving (thesis §2.4.4): frontend on node-0, an ensemble of %d models on node-1..node-%d\n", s.models, s.models)
	fmt.Fprintf(out, "query: %d images of %d KiB = %.2f MiB; %d classes; link %s per node; inference %v per batch; %d queries, %d in flight\n\n",
		s.images, 4*s.pixels>>10, float64(s.batchBytes())/(1<<20), s.classes, mbps(s.linkBps), s.compute, s.queries, s.inflight)
	c, err := compare(ctx, s, reps, log)
	if err != nil {
		return c, err
	}
	fmt.Fprintf(out, "mode    runs  queries  seconds  queries/s  median latency\n")
	for _, row := range []struct {
		name string
		rs   []result
	}{{"ours", c.ours}, {"naive", c.naive}} {
		var n int
		var d time.Duration
		for _, r := range row.rs {
			n, d = n+len(r.answers), d+r.elapsed
		}
		fmt.Fprintf(out, "%-6s  %4d  %7d  %7.2f  %9.2f  %v\n", row.name, len(row.rs), n, d.Seconds(), rate(row.rs),
			median(row.rs).Round(100*time.Microsecond))
	}
	for k := range c.ours[0].answers {
		if !slices.Equal(c.ours[0].answers[k], c.naive[0].answers[k]) {
			return c, fmt.Errorf("query %d: ours and naive answered differently", k)
		}
	}
	fmt.Fprintf(out, "both answered every query alike\n")
	fmt.Fprintf(out, "RESULT example=serving ours=%.2f queries/s naive=%.2f queries/s ratio=%.2f\n",
		rate(c.ours), rate(c.naive), rate(c.ours)/rate(c.naive))
	return c, nil
}

func main() {
	s := defaultSetup()
	flag.IntVar(&s.models, "models", s.models, "models in the ensemble, one per node (the frontend is on one more node)")
	flag.IntVar(&s.images, "images", s.images, "images per query batch")
	imageKiB := flag.Int("image-kib", 4*s.pixels>>10, "KiB per image (float32 pixels); the paper's 256x256 RGB images are 192 KiB as bytes")
	flag.IntVar(&s.classes, "classes", s.classes, "classes (at most 256)")
	flag.IntVar(&s.queries, "queries", s.queries, "queries per run")
	flag.IntVar(&s.inflight, "inflight", s.inflight, "queries in flight at once")
	flag.DurationVar(&s.compute, "compute", s.compute, "injected inference time per batch and model (jittered by ±25%)")
	linkMbps := flag.Float64("link-mbps", 1000, "emulated per-node link in Mbit/s, up and down (0: memory speed)")
	chunkKiB := flag.Int("chunk-kib", 1024, "transfer chunk size in KiB")
	reps := flag.Int("reps", 1, "runs of each, alternating")
	timeout := flag.Duration("timeout", 10*time.Minute, "give up after this long")
	verbose := flag.Bool("v", false, "log at debug level")
	flag.Parse()
	s.pixels, s.linkBps, s.chunk = max(1, *imageKiB<<10/4), *linkMbps*1e6/8, *chunkKiB<<10
	s.view = min(s.view, s.pixels)
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	if *verbose {
		log.SetLevel(logrus.DebugLevel)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if _, err := run(ctx, os.Stdout, s, max(1, *reps), log); err != nil {
		fmt.Fprintln(os.Stderr, "serving:", strings.TrimSpace(err.Error()))
		os.Exit(1)
	}
}
