// Command paramserver is the paper's asynchronous SGD experiment (thesis
// §2.4.2, Figure 2.9) in miniature on an embedded Hoplite cluster.
//
// A parameter server on node-0 trains a linear model y = W·x (float32
// weights, a few MiB, so that moving them costs more than computing with
// them) with n workers, one Proto.Actor actor per node on node-1..node-n.
// A worker Gets the weights it was told about, computes a gradient on a
// batch of its own stream of samples, takes an injected compute time
// (workers differ in speed and every batch jitters), and Puts the gradient.
// Each round the server Reduces (SUM, FLOAT32) the first n/2 gradients to
// become ready out of every worker's outstanding one, updates the weights,
// Puts them, and only the workers whose gradients were reduced Get the new
// weights and go on; the others keep computing on their stale weights and
// are reduced in a later round (the paper's scheme: the server "collects
// and reduces the updates from the first half of worker nodes that finish
// the update and broadcasts the new weights back to these nodes").
//
// Hoplite turns the Reduce into a tree over the workers' nodes and the
// contributors' Gets into a broadcast tree. The naive baseline (the
// naive experiment of internal/experiments, which only programs of this
// module can turn on) gathers every gradient at the server and sends the
// weights to every contributor from the server, like Ray without
// collectives. Both run in the same process, one after the other, and the
// program prints their training throughput in samples per second.
//
// A gradient object carries three more float32s after the gradient: the
// batch loss, 1, and the weights version it was computed on. Summed by the
// Reduce they give the mean loss, the number of gradients reduced and
// their mean staleness, without another message.
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
	"strings"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/internal/experiments"
	"github.com/hoplite-go/hoplite/messages"
)

// opTimeout bounds each Put, Get, Reduce and Delete inside Hoplite: a
// reply always comes.
const opTimeout = 60 * time.Second

// A gradient object is the gradient, then these three float32s.
const (
	extraLoss    = iota // the batch's mean loss
	extraCount          // 1: the sum counts the gradients reduced
	extraVersion        // the weights version the gradient was computed on
	extras
)

// Model constants: the teacher y = Σ_k u_k (v_k·x) + noise has rank 2.
const (
	teacherRank = 2
	noise       = 0.1
)

// setup is one training run's parameters.
type setup struct {
	workers  int           // one per node, node-1..node-workers
	features int           // input dimension
	active   int           // non-zero features per sample
	outputs  int           // output dimension: outputs×features weights
	batch    int           // samples per gradient
	rounds   int           // server updates
	compute  time.Duration // injected compute time of a batch on the fastest worker
	lr       float64       // learning rate
	linkBps  float64       // emulated link per node in bytes/s (0: memory speed)
	chunk    int           // transfer chunk size in bytes (0: the cluster's default)
	seed     uint64
	// observe, if set, is called by the server after it Put the weights of
	// a round and before it tells the workers or deletes anything.
	observe func(l *cluster.Local, rec roundRecord) error
}

func defaultSetup() setup {
	return setup{workers: 8, features: 64, active: 4, outputs: (4 << 20) / 4 / 64, batch: 8, rounds: 20,
		compute: 20 * time.Millisecond, lr: 1, linkBps: 1000e6 / 8, seed: 1}
}

// contributors is the number of gradients reduced per round: the first half.
func (s setup) contributors() int { return max(1, s.workers/2) }
func (s setup) params() int       { return s.outputs * s.features }
func (s setup) modelBytes() int   { return 4 * s.params() }

// speed is worker i's slowdown: 1 for worker 0 up to 3 for the last.
func (s setup) speed(i int) float64 {
	if s.workers == 1 {
		return 1
	}
	return 1 + 2*float64(i)/float64(s.workers-1)
}

func (s setup) validate() error {
	switch {
	case s.workers < 2:
		return fmt.Errorf("need at least 2 workers, got %d", s.workers)
	case s.features < 1 || s.outputs < 1 || s.batch < 1 || s.rounds < 1:
		return fmt.Errorf("features, outputs, batch and rounds must be positive")
	case s.active < 1 || s.active > s.features:
		return fmt.Errorf("active features must be in 1..%d, got %d", s.features, s.active)
	case s.compute < 0 || s.lr <= 0:
		return fmt.Errorf("compute must be >= 0 and lr > 0")
	}
	return nil
}

// ---- the model ----

// teacher is the function the model learns; every worker's samples come
// from it, so they share one set of correct weights.
type teacher struct {
	u [teacherRank][]float32 // outputs each
	v [teacherRank][]float32 // features each
}

func newTeacher(s setup) *teacher {
	r := rand.New(rand.NewPCG(s.seed, 0x7eac4e5))
	t := &teacher{}
	for k := range teacherRank {
		t.u[k] = make([]float32, s.outputs)
		for o := range t.u[k] {
			t.u[k][o] = float32(r.NormFloat64())
		}
		t.v[k] = make([]float32, s.features)
		for i := range t.v[k] {
			t.v[k][i] = float32(r.NormFloat64() / math.Sqrt(float64(s.active)))
		}
	}
	return t
}

// sample is one input: s.active features (distinct indices) are non-zero.
// Sparse inputs keep the real arithmetic per sample small (outputs ×
// active) on a model of many outputs: the injected compute time, not this
// machine's two cores, stands for the computation.
type sample struct {
	idx []int
	val []float32
	y   []float32
}

func newSample(s setup) *sample {
	return &sample{idx: make([]int, s.active), val: make([]float32, s.active), y: make([]float32, s.outputs)}
}

// draw fills x with a random input and the teacher's noisy output.
func (t *teacher) draw(r *rand.Rand, x *sample, features int) {
	for j := range x.idx {
	again:
		x.idx[j] = r.IntN(features)
		if slices.Contains(x.idx[:j], x.idx[j]) {
			goto again
		}
		x.val[j] = float32(r.NormFloat64())
	}
	var proj [teacherRank]float32
	for k := range teacherRank {
		for j, i := range x.idx {
			proj[k] += t.v[k][i] * x.val[j]
		}
	}
	for o := range x.y {
		var p float32
		for k := range teacherRank {
			p += t.u[k][o] * proj[k]
		}
		x.y[o] = p + float32(noise*r.NormFloat64())
	}
}

// residual is row·x − y_o for output o.
func (x *sample) residual(row []float32, o int) float32 {
	var p float32
	for j, i := range x.idx {
		p += row[i] * x.val[j]
	}
	return p - x.y[o]
}

// gradient computes into g (params long, zeroed here) the gradient of the
// mean loss ½‖W·x − y‖²/outputs over one batch drawn from r, and returns
// that loss. g[o·F+i] = (1/batch) Σ_b r_o x_i: the 1/outputs of the loss
// is left out so that lr does not depend on the number of outputs.
func gradient(s setup, t *teacher, r *rand.Rand, w, g []float32) float64 {
	clear(g)
	x := newSample(s)
	scale := 1 / float32(s.batch)
	var loss float64
	for range s.batch {
		t.draw(r, x, s.features)
		for o := range s.outputs {
			res := x.residual(w[o*s.features:(o+1)*s.features], o)
			loss += float64(res * res)
			gr, c := g[o*s.features:(o+1)*s.features], res*scale
			for j, i := range x.idx {
				gr[i] += c * x.val[j]
			}
		}
	}
	return loss / float64(2*s.batch*s.outputs)
}

// evalLoss is the mean loss of weights w on n fresh samples: the test's
// direct measure, independent of what the workers reported.
func evalLoss(s setup, w []float32, n int) float64 {
	t, r, x := newTeacher(s), rand.New(rand.NewPCG(s.seed, 0xe7a1)), newSample(s)
	var loss float64
	for range n {
		t.draw(r, x, s.features)
		for o := range s.outputs {
			res := x.residual(w[o*s.features:(o+1)*s.features], o)
			loss += float64(res * res)
		}
	}
	return loss / float64(2*n*s.outputs)
}

func encode(v []float32) []byte {
	b := make([]byte, 4*len(v))
	for i, f := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(f))
	}
	return b
}

// decodeInto decodes b into v (reused), which it returns.
func decodeInto(v []float32, b []byte) []float32 {
	v = slices.Grow(v[:0], len(b)/4)[:len(b)/4]
	for i := range v {
		v[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
	}
	return v
}

// ---- object ids ----

func weightsID(v int) string      { return fmt.Sprintf("ps/weights/v%d", v) }
func gradID(worker, k int) string { return fmt.Sprintf("ps/grad/w%d/%d", worker, k) }
func sumID(round int) string      { return fmt.Sprintf("ps/sum/r%d", round) }

// ---- messages between the application actors (in-process: plain structs) ----

type (
	// assign tells a worker to fetch weights version v and compute on them.
	assign struct{ version int }
	// computed is a worker's own timer: its gradient is ready to be Put.
	computed struct{ data []byte }
	// failure is a worker's error, sent to the server.
	failure struct {
		worker int
		err    error
	}
)

// ---- the worker ----

// worker is one Proto.Actor actor on node-(idx+1): Get weights, compute,
// Put the gradient, wait to be assigned newer weights.
type worker struct {
	s       setup
	idx     int
	store   *actor.PID // its own node's store node: copies land on this node
	teacher *teacher
	data    *rand.Rand // its stream of samples (its shard of the data)
	jitter  *rand.Rand
	seq     int // its next gradient's number
	version int // the weights version it computes on
	busy    bool
	queued  *assign // an assignment that overtook its own Put's reply
	w, g    []float32
	timer   *time.Timer
}

func newWorker(s setup, idx int, store *actor.PID, t *teacher) *worker {
	return &worker{s: s, idx: idx, store: store, teacher: t,
		data:   rand.New(rand.NewPCG(s.seed, uint64(1000+idx))),
		jitter: rand.New(rand.NewPCG(s.seed, uint64(2000+idx))),
		g:      make([]float32, s.params()+extras)}
}

func (w *worker) fail(ctx actor.Context, err error) {
	ctx.Send(ctx.Parent(), failure{worker: w.idx, err: err})
}

func (w *worker) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case assign:
		if w.busy {
			w.queued = &m
			return
		}
		w.busy, w.version = true, m.version
		// ReadOnly: the node's own buffer, decoded below, never modified.
		ctx.Request(w.store, &messages.Get{ObjectId: weightsID(m.version), ReadOnly: true, TimeoutMs: opTimeout.Milliseconds()})
	case *messages.GetReply:
		if err := m.Err(); err != nil {
			w.fail(ctx, fmt.Errorf("get %s: %w", m.GetObjectId(), err))
			return
		}
		if len(m.GetData()) != w.s.modelBytes() {
			w.fail(ctx, fmt.Errorf("get %s: %d bytes, want %d", m.GetObjectId(), len(m.GetData()), w.s.modelBytes()))
			return
		}
		start := time.Now()
		w.w = decodeInto(w.w, m.GetData())
		loss := gradient(w.s, w.teacher, w.data, w.w, w.g[:w.s.params()])
		w.g[w.s.params()+extraLoss] = float32(loss)
		w.g[w.s.params()+extraCount] = 1
		w.g[w.s.params()+extraVersion] = float32(w.version)
		data := encode(w.g)
		// The injected compute time stands for a real model's forward and
		// backward pass; what the arithmetic above took counts towards it.
		d := time.Duration(float64(w.s.compute)*w.s.speed(w.idx)*(0.75+0.5*w.jitter.Float64())) - time.Since(start)
		self, root := ctx.Self(), ctx.ActorSystem().Root
		w.timer = time.AfterFunc(max(d, 0), func() { root.Send(self, computed{data: data}) })
	case computed:
		ctx.Request(w.store, &messages.Put{ObjectId: gradID(w.idx, w.seq), Data: m.data, TimeoutMs: opTimeout.Milliseconds()})
	case *messages.PutReply:
		if err := m.Err(); err != nil {
			w.fail(ctx, fmt.Errorf("put %s: %w", m.GetObjectId(), err))
			return
		}
		w.seq++
		w.busy = false
		if q := w.queued; q != nil {
			w.queued = nil
			ctx.Send(ctx.Self(), *q)
		}
	case *actor.Stopping:
		if w.timer != nil {
			w.timer.Stop()
		}
	}
}

// ---- the server ----

// roundRecord is what the server did in one round, for setup.observe.
type roundRecord struct {
	round              int
	reduced, unreduced []string  // gradient ids, as the Reduce reported them
	old, updated       []float32 // the weights before and after
	sum                []float32 // the reduced object: params + extras
	plan               *messages.ReducePlan
}

// roundStat is one round as printed.
type roundStat struct {
	loss      float64 // mean batch loss of the reduced gradients
	staleness float64 // mean (round − weights version) of the reduced gradients
	took      time.Duration
}

// result is one training run.
type result struct {
	stats   []roundStat
	elapsed time.Duration // from the first Reduce to the last round's weights
	samples int           // samples in the reduced gradients
	weights []float32     // the final weights
	shape   string        // the reduce shape of the last round ("d-ary", "naive-gather", ...)
}

type outcome struct {
	res result
	err error
}

// server is the parameter server actor on node-0.
type server struct {
	s       setup
	l       *cluster.Local
	store   *actor.PID
	done    chan<- outcome
	workers []*actor.PID
	round   int
	putting int          // the weights version being Put
	weights []float32    // version round (then round+1 once updated)
	old     []float32    // version round, kept for observe
	next    []int        // per worker: the gradient it owes the server
	uses    []int        // per worker: the weights version it computes on
	live    map[int]bool // weights versions not deleted yet
	owner   map[string]int
	reply   *messages.ReduceReply // this round's, once it came
	sumData []byte                // this round's sum, once it came
	sum     []float32
	deletes int // Deletes not yet answered
	over    bool
	t0, tr  time.Time
	res     result
}

func (sv *server) finish(o outcome) {
	select {
	case sv.done <- o:
	default:
	}
}

func (sv *server) fail(err error) {
	sv.over = true
	sv.finish(outcome{err: err})
}

func (sv *server) Receive(ctx actor.Context) {
	switch m := ctx.Message().(type) {
	case *actor.Started:
		t := newTeacher(sv.s)
		for i := range sv.s.workers {
			store := sv.l.StoreNode(i + 1)
			sv.workers = append(sv.workers, ctx.Spawn(actor.PropsFromProducer(func() actor.Actor {
				return newWorker(sv.s, i, store, t)
			})))
		}
		sv.next, sv.uses = make([]int, sv.s.workers), make([]int, sv.s.workers)
		sv.live = map[int]bool{0: true}
		sv.weights = make([]float32, sv.s.params())
		sv.putWeights(ctx, 0)
	case failure:
		sv.fail(fmt.Errorf("worker %d on node-%d: %w", m.worker, m.worker+1, m.err))
	case *messages.PutReply:
		if err := m.Err(); err != nil {
			sv.fail(fmt.Errorf("put %s: %w", m.GetObjectId(), err))
			return
		}
		if sv.putting == 0 {
			sv.t0 = time.Now()
			for _, w := range sv.workers {
				ctx.Send(w, assign{version: 0})
			}
			sv.startRound(ctx)
			return
		}
		sv.finishRound(ctx)
	case *messages.ReduceReply:
		if err := m.Err(); err != nil {
			sv.fail(fmt.Errorf("reduce %s: %w", m.GetTargetId(), err))
			return
		}
		sv.reply = m
		if sv.sumData != nil {
			sv.update(ctx)
		}
	case *messages.GetReply:
		if err := m.Err(); err != nil {
			sv.fail(fmt.Errorf("get %s: %w", m.GetObjectId(), err))
			return
		}
		sv.sumData = m.GetData()
		if sv.reply != nil {
			sv.update(ctx)
		}
	case *messages.DeleteReply:
		sv.deletes--
		if err := m.Err(); err != nil {
			sv.fail(fmt.Errorf("delete %s: %w", m.GetObjectId(), err))
			return
		}
		if sv.over && sv.deletes == 0 {
			sv.finish(outcome{res: sv.res})
		}
	}
}

func (sv *server) putWeights(ctx actor.Context, v int) {
	sv.putting = v
	sv.live[v] = true
	ctx.Request(sv.store, &messages.Put{ObjectId: weightsID(v), Data: encode(sv.weights), TimeoutMs: opTimeout.Milliseconds()})
}

// startRound Reduces the first half of every worker's outstanding
// gradient, and Gets the sum at once: the Get streams the sum from the
// root of the reduce tree while it is being produced, and the Reduce's
// reply says which gradients it holds.
func (sv *server) startRound(ctx actor.Context) {
	sv.tr = time.Now()
	sv.reply, sv.sumData = nil, nil
	sources := make([]string, sv.s.workers)
	sv.owner = map[string]int{}
	for i := range sources {
		sources[i] = gradID(i, sv.next[i])
		sv.owner[sources[i]] = i
	}
	ctx.Request(sv.store, &messages.Reduce{TargetId: sumID(sv.round), SourceIds: sources,
		NumObjects: int32(sv.s.contributors()), Op: messages.ReduceOp_SUM, Dtype: messages.DType_FLOAT32,
		TimeoutMs: opTimeout.Milliseconds()})
	ctx.Request(sv.store, &messages.Get{ObjectId: sumID(sv.round), ReadOnly: true, TimeoutMs: opTimeout.Milliseconds()})
}

// update applies the reduced sum and Puts the new weights.
func (sv *server) update(ctx actor.Context) {
	p, m, data := sv.s.params(), sv.s.contributors(), sv.sumData
	if len(data) != 4*(p+extras) {
		sv.fail(fmt.Errorf("%s has %d bytes, want %d", sumID(sv.round), len(data), 4*(p+extras)))
		return
	}
	sv.sum = decodeInto(sv.sum, data)
	if n := sv.sum[p+extraCount]; n != float32(m) || len(sv.reply.GetReducedIds()) != m {
		sv.fail(fmt.Errorf("round %d: %v gradients summed, %d reported reduced, want %d", sv.round, n, len(sv.reply.GetReducedIds()), m))
		return
	}
	if sv.s.observe != nil {
		sv.old = slices.Clone(sv.weights)
	}
	step := float32(sv.s.lr / float64(m))
	for j, g := range sv.sum[:p] {
		sv.weights[j] -= step * g
	}
	sv.res.stats = append(sv.res.stats, roundStat{
		loss:      float64(sv.sum[p+extraLoss]) / float64(m),
		staleness: float64(sv.round) - float64(sv.sum[p+extraVersion])/float64(m),
	})
	sv.putWeights(ctx, sv.round+1)
}

// finishRound runs once the new weights are Put: the contributors go on,
// and what nobody needs any more is deleted.
func (sv *server) finishRound(ctx actor.Context) {
	v, reduced := sv.round+1, sv.reply.GetReducedIds()
	sv.res.stats[sv.round].took = time.Since(sv.tr)
	sv.res.samples += len(reduced) * sv.s.batch
	sv.res.shape = sv.reply.GetPlan().GetShape()
	if sv.s.observe != nil {
		rec := roundRecord{round: sv.round, reduced: reduced, unreduced: sv.reply.GetUnreducedIds(),
			old: sv.old, updated: slices.Clone(sv.weights), sum: slices.Clone(sv.sum), plan: sv.reply.GetPlan()}
		if err := sv.s.observe(sv.l, rec); err != nil {
			sv.fail(fmt.Errorf("round %d: %w", sv.round, err))
			return
		}
	}
	for _, id := range reduced {
		i, ok := sv.owner[id]
		if !ok {
			sv.fail(fmt.Errorf("round %d: reduced %q, which is not a source", sv.round, id))
			return
		}
		sv.next[i]++
		sv.uses[i] = v
		ctx.Send(sv.workers[i], assign{version: v})
	}
	// Memory stays bounded: the reduced gradients and the sum are done
	// with, and a weights version goes once no worker computes on it.
	del := append(slices.Clone(reduced), sumID(sv.round))
	for old := range sv.live {
		if old != v && !slices.Contains(sv.uses, old) {
			delete(sv.live, old)
			del = append(del, weightsID(old))
		}
	}
	for _, id := range del {
		sv.deletes++
		ctx.Request(sv.store, &messages.Delete{ObjectId: id, TimeoutMs: opTimeout.Milliseconds()})
	}
	sv.round++
	if sv.round < sv.s.rounds {
		sv.startRound(ctx)
		return
	}
	sv.over = true
	sv.res.elapsed = time.Since(sv.t0)
	sv.res.weights = slices.Clone(sv.weights)
}

// train runs one training on a fresh embedded cluster: Hoplite's
// collectives, or the naive baseline.
func train(ctx context.Context, s setup, naive bool, log *logrus.Logger) (result, error) {
	if err := ctx.Err(); err != nil {
		return result{}, fmt.Errorf("training not started: %w", err)
	}
	cfg := cluster.Config{Nodes: s.workers + 1, LinkBandwidth: s.linkBps, ChunkSize: s.chunk, DefaultTimeout: opTimeout, Log: log}
	experiments.In(&cfg).Naive = naive
	l, err := cluster.StartLocal(cfg)
	if err != nil {
		return result{}, err
	}
	defer l.Stop()
	done := make(chan outcome, 1)
	pid := l.System().Root.Spawn(actor.PropsFromProducer(func() actor.Actor {
		return &server{s: s, l: l, store: l.StoreNode(0), done: done}
	}))
	// Stop the server and its workers first: nothing runs after train.
	defer func() { _ = l.System().Root.StopFuture(pid).Wait() }()
	select {
	case o := <-done:
		return o.res, o.err
	case <-ctx.Done():
		return result{}, fmt.Errorf("training did not finish: %w", ctx.Err())
	}
}

// comparison is ours and naive, each over reps runs.
type comparison struct {
	ours, naive []result
}

func total(rs []result) (samples int, elapsed time.Duration) {
	for _, r := range rs {
		samples += r.samples
		elapsed += r.elapsed
	}
	return samples, elapsed
}

func rate(rs []result) float64 {
	n, d := total(rs)
	return float64(n) / d.Seconds()
}

// compare trains reps times with each, alternating, so that noise from
// the shared machine hits both alike.
func compare(ctx context.Context, s setup, reps int, log *logrus.Logger) (comparison, error) {
	var c comparison
	for range reps {
		r, err := train(ctx, s, false, log)
		if err != nil {
			return c, fmt.Errorf("ours: %w", err)
		}
		c.ours = append(c.ours, r)
		if r, err = train(ctx, s, true, log); err != nil {
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

// run trains with both and prints the rounds, a summary and the RESULT line.
func run(ctx context.Context, out io.Writer, s setup, reps int, log *logrus.Logger) (comparison, error) {
	if err := s.validate(); err != nil {
		return comparison{}, err
	}
	fmt.Fprintf(out, "asynchronous SGD (thesis §2.4.2): parameter server on node-0, %d workers on node-1..node-%d\n", s.workers, s.workers)
	fmt.Fprintf(out, "model %.2f MiB (%dx%d float32), batch %d samples, lr %g, link %s per node, compute %v..%v per batch\n",
		float64(s.modelBytes())/(1<<20), s.outputs, s.features, s.batch, s.lr, mbps(s.linkBps),
		time.Duration(float64(s.compute)*0.75).Round(time.Millisecond), time.Duration(float64(s.compute)*1.25*s.speed(s.workers-1)).Round(time.Millisecond))
	fmt.Fprintf(out, "each round: Reduce the first %d of the %d outstanding gradients, Put the new weights; the %d contributors Get them\n\n",
		s.contributors(), s.workers, s.contributors())
	c, err := compare(ctx, s, reps, log)
	if err != nil {
		return c, err
	}
	o, n := c.ours[0], c.naive[0]
	fmt.Fprintf(out, "round   ours: loss  stale     ms   naive: loss  stale     ms\n")
	for r := range s.rounds {
		a, b := o.stats[r], n.stats[r]
		fmt.Fprintf(out, "%5d  %11.4f  %5.2f  %5d  %12.4f  %5.2f  %5d\n", r+1,
			a.loss, a.staleness, a.took.Milliseconds(), b.loss, b.staleness, b.took.Milliseconds())
	}
	fmt.Fprintf(out, "\nmode    reduce         runs  samples  seconds  samples/s  loss first -> last\n")
	for _, row := range []struct {
		name string
		rs   []result
	}{{"ours", c.ours}, {"naive", c.naive}} {
		samples, elapsed := total(row.rs)
		st := row.rs[0].stats
		fmt.Fprintf(out, "%-6s  %-13s  %4d  %7d  %7.2f  %9.1f  %.4f -> %.4f\n", row.name, row.rs[0].shape, len(row.rs),
			samples, elapsed.Seconds(), rate(row.rs), st[0].loss, st[len(st)-1].loss)
	}
	fmt.Fprintf(out, "RESULT example=paramserver ours=%.1f samples/s naive=%.1f samples/s ratio=%.2f\n",
		rate(c.ours), rate(c.naive), rate(c.ours)/rate(c.naive))
	return c, nil
}

func main() {
	s := defaultSetup()
	workers := flag.Int("workers", s.workers, "workers, one per node (the server is on one more node)")
	modelMiB := flag.Float64("model-mib", 4, "weights size in MiB (float32)")
	flag.IntVar(&s.features, "features", s.features, "input dimension of the linear model")
	flag.IntVar(&s.active, "active", s.active, "non-zero features per sample")
	flag.IntVar(&s.batch, "batch", s.batch, "samples per gradient")
	flag.IntVar(&s.rounds, "rounds", s.rounds, "server updates per run")
	flag.DurationVar(&s.compute, "compute", s.compute, "injected compute time per batch on the fastest worker (the slowest takes 3x)")
	flag.Float64Var(&s.lr, "lr", s.lr, "learning rate")
	linkMbps := flag.Float64("link-mbps", 1000, "emulated per-node link in Mbit/s, up and down (0: memory speed)")
	chunkKiB := flag.Int("chunk-kib", 1024, "transfer chunk size in KiB")
	reps := flag.Int("reps", 1, "runs of each, alternating")
	timeout := flag.Duration("timeout", 10*time.Minute, "give up after this long")
	verbose := flag.Bool("v", false, "log at debug level")
	flag.Parse()
	s.workers, s.linkBps, s.chunk = *workers, *linkMbps*1e6/8, *chunkKiB<<10
	s.outputs = max(1, int(*modelMiB*(1<<20))/4/max(1, s.features))
	log := logrus.New()
	log.SetLevel(logrus.WarnLevel)
	if *verbose {
		log.SetLevel(logrus.DebugLevel)
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	if _, err := run(ctx, os.Stdout, s, max(1, *reps), log); err != nil {
		fmt.Fprintln(os.Stderr, "paramserver:", strings.TrimSpace(err.Error()))
		os.Exit(1)
	}
}
