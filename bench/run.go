package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/internal/reduction"
)

// Options configure a benchmark run. Zero fields take the defaults.
type Options struct {
	// Scenario is one of Scenarios.
	Scenario string
	// Nodes is N, the hosts (default 8).
	Nodes int
	// Sizes are the object sizes S (default 32 MiB).
	Sizes []int64
	// Bandwidth is B, each host's up and down link (default 400 Mbit/s).
	Bandwidth Bandwidth
	// Peers are the systems compared with ours: naive, mpi, dask, gloo.
	Peers []string
	// Reps are the measured repetitions per system and size (default 3).
	Reps int
	// Warmup repetitions run first and are not recorded (ours's systems:
	// once per cluster; a peer's script runs its own warm-up in every
	// launch). Unless it is 0, in interleaved rounds each measured rep of
	// ours's systems also follows one unrecorded rep of its own, as a
	// peer launch's timed rep follows the launch's warm-up.
	Warmup int
	// Sequential runs each system's repetitions back to back, one system
	// after another, ours's systems first and then each peer in one launch
	// of Reps repetitions: the order before runs were interleaved. By
	// default a comparison's repetitions are interleaved across its
	// systems (see runRounds), so that drift in the machine's load falls
	// on every system alike. Profile implies it.
	Sequential bool
	// Fresh gives ours's systems a new cluster for every measured
	// repetition (its Warmup warm-ups, if any, on that cluster first), so
	// that what the first operations on a cluster cost is measured
	// rather than hidden in a warm-up. The failure scenario always does.
	Fresh bool
	// Load starts this many CPU-bound processes beside the cluster for
	// the whole run (hoplite bench --load): the busy machine as a result
	// of its own. Each stops by itself after LoadFor (default
	// DefaultLoadFor), when the run ends, or with the run's process.
	Load    int
	LoadFor time.Duration
	// LoadCommand is what a load process runs (default: this executable,
	// `bench load-spin`); `--for D` is added.
	LoadCommand []string
	// Intervals are async's arrival intervals (default S/(4B)).
	Intervals []time.Duration
	// Degrees are forced reduce tree degrees compared with the chosen one
	// (DegreeN stands for N, DegreeChainLeaf for the chain-leaf shape);
	// the degree scenario defaults to 1, 2, N and chain-leaf. In the
	// failure scenario each forced one is measured at both ends, as the
	// chosen one is: failure-free ("d=2") and with host 1 killed at 50 %
	// of its own failure-free median ("d=2-failure"), in failure-reduce
	// only (a broadcast has no reduce tree).
	Degrees []int
	// ChunkSize is Hoplite's transfer chunk; 0 adapts it to the measured
	// bandwidth (storeactor.Config.ChunkSize).
	ChunkSize int
	// NodeProcs is GOMAXPROCS for each testbed node: 0 gives each its
	// share of this machine's CPUs (NumCPU / Nodes, at least 1), as a
	// host with that many cores would have; NodeProcsGo leaves Go's
	// default (every CPU of the machine). See nodeProcs.
	NodeProcs int
	// OpTimeout bounds each operation (default: 30 s plus 20 S/B).
	OpTimeout time.Duration
	// Command is the command line, recorded in the report.
	Command []string
	// Progress receives the progress bar; ProgressTTY redraws it in place.
	Progress    io.Writer
	ProgressTTY bool
	// Log receives Hoplite's own logs (default: discarded) at LogLevel
	// (default: errors only).
	Log      io.Writer
	LogLevel logrus.Level
	// Testbed, if set, runs on the testbed's hosts instead of in process.
	Testbed *Testbed
	// TLS adds the system ours-tls: ours with every node over mutual TLS
	// (certificates made for the run), its repetitions interleaved with
	// ours's. Testbed only: the in-process cluster has no TLS.
	TLS bool
	// Profile, if set, is a directory for Go profiles of ours's testbed
	// nodes during its measured repetitions (see profile.go): CPU,
	// allocations, mutex and block over a window of ProfileSeconds
	// (default 10, at most MaxProfileSeconds), and the heap after it.
	// Testbed only; not with TLS or the failure scenario.
	Profile        string
	ProfileSeconds int

	// newBackend replaces the embedded cluster (tests).
	newBackend func(o *Options, s system, log *logrus.Logger) (backend, error)
	// profileFetch replaces the HTTP fetch of a profile (tests).
	profileFetch func(ctx context.Context, url, path string) error
	// loadAvg replaces the reading of the machine's load average (tests).
	loadAvg func() (float64, bool)
}

func (o *Options) withDefaults() (*Options, error) {
	c := *o
	if !slices.Contains(Scenarios, c.Scenario) {
		return nil, fmt.Errorf("unknown scenario %q (one of %s)", c.Scenario, strings.Join(Scenarios, ", "))
	}
	if c.Nodes == 0 {
		c.Nodes = 8
	}
	if c.Nodes < 2 {
		return nil, fmt.Errorf("--nodes %d: need at least 2", c.Nodes)
	}
	if c.Scenario == "failure" && c.Nodes < 3 {
		return nil, fmt.Errorf("--nodes %d: the failure scenario needs at least 3 (one is killed)", c.Nodes)
	}
	if len(c.Sizes) == 0 {
		c.Sizes = []int64{32 << 20}
	}
	for _, s := range c.Sizes {
		if s < 4 || s%4 != 0 {
			return nil, fmt.Errorf("size %d: want a positive multiple of 4 bytes (float32 elements)", s)
		}
	}
	if c.Bandwidth.BitsPerSecond == 0 {
		c.Bandwidth = Bandwidth{BitsPerSecond: 400e6}
	}
	if err := CheckPeers(c.Peers); err != nil {
		return nil, err
	}
	if c.TLS && c.Testbed == nil {
		return nil, errors.New("--tls needs --testbed: the in-process cluster runs without TLS")
	}
	if c.TLS && c.Scenario == "failure" {
		return nil, errors.New("--tls is not for the failure scenario")
	}
	if c.Profile != "" {
		switch {
		case c.Testbed == nil:
			return nil, errors.New("--profile needs --testbed: it profiles the testbed's hoplite node processes")
		case c.TLS:
			return nil, errors.New("--profile is not for --tls runs: ours-tls's reps interleave with ours's window (and its manage ports speak TLS)")
		case c.Scenario == "failure":
			return nil, errors.New("--profile is not for the failure scenario (a fresh cluster per repetition)")
		case c.Fresh:
			return nil, errors.New("--profile is not for --fresh runs (a fresh cluster per repetition)")
		}
		if c.ProfileSeconds == 0 {
			c.ProfileSeconds = defaultProfileSeconds
		}
		if c.ProfileSeconds < 1 || c.ProfileSeconds > MaxProfileSeconds {
			return nil, fmt.Errorf("--profile-seconds %d: want 1..%d", c.ProfileSeconds, MaxProfileSeconds)
		}
	}
	if c.Reps == 0 {
		c.Reps = 3
	}
	if c.Reps < 1 || c.Warmup < 0 {
		return nil, errors.New("need --reps >= 1 and --warmup >= 0")
	}
	if c.Load < 0 || c.Load > maxLoad {
		return nil, fmt.Errorf("--load %d: want 0..%d", c.Load, maxLoad)
	}
	if c.LoadFor == 0 {
		c.LoadFor = DefaultLoadFor
	}
	if c.OpTimeout == 0 {
		c.OpTimeout = 30*time.Second + 20*c.maxIdeal()
	}
	return &c, nil
}

// sequential says whether the run keeps the old order (Options.Sequential):
// a profile's window must hold ours's repetitions alone, so --profile
// does too.
// CheckPeers says which of peers is not a system Run can compare with.
func CheckPeers(peers []string) error {
	for _, p := range peers {
		if p != "naive" && p != "mpi" && p != "dask" && p != "gloo" && p != "actor" && p != "actor-locates" && p != "star-gather" && p != "go-procs" && p != "any-target" && p != "kernel-slack" && p != "data" && p != "no-push" && p != "actor-subscribes" && p != "ui" && p != "cold" && p != "echo" && p != "lazy-free" && p != "small-pages" && p != "huge-pages" && p != "sliced" {
			return fmt.Errorf("unknown peer %q (naive, mpi, dask, gloo, actor, data, echo, actor-locates, star-gather, go-procs, any-target, kernel-slack, no-push, actor-subscribes, ui, cold, lazy-free, small-pages, huge-pages or sliced)", p)
		}
	}
	return nil
}

func (o *Options) sequential() bool { return o.Sequential || o.Profile != "" }

// fresh says whether ours's systems get a new cluster per measured
// repetition: with --fresh, and always in the failure scenario (which
// kills a member).
func (o *Options) fresh() bool { return o.Fresh || o.Scenario == "failure" }

// maxLoad bounds --load: more CPU-bound processes than this measure the
// kernel's scheduler, not a busy machine.
const maxLoad = 64

// Run orders (Report.RunOrder).
const (
	OrderInterleaved = "interleaved"
	OrderSequential  = "sequential"
)

// orderNote is the report's note on the order the repetitions ran in.
func (o *Options) orderNote() string {
	if o.sequential() {
		why := ""
		if !o.Sequential {
			why = " (--profile: its window holds ours's reps alone)"
		}
		return "run order: sequential" + why + ": each system's reps back to back, one system after another" +
			" (with --tls ours and ours-tls alternate), each peer in one launch of --reps " + strconv.Itoa(o.Reps) +
			"; order[] in the JSON gives each time's rep and its sequence number in the run"
	}
	n := "run order: interleaved: per comparison, every system's warm-ups first, then round k runs measured rep k of every system" +
		" (the order rotated by one each round)"
	if o.Scenario == "failure" {
		n += "; the failure variants' rounds after the failure-free ones (their kill is placed at 50 % of that median)"
	}
	if o.Testbed != nil && slices.ContainsFunc(o.systems(), func(s system) bool { return !s.ours() }) {
		n += "; a peer is launched once per measured rep (--reps 1, after its own warm-up in the same launch), " +
			"a best column with the algorithm an unrecorded sweep of --reps " + strconv.Itoa(o.Reps) + " chose before the rounds"
	}
	return n + "; order[] in the JSON gives each time's rep and its sequence number in the run"
}

// warmupNote is the report's note on what the recorded reps followed:
// nothing by default, so that a figure is what a user's first operations
// get.
func (o *Options) warmupNote() string {
	n := "warm-up: none: every recorded rep of ours is an operation as a user's application runs it, on a cluster that ran only the reps before it"
	if o.Warmup > 0 {
		n = fmt.Sprintf("warm-up: %d unrecorded reps on each of ours's clusters before its first recorded rep", o.Warmup)
		if !o.sequential() && !o.fresh() {
			n += ", and one before each recorded rep (in rounds, as a peer launch times its rep after its own warm-up)"
		}
	}
	if o.Fresh {
		n += "; --fresh: ours's systems start a new cluster for every recorded rep (the cluster's start is not timed)"
	}
	if o.Load > 0 {
		n += fmt.Sprintf("; --load %d: %d CPU-bound processes ran beside the cluster for the whole run", o.Load, o.Load)
	}
	return n
}

// maxIdeal is the longest ideal time of the run's groups.
func (o *Options) maxIdeal() time.Duration {
	var m time.Duration
	for _, g := range o.groups() {
		m = max(m, g.ideal(o.Nodes, o.Bandwidth.BytesPerSecond()))
	}
	return m
}

// capacity is each store's size: sources, copies and a reduce's partial
// results of the largest size, with room to spare.
func (o *Options) capacity() int64 {
	return max(1<<30, 4*int64(o.Nodes)*slices.Max(o.Sizes)+256<<20)
}

func (o *Options) mode() string {
	if o.Testbed != nil {
		return "testbed"
	}
	return "in-process"
}

// Run runs the scenario and returns its report. A system that fails is
// reported as failed (with the reason) and the run goes on; Run returns an
// error only for bad options or when the run cannot start at all.
func Run(ctx context.Context, opts Options) (*Report, error) {
	o, err := opts.withDefaults()
	if err != nil {
		return nil, err
	}
	start := time.Now()
	// An interleaved testbed run keeps every node set of ours's systems
	// up at once; one that may not fit runs sequentially instead.
	var memNote string
	if o.Testbed != nil && !o.sequential() && !o.fresh() {
		sets := 0
		for _, s := range o.systems() {
			if s.ours() {
				sets++
			}
		}
		if memNote = memoryFallback(sets, o.Nodes, slices.Max(o.Sizes), memAvailable()); memNote != "" {
			o.Sequential = true
		}
	}
	rep := &Report{Scenario: o.Scenario, Mode: o.mode(), Command: o.Command, Date: start.UTC(), Machine: machine(),
		Nodes: o.Nodes, BandwidthBits: o.Bandwidth.BitsPerSecond, Bandwidth: o.Bandwidth.String(), Reps: o.Reps,
		Warmup: o.Warmup, Fresh: o.Fresh, Sizes: o.Sizes, Peers: o.Peers, RunOrder: OrderInterleaved}
	rep.Load.Procs, rep.Load.CPUs = o.Load, rep.Machine.CPUs
	rep.Load.Start, _ = o.loadNow()
	load, err := startLoad(o.Load, o.LoadFor, o.LoadCommand)
	if err != nil {
		return nil, err
	}
	defer func() { _ = load.stop(context.Background()) }()
	if o.sequential() {
		rep.RunOrder = OrderSequential
	}
	groups, systems := o.groups(), o.systems()
	res := make([][]Result, len(groups))
	for gi, g := range groups {
		for _, s := range systems {
			r := Result{Scenario: g.scenario, Size: g.size, System: s.name, Status: StatusOK,
				Ideal: g.ideal(o.Nodes, o.Bandwidth.BytesPerSecond()).Seconds(), FailureFree: s.free, group: g}
			if s.ours() {
				r.Timing = TimingScheduled // the agents' scheduled start, first start to last end
			}
			if g.hasInt {
				r.Interval = g.interval.Seconds()
			}
			switch {
			case (!s.ours() || s.floor || s.kernelSlack || s.exp.NoWarmUp || s.lazyFree || s.pages != "") && o.Testbed == nil:
				r.Status, r.Reason = StatusSkipped, "needs --testbed"
			case s.floor:
				if why := floorOp(g); why != "" {
					r.Status, r.Reason = StatusSkipped, why
				}
			case s.forced():
				if why := treeOp(g); why != "" {
					r.Status, r.Reason = StatusSkipped, why
				}
			case !s.ours():
				if _, why := peerOp(s.peer, g); why != "" {
					r.Status, r.Reason = StatusSkipped, why
				}
			}
			res[gi] = append(res[gi], r)
		}
	}
	total := 0
	for gi := range groups {
		for si, s := range systems {
			if res[gi][si].ok() {
				switch {
				case s.ours() && o.fresh():
					total += o.Reps * (1 + o.Warmup) // a fresh cluster per repetition
				case s.ours() && (o.Warmup == 0 || o.sequential() && !(o.TLS && (s.name == SysOurs || s.tls))):
					total += o.Reps + o.Warmup
				case s.ours():
					total += 2*o.Reps + o.Warmup // in rounds, a warm-up before each rep
				case o.sequential():
					total++ // one launch of --reps
				case s.alg == "best":
					total += o.Reps + 1 // the sweep, then a launch per rep
				default:
					total += o.Reps
				}
			}
		}
	}
	r := &runner{o: o, groups: groups, systems: systems, res: res, prog: newProgress(o.Progress, o.ProgressTTY, total)}
	if o.Log != nil {
		r.log = logrus.New()
		r.log.SetOutput(o.Log)
		r.log.SetLevel(max(o.LogLevel, logrus.ErrorLevel))
	} else {
		r.log = logrus.New()
		r.log.SetOutput(io.Discard)
	}
	// On stderr too: whoever watches the bar sees which order runs.
	if memNote != "" {
		r.note(memNote)
	}
	if o.Testbed != nil {
		r.note(o.procsNote())
	}
	r.prog.logf("%s", o.orderNote())
	r.prog.logf("%s", o.warmupNote())
	if err := r.run(ctx); err != nil {
		r.prog.close()
		return nil, err
	}
	r.prog.close()
	rep.Load.End, _ = o.loadNow()
	rep.Load.Min, rep.Load.Max, rep.Load.Measured = r.load.Min, r.load.Max, r.load.Measured
	if err := load.stop(ctx); err != nil {
		r.notes = append(r.notes, err.Error())
	}
	for gi := range groups {
		rep.Results = append(rep.Results, res[gi]...)
	}
	rep.ratios()
	rep.Notes = append([]string{o.orderNote(), o.warmupNote()}, r.notes...)
	rep.Seconds = time.Since(start).Seconds()
	return rep, nil
}

// runner carries one run's state.
type runner struct {
	o       *Options
	groups  []group
	systems []system
	res     [][]Result
	times   [][][]time.Duration
	prog    *progress
	log     *logrus.Logger
	notes   []string
	tb      *testbedRun
	// failed counts the failed repetitions per comparison and system; a
	// failure keeps its first error and the other repetitions still run.
	failed   [][]int
	firstErr [][]error
	dead     [][]bool // the system could not start: nothing more to run
	// seq counts the run's steps as they start (every measurement,
	// warm-ups and a profile's fill included, and every peer launch), so
	// that order[] shows where each recorded rep ran.
	seq   int
	order [][][]RepOrder
	// pinned is the algorithm a best peer's sweep chose, which its
	// measured launches force (interleaved runs).
	pinned [][]string
	// load is the range of the load average over the recorded reps.
	load RunLoad
}

func (r *runner) run(ctx context.Context) error {
	r.times = make([][][]time.Duration, len(r.groups))
	r.order, r.pinned = make([][][]RepOrder, len(r.groups)), make([][]string, len(r.groups))
	r.failed, r.firstErr, r.dead = make([][]int, len(r.groups)), make([][]error, len(r.groups)), make([][]bool, len(r.groups))
	for gi := range r.groups {
		r.times[gi] = make([][]time.Duration, len(r.systems))
		r.order[gi], r.pinned[gi] = make([][]RepOrder, len(r.systems)), make([]string, len(r.systems))
		r.failed[gi], r.firstErr[gi], r.dead[gi] = make([]int, len(r.systems)), make([]error, len(r.systems)), make([]bool, len(r.systems))
	}
	if r.o.Testbed != nil && r.o.newBackend == nil { // tests stand in for the testbed's nodes
		tb, err := startTestbedRun(ctx, r.o, r.prog)
		if err != nil {
			return err
		}
		r.tb = tb
		defer tb.close()
	}
	if !r.o.sequential() {
		all := make([]int, len(r.systems))
		for si := range all {
			all[si] = si
		}
		r.runRounds(ctx, all)
	} else {
		r.runSequential(ctx)
	}
	if r.tb != nil {
		for _, n := range r.tb.pagesNotes(r.systems) {
			r.note(n)
		}
	}
	for gi := range r.groups {
		for si := range r.systems {
			res := &r.res[gi][si]
			// A sequential peer's one launch set its summary itself.
			if (!r.systems[si].ours() && r.o.sequential()) || res.Status == StatusSkipped {
				continue
			}
			// A failed system keeps the times of its good repetitions.
			res.setTimes(r.times[gi][si])
			res.Order = r.order[gi][si]
			if len(res.CPU) > 0 {
				res.CPUMedian = medianOf(res.CPU)
			}
			if n := r.failed[gi][si]; n > 0 && !r.dead[gi][si] {
				res.Status = StatusFailed
				res.Reason = fmt.Sprintf("%d of %d reps failed, first: %v", n, n+len(r.times[gi][si]), r.firstErr[gi][si])
				if res.Extra == nil {
					res.Extra = map[string]float64{}
				}
				res.Extra["failed_reps"] = float64(n)
			}
		}
	}
	return ctx.Err()
}

func (r *runner) open(ctx context.Context, s system) (backend, error) {
	if r.o.newBackend != nil {
		return r.o.newBackend(r.o, s, r.log)
	}
	if s.name == SysOursUI {
		return r.openWatched(ctx, s)
	}
	if r.tb != nil {
		return r.tb.open(ctx, s)
	}
	return openLocal(r.o, s, r.log)
}

// runnable says whether (gi, si) has repetitions to run.
func (r *runner) runnable(gi, si int) bool {
	return r.res[gi][si].Status != StatusSkipped && !r.dead[gi][si]
}

// repFailed records a failed repetition; the others still run.
func (r *runner) repFailed(gi, si int, err error) {
	if r.failed[gi][si]++; r.firstErr[gi][si] == nil {
		r.firstErr[gi][si] = err
	}
	where := ""
	if d := r.logDir(); d != "" {
		where = " (logs in " + d + ")"
	}
	r.prog.logf("%s %s: %v%s", r.groups[gi].label(), r.systems[si].name, err, where)
}

// fail marks (gi, si) failed for good: nothing more of it runs.
func (r *runner) fail(gi, si int, err error) {
	res := &r.res[gi][si]
	r.dead[gi][si] = true
	if res.ok() {
		res.Status, res.Reason = StatusFailed, err.Error()
		where := ""
		if d := r.logDir(); d != "" {
			where = " (logs in " + d + ")"
		}
		r.prog.logf("%s %s: %v%s", r.groups[gi].label(), r.systems[si].name, err, where)
	}
}

// runSequential runs the systems in the order from before runs were
// interleaved (Options.Sequential): ours's systems one after another
// (with --tls, ours and ours-tls side by side, so that load from
// elsewhere falls on both), then each peer in one launch.
func (r *runner) runSequential(ctx context.Context) {
	var ours []int
	for si, s := range r.systems {
		if s.ours() {
			ours = append(ours, si)
		}
	}
	var pair []int
	if r.o.TLS {
		pair = []int{ours[0], slices.IndexFunc(r.systems, func(s system) bool { return s.tls })}
		r.runRounds(ctx, pair)
	}
	for _, si := range ours {
		if !slices.Contains(pair, si) {
			r.runSystem(ctx, si)
		}
	}
	if r.logDir() != "" {
		for si, s := range r.systems {
			if !s.ours() {
				r.runPeer(ctx, si)
			}
		}
	}
}

// logDir is where the testbed's node and peer logs go: "" when nothing
// runs on the testbed (in process; or tests whose backend stands in for
// the nodes without naming a Testbed.LogDir for their stand-in peers),
// and then no peer runs.
func (r *runner) logDir() string {
	switch {
	case r.tb != nil:
		return r.tb.logDir
	case r.o.Testbed != nil:
		return r.o.Testbed.LogDir
	}
	return ""
}

// runRounds runs the repetitions of the systems sis (indices into
// r.systems) interleaved, one comparison after another: first every
// system's warm-ups, then round k runs measured repetition k of every
// system, the order rotated by one each round so that no system always
// follows the same one. Drift (other load on the machine) then falls on
// every system alike instead of on whichever ran last.
//
// Ours's systems keep one backend each, open from their first warm-up
// to the end (a fresh one per repetition in the failure scenario, which
// kills a node: each with its own warm-ups, as in runSystem). A peer is
// launched once per measured repetition (peerRep); its script runs its
// own warm-up in each launch. A best peer's algorithm is chosen first,
// by an unrecorded sweep. The failure variants' rounds come after the
// failure-free ones: each is killed at 50 % of its shape's failure-free
// median, which must be known before it runs.
func (r *runner) runRounds(ctx context.Context, sis []int) {
	backends := make([]backend, len(r.systems))
	defer func() {
		for _, b := range backends {
			if b != nil {
				b.Close()
			}
		}
	}()
	for gi := range r.groups {
		var free, kills []int
		for _, si := range sis {
			if r.systems[si].kill {
				kills = append(kills, si)
			} else {
				free = append(free, si)
			}
		}
		for _, si := range free {
			if s := r.systems[si]; !s.ours() && s.alg == "best" && r.runnable(gi, si) && r.logDir() != "" && ctx.Err() == nil {
				r.choosePeerAlgorithm(ctx, gi, si)
			}
		}
		r.rounds(ctx, gi, free, backends, nil)
		if len(kills) == 0 {
			continue
		}
		at := map[int]time.Duration{}
		for _, si := range kills {
			if !r.runnable(gi, si) {
				continue
			}
			kill, err := r.killAt(gi, si)
			if err != nil {
				r.fail(gi, si, err)
				continue
			}
			at[si] = kill
		}
		r.rounds(ctx, gi, kills, backends, at)
	}
}

// rounds runs comparison gi's rounds over sis (see runRounds); kill holds
// each failure variant's kill time.
func (r *runner) rounds(ctx context.Context, gi int, sis []int, backends []backend, kill map[int]time.Duration) {
	fresh := r.o.fresh()
	for rep := -r.o.Warmup; rep < r.o.Reps && ctx.Err() == nil; rep++ {
		for k := range sis {
			si := sis[(k+max(rep, 0))%len(sis)]
			if !r.runnable(gi, si) {
				continue
			}
			switch s := r.systems[si]; {
			case !s.ours():
				if rep >= 0 && r.logDir() != "" { // its warm-up is in each launch
					r.peerRep(ctx, gi, si, rep)
				}
			case fresh:
				if rep >= 0 { // each fresh cluster gets its own warm-ups
					r.freshRep(ctx, gi, si, rep, kill[si])
				}
			default:
				if backends[si] == nil {
					b, err := r.open(ctx, s)
					if err != nil {
						for g := range r.groups {
							r.fail(g, si, fmt.Errorf("start: %w", err))
						}
						continue
					}
					backends[si] = b
				}
				if rep >= 0 && r.o.Warmup > 0 {
					// Each measured rep right after a warm-up of its own, as
					// each peer launch times its rep right after the
					// launch's warm-up: otherwise ours's members start
					// every rep idle since the round before (the other
					// systems' reps, peer launches among them).
					r.measure(ctx, backends[si], gi, si, -1, 0)
				}
				r.measure(ctx, backends[si], gi, si, rep, 0)
			}
		}
	}
}

// memoryFallback says why an interleaved testbed run must run
// sequentially ("" if it need not): sets node sets of nodes each, up at
// once, may not fit in avail bytes (0: unknown) with objects of size
// bytes. A node of a sliced AllReduce holds about 4 size at its peak (its
// source, its chain outputs, its relays, its copy of the target), the
// agent that made the source held another, and an idle set keeps its
// heap until Go returns it, which an idle process does slowly: 6 size a
// node. (An interleaved 8 × 256 MiB AllReduce with two sets, estimated at
// 3 size a node, used the VM's 23 GiB and thrashed for half an hour.)
func memoryFallback(sets, nodes int, size, avail int64) string {
	need := int64(sets) * int64(nodes) * 6 * size
	if sets < 2 || avail <= 0 || need <= avail {
		return ""
	}
	return fmt.Sprintf("memory: interleaved, this run would keep %d node sets of %d up at once, about %.1f GiB at their peak (6 S per node) "+
		"against %.1f GiB available: it ran sequentially, one set at a time", sets, nodes, float64(need)/(1<<30), float64(avail)/(1<<30))
}

// memAvailable is the kernel's estimate of the memory available to new
// processes (MemAvailable), 0 if unknown.
func memAvailable() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "MemAvailable:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err == nil {
				return kb << 10
			}
		}
	}
	return 0
}

// freshRep runs one measured repetition of si on a cluster of its own,
// warmed up first without a failure (a cold cluster has not measured its
// links yet: the reduce's cost model starts from defaults).
func (r *runner) freshRep(ctx context.Context, gi, si, rep int, kill time.Duration) {
	b, err := r.open(ctx, r.systems[si])
	if err != nil {
		r.fail(gi, si, fmt.Errorf("start: %w", err))
		return
	}
	defer b.Close()
	for w := 0; w < r.o.Warmup; w++ {
		r.measure(ctx, b, gi, si, -1, 0)
	}
	r.measure(ctx, b, gi, si, rep, kill)
}

// killAt is when failure variant si is killed in comparison gi: at 50 %
// of its failure-free system's median (systems lists that one first, so
// it has run by then).
func (r *runner) killAt(gi, si int) (time.Duration, error) {
	s := r.systems[si]
	free := slices.IndexFunc(r.systems, func(f system) bool { return f.name == s.free })
	if free < 0 || len(r.times[gi][free]) == 0 {
		return 0, fmt.Errorf("no failure-free time of %s to place the failure at", s.free)
	}
	return Summarize(r.times[gi][free]).Median / 2, nil
}

// runSystem runs one system's groups and repetitions on one backend (a
// fresh one per repetition for failure runs).
func (r *runner) runSystem(ctx context.Context, si int) {
	s := r.systems[si]
	fresh := r.o.fresh()
	var b backend
	defer func() {
		if b != nil {
			b.Close()
		}
	}()
	for gi := range r.groups {
		var kill time.Duration
		if s.kill && r.runnable(gi, si) {
			var err error
			if kill, err = r.killAt(gi, si); err != nil {
				r.fail(gi, si, err)
				continue
			}
		}
		var prof *profileWindow // ours under --profile, from its first measured rep
		first := -r.o.Warmup
		if fresh {
			first = 0 // every fresh cluster gets its own warm-up below
		}
		for rep := first; rep < r.o.Reps && r.runnable(gi, si) && ctx.Err() == nil; rep++ {
			if b == nil {
				var err error
				if b, err = r.open(ctx, s); err != nil {
					r.fail(gi, si, fmt.Errorf("start: %w", err))
					break
				}
				// A cold cluster has not measured its links yet (the
				// reduce's cost model starts from defaults): warm it up
				// the way the others are, without a failure.
				for w := 0; fresh && w < r.o.Warmup; w++ {
					r.measure(ctx, b, gi, si, -1, 0)
				}
			}
			if rep == 0 && r.profiles(si) {
				prof = r.startProfile(ctx, b, gi)
			}
			r.measure(ctx, b, gi, si, rep, kill)
			if fresh {
				b.Close()
				b = nil
			}
		}
		if prof != nil {
			r.finishProfile(ctx, prof, b, gi, si, len(r.times[gi][si]), time.Since(prof.start))
			prof = nil
		}
	}
}

func (r *runner) measure(ctx context.Context, b backend, gi, si, rep int, kill time.Duration) {
	g, s := r.groups[gi], r.systems[si]
	r.seq++
	seq := r.seq
	if rep < 0 {
		s.kill = false // warm-ups run failure-free
	}
	// Reps below 0 are warm-ups, reps from o.Reps on fill a profile's
	// window (profile.go): neither is recorded, and the fill has no
	// progress steps of its own.
	unrecorded := rep < 0 || rep >= r.o.Reps
	what := fmt.Sprintf("%s %s rep %d", g.label(), s.name, rep+1)
	if rep < 0 {
		what = fmt.Sprintf("%s %s warm-up", g.label(), s.name)
	}
	if rep < r.o.Reps {
		r.prog.step(what)
		defer r.prog.finish()
	}
	mctx, cancel := context.WithTimeout(ctx, r.o.OpTimeout)
	defer cancel()
	m := &measurement{b: b, g: g, sys: s, nodes: r.o.Nodes, kill: kill,
		tag: fmt.Sprintf("%s-%s-%s-r%d-%d", g.scenario, SizeName(g.size), s.name, rep, time.Now().UnixNano()%1e9)}
	smp, err := m.run(mctx)
	if err != nil {
		r.repFailed(gi, si, err)
		return
	}
	// A forced degree that did not take (a node binary without the
	// reduce-degree experiment would not start, but one whose members
	// disagree would plan with the coordinator's own) measures another
	// system than the column says.
	// The coordinator caps a forced degree at the tree's positions (N-1
	// in failure-reduce, whose backup is not reduced).
	if d, ok := smp.extra["degree"]; ok && s.exp.ReduceDegree > 0 && d > 0 && int(d) != min(s.exp.ReduceDegree, g.reduced(r.o.Nodes)) {
		r.repFailed(gi, si, fmt.Errorf("the reduce ran with tree degree %d, not the forced %d", int(d), min(s.exp.ReduceDegree, g.reduced(r.o.Nodes))))
		return
	}
	if d := smp.extra["degree"]; d > 0 && s.exp.ReduceShape != "" && smp.extra["chain_leaf"] != 1 { // 0: inline, no tree
		r.repFailed(gi, si, fmt.Errorf("the reduce ran with a d-ary tree, not the %s shape", s.exp.ReduceShape))
		return
	}
	if _, planned := smp.extra["degree"]; planned && s.exp.AllReduceShape == reduction.ShapeSliced && smp.extra["sliced"] != 1 {
		// A forced shape that did not take measures another system than
		// the column says (as a forced degree above).
		r.repFailed(gi, si, fmt.Errorf("the allreduce ran reduce-then-broadcast, not the forced sliced shape"))
		return
	}
	if unrecorded {
		return
	}
	r.times[gi][si] = append(r.times[gi][si], smp.d)
	r.order[gi][si] = append(r.order[gi][si], RepOrder{Rep: rep + 1, Seq: seq})
	res := &r.res[gi][si]
	r.recordLoad(res)
	if smp.hasCPU {
		res.CPU = append(res.CPU, smp.cpu.Seconds())
	}
	addExtra(res, smp.extra)
}

// addExtra records one repetition's extra values in res: every value in
// ExtraReps, and in Extra their median (killed: their count).
func addExtra(res *Result, extra map[string]float64) {
	for k, v := range extra {
		if res.Extra == nil {
			res.Extra = map[string]float64{}
		}
		if res.ExtraReps == nil {
			res.ExtraReps = map[string][]float64{}
		}
		res.ExtraReps[k] = append(res.ExtraReps[k], v)
		if k == "killed" {
			res.Extra[k] += v
		} else {
			res.Extra[k] = medianOf(res.ExtraReps[k])
		}
	}
}
