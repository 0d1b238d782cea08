package sim

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/reduction"
	"github.com/hoplite-go/hoplite/internal/reduction/plan"
	"github.com/hoplite-go/hoplite/messages"
)

// Scenarios the simulator runs.
var Scenarios = []string{"broadcast", "reduce", "allreduce", "async", "notice", "barrier"}

// Config is one simulated run.
type Config struct {
	Scenario string
	Params
	// Size is S, the object size in bytes (not used by notice and barrier).
	Size int64
	// Num is a reduce's n of m = N sources (0: all).
	Num int
	// Degree, if > 0, is the reduce tree's degree instead of the cost
	// model's (the reduce-degree experiment, internal/experiments); Shape
	// an AllReduce's (the allreduce-shape experiment: "" the cost model's
	// choice, cluster.ShapeSliced or cluster.ShapeDAry).
	Degree int
	Shape  string
	// Kill is how many hosts fail, KillAt when: a fraction of the
	// failure-free run's time (the simulator runs that first).
	Kill   int
	KillAt float64
	// KillHosts are hosts (by index) killed at KillAt besides Kill's.
	KillHosts []int
	// Pause is how many hosts stop for PauseFor at PauseAt of the
	// failure-free time: their queues and CPU take nothing in meanwhile
	// (a process stopped or descheduled); bytes already sent still land.
	Pause    int
	PauseAt  float64
	PauseFor time.Duration
	// Interval is the async scenario's time between two sources' Puts
	// (0: S/(4B), as hoplite bench's default).
	Interval time.Duration
	// Trace, if set, is told each step of a broadcast's Gets and of a
	// Reduce (its locations, tasks, registrations, first and last bytes,
	// reports, commit and answer) at its virtual time: where a run's time
	// goes, to set beside a testbed's timelines.
	Trace func(at time.Duration, host, step string)
}

// Outcome is what one run measured, and the invariants it broke.
type Outcome struct {
	Scenario string `json:"scenario"`
	Nodes    int    `json:"nodes"`
	Size     int64  `json:"size"`
	Seed     uint64 `json:"seed"`
	// Time is the operation's time: the last Get's end (broadcast), the
	// reply at the caller (reduce, allreduce), the last live host's
	// delivery of the notice (notice), the last release (barrier).
	Time time.Duration `json:"time_ns"`
	// FailureFree is the same run's time without the kill or pause (0:
	// none).
	FailureFree time.Duration `json:"failure_free_ns,omitempty"`
	KilledAt    time.Duration `json:"killed_at_ns,omitempty"`
	Killed      []string      `json:"killed,omitempty"`
	Paused      []string      `json:"paused,omitempty"`
	// LastPut is when the async scenario's last source was Put (its
	// Time counts from there, as hoplite bench's async does).
	LastPut  time.Duration `json:"last_put_ns,omitempty"`
	Interval time.Duration `json:"interval_ns,omitempty"`
	// Depth is the broadcast tree's depth (hops from the creator to the
	// farthest receiver), or the most hops a notice took.
	Depth int `json:"depth"`
	// MaxUpload is the most bytes one host's uplink carried for streams
	// (broadcast): a sender's share of the tree.
	MaxUpload int64 `json:"max_upload,omitempty"`
	// Chunk is the largest chunk a stream moved over a link: the one
	// chosen for the tree's depth (a broadcast's by its shard, a
	// Reduce's by its coordinator), or the world's.
	Chunk int64 `json:"chunk,omitempty"`
	// Degree is the reduce tree's degree the cost model chose, Root the
	// host whose root the coordinator last committed.
	Degree int    `json:"degree,omitempty"`
	Root   string `json:"root,omitempty"`
	// Shape is the Reduce's plan's shape (an AllReduce's sliced or not).
	Shape string `json:"shape,omitempty"`
	// RingGather: a sliced AllReduce's all-gather went around the ring
	// (every participant a host of its own).
	RingGather bool `json:"ring_gather,omitempty"`
	// ShardQueue and CoordQueue are the longest a message waited at a
	// directory shard and at a coordinator: a hot one queues.
	ShardQueue time.Duration `json:"shard_queue_ns"`
	CoordQueue time.Duration `json:"coord_queue_ns"`
	// HotShard is the most messages one shard processed (its table's,
	// and the Locates its published inline objects answered),
	// QuickLocates how many Locates all shards' published objects
	// answered without their tables, ShardMoves how many shards moved to
	// a new home (their host died).
	HotShard     int64 `json:"hot_shard_messages"`
	QuickLocates int64 `json:"quick_locates,omitempty"`
	ShardMoves   int   `json:"shard_moves,omitempty"`
	// DeputyBatches is how many batches of Locates deputies sent their
	// shards' homes (Params.Deputies).
	DeputyBatches int64 `json:"deputy_batches,omitempty"`
	// Attempts is how many times the caller started its Reduce (again
	// at the target shard's new home when its member died).
	Attempts int   `json:"attempts,omitempty"`
	Messages int64 `json:"messages"`
	// CPU is what the hosts' processing cost in all (every message sent
	// and taken in, every chunk taken in), to set beside the testbed's
	// CPU per operation.
	CPU    time.Duration `json:"cpu_ns"`
	Events int64         `json:"events"`
	// MaxQueue is the most events pending at once.
	MaxQueue int `json:"max_queue"`
	// Error is the code of a typed error the operation answered with
	// where that is the true answer (an AllReduce whose result's only
	// whole copy died: LOST); empty for success.
	Error      string   `json:"error,omitempty"`
	Violations []string `json:"violations,omitempty"`
}

// Run simulates one configuration. With Kill > 0 it first runs the same
// seed failure-free to place the kill.
func Run(c Config) (*Outcome, error) { return RunContext(context.Background(), c) }

// RunContext is Run, which ends with ctx's error as soon as ctx is done
// (a run at 1,024 hosts can take minutes of wall time).
func RunContext(ctx context.Context, c Config) (*Outcome, error) {
	if c.N < 2 {
		return nil, fmt.Errorf("sim: %d hosts: need at least 2", c.N)
	}
	if c.Shards < 1 {
		// Every object id hashes to one of them.
		return nil, fmt.Errorf("sim: %d directory shards: need at least 1", c.Shards)
	}
	for _, i := range c.KillHosts {
		if i <= 0 || i >= c.N {
			return nil, fmt.Errorf("sim: kill host %d: want 1..%d (host 0 is the creator or caller)", i, c.N-1)
		}
	}
	if c.Kill >= c.N-1 {
		return nil, fmt.Errorf("sim: kill %d of %d hosts: at most %d", c.Kill, c.N, c.N-2)
	}
	if c.Scenario != "notice" && c.Scenario != "barrier" && c.Size <= 0 {
		return nil, fmt.Errorf("sim: %s needs a size", c.Scenario)
	}
	if (c.Scenario == "reduce" || c.Scenario == "allreduce" || c.Scenario == "async") && c.Size < InlineLimit {
		// Its sources would be inline: the coordinator reduces their
		// bytes itself and the caller's node stores the result, a path
		// the simulator does not drive.
		return nil, fmt.Errorf("sim: %s of objects under %d bytes (inline sources) is not simulated", c.Scenario, InlineLimit)
	}
	if (c.Scenario == "barrier" && (c.Kill > 0 || c.Pause > 0)) || (c.Scenario == "notice" && c.Pause > 0) {
		return nil, fmt.Errorf("sim: %s with --kill or --pause is not simulated", c.Scenario)
	}
	if c.Scenario == "async" && c.Kill > 0 {
		// Its sources register after the kill, some at shards on dead
		// hosts, and a shard's move to a new home is not simulated.
		return nil, fmt.Errorf("sim: async with --kill is not simulated (a dead host's directory shards do not move)")
	}
	if c.Pause >= c.N-1 {
		return nil, fmt.Errorf("sim: pause %d of %d hosts: at most %d", c.Pause, c.N, c.N-2)
	}
	var free time.Duration
	if (c.Kill > 0 || len(c.KillHosts) > 0 || c.Pause > 0) && c.Scenario != "notice" {
		cc := c
		cc.Kill, cc.KillHosts, cc.Pause = 0, nil, 0
		o, err := RunContext(ctx, cc)
		if err != nil {
			return nil, err
		}
		free = o.Time
	}
	w := newWorld(c.Params)
	w.eng.done = ctx.Done()
	w.trace = c.Trace
	if err := w.overlays(); err != nil {
		return nil, err
	}
	w.chunk = int64(plan.ChunkForObject(w.payload, c.Size))
	if c.Chunk > 0 {
		w.chunk, w.fixedChunk = c.Chunk, true
	}
	out := &Outcome{Scenario: c.Scenario, Nodes: c.N, Size: c.Size, Seed: c.Seed, FailureFree: free}
	var err error
	switch c.Scenario {
	case "broadcast":
		err = w.broadcast(c, out)
	case "reduce", "allreduce", "async":
		err = w.reduce(c, out)
	case "notice":
		err = w.notice(c, out)
	case "barrier":
		err = w.barrier(c, out)
	default:
		err = fmt.Errorf("sim: unknown scenario %q (want one of %v)", c.Scenario, Scenarios)
	}
	if ctx.Err() != nil {
		return nil, fmt.Errorf("sim: %s of %d hosts stopped at %v of virtual time: %w", c.Scenario, c.N, w.eng.now, ctx.Err())
	}
	if err != nil {
		return nil, err
	}
	out.ShardQueue, out.CoordQueue = w.queueWait[qShard], w.queueWait[qCoord]
	for _, s := range w.shards {
		out.HotShard = max(out.HotShard, s.served)
		out.QuickLocates += s.quick
		out.ShardMoves += s.moves
	}
	out.DeputyBatches = w.deputyBatches
	out.Messages, out.Events, out.MaxQueue, out.CPU = w.msgs, w.eng.steps, w.eng.maxQueue, w.busy
	out.Violations = append(out.Violations, w.violations...)
	return out, nil
}

// victims picks k hosts to kill: never host 0 (the creator or caller)
// nor a host that runs a directory shard of ids.
func (w *world) victims(k int, ids ...string) []*host {
	spare := map[*host]bool{w.hosts[0]: true}
	for _, id := range ids {
		spare[w.shardHost(w.shardFor(id))] = true
	}
	var pool []*host
	for _, h := range w.hosts {
		if !spare[h] {
			pool = append(pool, h)
		}
	}
	var out []*host
	for _, i := range w.rng.Perm(len(pool))[:min(k, len(pool))] {
		out = append(out, pool[i])
	}
	slices.SortFunc(out, func(a, b *host) int { return a.idx - b.idx })
	return out
}

func (w *world) scheduleKill(c Config, out *Outcome, ids ...string) {
	if c.Pause > 0 {
		at := time.Duration(float64(out.FailureFree) * c.PauseAt)
		for _, v := range w.victims(c.Pause, ids...) {
			out.Paused = append(out.Paused, v.name)
			w.eng.at(at, func() { w.pause(v, c.PauseFor) })
		}
	}
	if c.Kill <= 0 && len(c.KillHosts) == 0 {
		return
	}
	vs := w.victims(c.Kill, ids...)
	for _, i := range c.KillHosts {
		if v := w.hosts[i]; !slices.Contains(vs, v) {
			vs = append(vs, v)
		}
	}
	at := time.Duration(float64(out.FailureFree) * c.KillAt)
	out.KilledAt = at
	for _, v := range vs {
		out.Killed = append(out.Killed, v.name)
		w.eng.at(at, func() { w.kill(v) })
	}
}

// put makes id, of size bytes and checksum sum, a whole creator copy on
// h registered at its shard, before time starts (the scenarios time
// collectives of objects that exist, as the testbed does).
func (w *world) put(h *host, id string, size int64, sum uint64) error {
	if err := w.storeWhole(h, id, size, sum); err != nil {
		return err
	}
	o := h.obj(id)
	o.size, o.written, o.sum, o.complete = size, size, sum, true
	s := w.shardFor(id)
	create := &messages.CreateObject{ObjectId: id, Size: size, Fingerprint: sum, Creator: h.ref}
	if size < InlineLimit {
		// The Put hands the shard the bytes: Gets are answered with them.
		create.HasInline, create.InlineData = true, inlineBytes(sum, size)
	}
	s.t.Step(w.now(), directory.Create{Req: create})
	s.t.Step(w.now(), &messages.PublishLocation{ObjectId: id, Node: h.ref, State: messages.LocationState_COMPLETE, Size: size, Fingerprint: sum, Creator: true})
	return nil
}

// storeWhole makes id a whole copy in h's store, as a finished Put
// leaves it (its bytes counted, not written).
func (w *world) storeWhole(h *host, id string, size int64, sum uint64) error {
	o, _, err := h.store.Create(id, size, sum)
	if err != nil {
		return err
	}
	if err := o.NewWriter().Advance(int(size)); err != nil {
		return err
	}
	return h.store.Complete(o)
}

// putLater makes id a whole copy on h now and registers it with its
// shard by messages, as a Put does: the shard tells the Reduces that
// wait for it.
func (w *world) putLater(h *host, id string, size int64, sum uint64) {
	if !h.alive {
		return // a host that died before its Put never makes the source
	}
	if err := w.storeWhole(h, id, size, sum); err != nil {
		w.violate("put %s on %s: %v", id, h.name, err)
		return
	}
	o := h.obj(id)
	o.size, o.written, o.sum, o.complete = size, size, sum, true
	w.toShard(h, directory.ShardOf(id), &messages.CreateObject{ObjectId: id, Size: size, Fingerprint: sum, Creator: h.ref}, nil)
	w.toShard(h, directory.ShardOf(id), &messages.PublishLocation{ObjectId: id, Node: h.ref, State: messages.LocationState_COMPLETE,
		Size: size, Fingerprint: sum, Creator: true}, nil)
}

func (w *world) broadcast(c Config, out *Outcome) error {
	if c.Stripes > 1 {
		return w.stripedBroadcast(c, out)
	}
	const id = "object"
	sum := w.rng.Uint64()
	if err := w.put(w.hosts[0], id, c.Size, sum); err != nil {
		return err
	}
	w.scheduleKill(c, out) // the object's shard may die: it moves
	var gets []*fetchSession
	for _, h := range w.hosts[1:] {
		gets = append(gets, w.get(h, id, func(*fetchSession) {}))
	}
	w.eng.run(c.Timeout+time.Minute, nil)
	depth := map[*host]int{w.hosts[0]: 0}
	for _, fs := range gets {
		if !fs.h.alive {
			continue
		}
		switch {
		case !fs.done:
			w.violate("Get on %s never ended", fs.h.name)
		case fs.err != nil:
			w.violate("Get on %s failed: %v", fs.h.name, fs.err)
		case fs.sum != sum:
			w.violate("Get on %s ended with checksum %x, want %x", fs.h.name, fs.sum, sum)
		default:
			out.Time = max(out.Time, fs.ended)
		}
	}
	// The tree: every receiver's last sender. Walking up from each must
	// reach the creator without meeting a host twice.
	parent := map[*host]*host{}
	for _, fs := range gets {
		if fs.done && fs.err == nil && fs.sender != nil {
			parent[fs.h] = fs.sender
		}
	}
	var walk func(h *host, seen int) int
	walk = func(h *host, seen int) int {
		if d, ok := depth[h]; ok {
			return d
		}
		if seen > len(w.hosts) {
			w.violate("the broadcast tree has a cycle through %s", h.name)
			return 0
		}
		p := parent[h]
		if p == nil {
			return 0
		}
		d := walk(p, seen+1) + 1
		depth[h] = d
		return d
	}
	for _, fs := range gets {
		out.Depth = max(out.Depth, walk(fs.h, 0))
	}
	for _, h := range w.hosts {
		out.MaxUpload = max(out.MaxUpload, h.sent)
	}
	out.Chunk = w.maxChunk
	return nil
}

func (w *world) reduce(c Config, out *Outcome) error {
	all := c.Scenario == "allreduce"
	async := c.Scenario == "async"
	sources := make([]string, c.N)
	sums := map[string]uint64{}
	interval := c.Interval
	if interval <= 0 {
		interval = time.Duration(float64(c.Size) / (4 * w.payload) * float64(time.Second))
	}
	for i, h := range w.hosts {
		sources[i] = fmt.Sprintf("s%04d", i)
		sums[sources[i]] = w.rng.Uint64()
		if async {
			out.Interval = interval
			// The Reduce is called first; source i is Put at i·interval.
			id, at := sources[i], time.Duration(i)*interval
			out.LastPut = max(out.LastPut, at)
			w.eng.at(at, func() { w.putLater(h, id, c.Size, sums[id]) })
			continue
		}
		if err := w.put(h, sources[i], c.Size, sums[sources[i]]); err != nil {
			return err
		}
	}
	num := c.Num
	if num <= 0 || num > c.N {
		num = c.N
		if killed := c.Kill + len(c.KillHosts); killed > 0 && !all {
			num = c.N - killed // n of m: as many as can survive
		}
	}
	const target = "target"
	// The deadline counts from the last Put (async), as the caller's
	// would who called the Reduce expecting its sources over that time.
	timeout := out.LastPut + c.Timeout
	req := &messages.Reduce{TargetId: target, SourceIds: sources, NumObjects: int32(num), Op: messages.ReduceOp_SUM,
		Dtype: messages.DType_FLOAT32, TimeoutMs: timeout.Milliseconds(), AllReduce: all}
	// The members pace a sliced AllReduce's streams (the links' max-min
	// fair shares model that), and know their link's shaper (-link-rate,
	// -link-burst), as the testbed's do.
	cfg := reduction.Config{InlineLimit: 64 << 10, ForceDegree: c.Degree, AllReduceShape: c.Shape, Paced: true, ListRingTasks: w.p.ListRingTasks,
		Shaper: plan.Shaper{Rate: w.p.Bandwidth / 8 * w.p.PayloadEfficiency, Burst: w.p.Burst}}
	if async {
		w.scheduleKill(c, out, target) // pauses only: see Run
	} else {
		w.scheduleKill(c, out) // the target's shard may die: the caller starts the Reduce again
	}
	call := w.startReduce(w.hosts[0], req, cfg)
	w.eng.run(timeout+time.Minute, func() bool { return call.reply != nil })
	red := call.cur
	out.Attempts = len(call.attempts)
	if call.reply != nil {
		// Let the messages the answer raced (the root's commit) land.
		w.eng.run(w.eng.now+time.Second, nil)
	}
	dead := map[string]bool{}
	for _, k := range out.Killed {
		dead[k] = true
	}
	if red.commitTo != nil {
		out.Root = red.commitTo.name
	}
	switch err := call.reply.GetError(); {
	case call.reply == nil:
		w.violate("the Reduce never answered")
		return nil
	case err != nil && all && err.GetCode() == messages.ErrorCode_LOST && red.commitTo != nil && dead[red.commitTo.name]:
		// The root the coordinator committed held the result's only
		// whole copy and died before a participant had all of it: LOST
		// is the true answer.
		out.Time, out.Error = call.replyAt, err.GetCode().String()
		return nil
	case err != nil:
		w.violate("the Reduce failed: %v", err)
		return nil
	}
	out.Time = call.replyAt - out.LastPut
	if p := call.reply.GetPlan(); p != nil {
		out.Degree, out.Shape, out.RingGather = int(p.GetDegree()), p.GetShape(), p.GetRingGather()
	}
	out.Chunk = w.maxChunk
	ids := call.reply.GetReducedIds()
	var want uint64
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] {
			w.violate("source %s reduced twice", id)
		}
		seen[id] = true
		want += sums[id]
	}
	if len(seen) != num && !(all && len(seen) == num-len(out.Killed)) {
		// An AllReduce of every source goes on without the dead ones.
		w.violate("%d distinct sources reduced, want %d", len(seen), num)
	}
	root := red.root
	for _, a := range call.attempts {
		if root == nil && a.root != nil && a.commitAt > 0 {
			// Answered with an earlier attempt's committed result (its
			// coordinator died before it answered).
			root = a.root
			if out.Root == "" {
				out.Root = root.h.name
			}
		}
	}
	switch {
	case root == nil:
		w.violate("no root committed")
	case root.out.sum != want:
		w.violate("the target holds checksum %x, the reduced sources sum to %x", root.out.sum, want)
	case dead[root.h.name] && out.KilledAt < red.commitAt:
		w.violate("the committed root %s is dead", root.h.name)
	}
	// No live worker may still wait on a dead host once every live host
	// knows of its failure.
	var workers []*worker
	for _, a := range call.attempts {
		workers = append(workers, a.workers...)
	}
	for _, wk := range workers {
		for _, k := range out.Killed {
			if wk.h.alive && wk.waitsOn(w.byName[k]) {
				w.violate("p%d on %s still waits on dead %s", wk.t.GetPosition(), wk.h.name, k)
			}
		}
	}
	if all && root != nil {
		for _, h := range w.hosts {
			if o := h.objs[target]; h.alive && o != nil && o.complete && o.sum != want {
				w.violate("%s holds the result with checksum %x, want %x", h.name, o.sum, want)
			}
		}
	}
	return nil
}

func (w *world) notice(c Config, out *Outcome) error {
	k := max(c.Kill, 1)
	vs := w.victims(k)
	w.oneDetector = true
	for _, v := range vs {
		out.Killed = append(out.Killed, v.name)
		w.kill(v)
	}
	w.eng.run(c.Timeout, nil)
	for _, h := range w.hosts {
		if !h.alive {
			continue
		}
		if h.noticed == 0 {
			w.violate("the notice never reached %s", h.name)
			continue
		}
		out.Time = max(out.Time, h.noticed)
		out.Depth = max(out.Depth, h.hops)
	}
	return nil
}
