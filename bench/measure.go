package bench

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/hoplite-go/hoplite/internal/reduction"
	"github.com/hoplite-go/hoplite/messages"
)

// sample is one repetition's measurement.
type sample struct {
	d     time.Duration
	extra map[string]float64
	// cpu is what the operation cost the hosts' processes, all together
	// (measured: hasCPU).
	cpu    time.Duration
	hasCPU bool
}

// cpuMeter measures the hosts' CPU over an operation that starts
// startLead after startCPU returns: call stop after it. What the hosts
// burn meanwhile without it (their idle timers and heartbeats, and the
// agents answering the CPU reads themselves) is measured first over an
// idle startLead, and subtracted: for a 1 KiB operation it is of the
// same order as the operation.
//
// Where the backend's processes can be read (procCounter), it also
// records the kernel's counts over the operation: minor page faults
// (extra minflt), the time its threads waited for a CPU (runq_wait_s),
// their context switches (ctxsw) and the kernel's share of their CPU
// (cpu_sys_s, in 10 ms ticks: read it summed over repetitions), without the idle baseline: what a
// first operation pays that later ones do not shows there. It also
// records the whole machine's busy CPU time (machine_busy_s) and its
// softirq time (softirq_s) over the operation, also in 10 ms ticks and
// without a baseline: the network stack's receive work that the kernel
// charges to the members or to its own threads, as it happens to
// schedule it (see machineCounters), and anything else that ran.
type cpuMeter struct {
	b           backend
	start, idle time.Duration
	ok          bool
	pc          procCounter
	counters    procCounters
	// machine is the whole machine's counters at the start (hasMachine:
	// read), for machine_busy_s and softirq_s.
	machine    machineCounters
	hasMachine bool
}

func startCPU(ctx context.Context, b backend) *cpuMeter {
	c0, err0 := b.CPU(ctx)
	if err0 != nil || sleepUntil(ctx, time.Now().Add(startLead)) != nil {
		return &cpuMeter{}
	}
	c1, err1 := b.CPU(ctx)
	m := &cpuMeter{b: b, start: c1, idle: c1 - c0, ok: err1 == nil}
	if pc, ok := b.(procCounter); ok {
		if c, err := pc.procCounters(); err == nil {
			m.pc, m.counters = pc, c
		}
		var err error
		m.machine, err = readMachineCounters()
		m.hasMachine = err == nil
	}
	return m
}

// stop records the CPU used since start, less the idle baseline, into s
// (nothing if a read failed), and the kernel's counts.
func (c *cpuMeter) stop(ctx context.Context, s *sample) {
	if !c.ok {
		return
	}
	if end, err := c.b.CPU(ctx); err == nil {
		s.cpu, s.hasCPU = max(0, end-c.start-c.idle), true
	}
	if c.pc == nil {
		return
	}
	if end, err := readMachineCounters(); err == nil && c.hasMachine {
		d := end.sub(c.machine)
		if s.extra == nil {
			s.extra = map[string]float64{}
		}
		s.extra["machine_busy_s"], s.extra["softirq_s"] = float64(d.busyNs)/1e9, float64(d.softirqNs)/1e9
	}
	if end, err := c.pc.procCounters(); err == nil {
		d := end.sub(c.counters)
		if s.extra == nil {
			s.extra = map[string]float64{}
		}
		s.extra["minflt"], s.extra["runq_wait_s"], s.extra["ctxsw"] = float64(d.minflt), float64(d.runqNs)/1e9, float64(d.ctxsw)
		s.extra["cpu_sys_s"] = float64(d.sysNs) / 1e9
	}
}

// each runs f for every host in hosts at once and returns the first error.
func each(hosts []int, f func(h int) error) error {
	errs := make([]error, len(hosts))
	var wg sync.WaitGroup
	for i, h := range hosts {
		wg.Go(func() { errs[i] = f(h) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

func span(from, to int) []int {
	var out []int
	for h := from; h < to; h++ {
		out = append(out, h)
	}
	return out
}

// measurement runs one repetition of a group on one system.
type measurement struct {
	b     backend
	g     group
	sys   system
	nodes int
	tag   string        // unique per repetition: object ids derive from it
	kill  time.Duration // failure runs: when to kill the victim
}

// victim is the host the failure runs kill: host 1, a receiver of the
// broadcast (the first to fetch from the creator, so others fetch from
// it) and a source of the reduce; never host 0, the caller, which also
// hosts the Reduce's coordinator (TargetID).
const victim = 1

func (m *measurement) run(ctx context.Context) (sample, error) {
	if m.sys.floor {
		return m.floor(ctx)
	}
	switch m.g.kind {
	case "p2p":
		return m.p2p(ctx)
	case "broadcast":
		return m.broadcast(ctx)
	case "gather":
		return m.gather(ctx)
	case "reduce", "allreduce":
		return m.reduce(ctx, m.g.kind == "allreduce")
	case "async":
		return m.async(ctx)
	}
	return sample{}, fmt.Errorf("unknown scenario %q", m.g.kind)
}

func (m *measurement) create(ctx context.Context, host int, d DataSpec) error {
	if err := m.b.Prepare(ctx, host, d); err != nil {
		return err
	}
	_, err := m.b.Put(ctx, host, d.ID, time.Time{})
	return err
}

func (m *measurement) bytesSpec(suffix string) DataSpec {
	return DataSpec{ID: m.tag + "-" + suffix, Size: m.g.size}
}

// startLead is how far ahead the driver schedules the start of a
// collective's calls on the hosts: enough for its requests to reach
// every host before then, so that they all start together.
const startLead = 20 * time.Millisecond

func (m *measurement) p2p(ctx context.Context) (sample, error) {
	d := m.bytesSpec("obj")
	defer m.b.Delete(ctx, []string{d.ID})
	if err := m.create(ctx, 0, d); err != nil {
		return sample{}, err
	}
	cpu := startCPU(ctx, m.b)
	t, err := m.b.Fetch(ctx, 1, d.ID, time.Now().Add(startLead))
	if err != nil {
		return sample{}, err
	}
	s := sample{d: t.done.Sub(t.start)}
	cpu.stop(ctx, &s)
	return s, m.b.Verify(ctx, 1, d.ID, []DataSpec{d})
}

// floor times bare Proto.Actor round trips between the hosts' agents (or,
// data-rtt, bare control requests on the data plane between their
// members) in the pattern of the scenario's control messages, from a
// common start:
// p2p, one receiver to the sender; broadcast, every receiver to host 0
// at once (the fan-in of their Locates at one directory shard); reduce
// and gather, host 0 to every other host at once. No object moves: it is
// what the actor control plane costs before Hoplite does anything.
func (m *measurement) floor(ctx context.Context) (sample, error) {
	cpu := startCPU(ctx, m.b)
	begin := time.Now().Add(startLead)
	others := span(1, m.nodes)
	var times []timing
	var err error
	switch m.g.kind {
	case "p2p":
		var t timing
		t, err = m.b.RoundTrips(ctx, 1, []int{0}, begin, m.sys.dataPlane)
		times = append(times, t)
	case "broadcast":
		times = make([]timing, m.nodes)
		err = each(others, func(h int) (err error) {
			times[h], err = m.b.RoundTrips(ctx, h, []int{0}, begin, m.sys.dataPlane)
			return err
		})
	case "reduce", "gather":
		var t timing
		t, err = m.b.RoundTrips(ctx, 0, others, begin, m.sys.dataPlane)
		times = append(times, t)
	default:
		return sample{}, fmt.Errorf("no round-trip pattern for %s", m.g.kind)
	}
	if err != nil {
		return sample{}, err
	}
	s := sample{d: spanOf(times...)}
	cpu.stop(ctx, &s)
	return s, nil
}

// spanOf is the time from the first start to the last end of timings
// (zero ones, of calls that failed, left out).
func spanOf(ts ...timing) time.Duration {
	var first, last time.Time
	for _, t := range ts {
		if t.start.IsZero() {
			continue
		}
		if first.IsZero() || t.start.Before(first) {
			first = t.start
		}
		if t.done.After(last) {
			last = t.done
		}
	}
	return last.Sub(first)
}

// afterKill runs the failure: kill the victim m.kill after begin (if this
// is a failure run and done has not closed by then). killed closes once
// the victim is dead; wait waits for the killer and says whether it
// killed.
// ownSpans is how the peers time a collective (mpibench, gloobench):
// each participant from its own start, the slowest of them; and how far
// apart the participants started. spanOf charges an op for a participant
// that woke late at begin (on a loaded host, a process waiting for a
// core); the peers start their clocks at each rank's own exit from a
// barrier, which does not.
func ownSpans(ts ...timing) (slowest, skew time.Duration) {
	var first, last time.Time
	for _, t := range ts {
		if t.start.IsZero() {
			continue
		}
		slowest = max(slowest, t.done.Sub(t.start))
		if first.IsZero() || t.start.Before(first) {
			first = t.start
		}
		if t.start.After(last) {
			last = t.start
		}
	}
	return slowest, last.Sub(first)
}

func (m *measurement) afterKill(ctx context.Context, begin time.Time, done <-chan struct{}) (killed <-chan struct{}, wait func() (bool, error)) {
	k := make(chan struct{})
	if !m.sys.kill {
		return k, func() (bool, error) { return false, nil }
	}
	res := make(chan error, 1)
	did := false
	go func() {
		t := time.NewTimer(time.Until(begin.Add(m.kill)))
		defer t.Stop()
		select {
		case <-t.C:
			did = true
			err := m.b.Kill(victim)
			close(k)
			res <- err
		case <-done:
			res <- nil
		case <-ctx.Done():
			res <- ctx.Err()
		}
	}()
	return k, func() (bool, error) {
		err := <-res
		return did, err
	}
}

func (m *measurement) broadcast(ctx context.Context) (sample, error) {
	d := m.bytesSpec("obj")
	defer m.b.Delete(ctx, []string{d.ID})
	if err := m.create(ctx, 0, d); err != nil {
		return sample{}, err
	}
	type got struct {
		host int
		err  error
		t    timing
	}
	fctx, cancel := context.WithCancel(ctx)
	defer cancel()
	results := make(chan got, m.nodes)
	done := make(chan struct{})
	cpu := startCPU(ctx, m.b)
	begin := time.Now().Add(startLead)
	killed, wait := m.afterKill(ctx, begin, done)
	for h := 1; h < m.nodes; h++ {
		go func() {
			t, err := m.b.Fetch(fctx, h, d.ID, begin)
			results <- got{h, err, t}
		}()
	}
	// Every receiver's Get, except the victim's once it is dead (a killed
	// process never answers).
	errs := make([]error, m.nodes)
	var times []timing
	pending := m.nodes - 1
	victimDone := false
	for pending > 0 {
		var g got
		select {
		case g = <-results:
		case <-killed:
			killed = nil // fires once
			if !victimDone && m.nodes > 1 {
				pending-- // the victim's Get will not complete
			}
			continue
		}
		if g.host == victim {
			victimDone = true
			if killed == nil {
				continue // already given up on it
			}
		}
		errs[g.host] = g.err
		times = append(times, g.t)
		pending--
	}
	elapsed := spanOf(times...)
	close(done)
	did, kerr := wait()
	if kerr != nil {
		return sample{}, fmt.Errorf("kill host %d: %w", victim, kerr)
	}
	s := sample{d: elapsed, extra: map[string]float64{}}
	own, skew := ownSpans(times...)
	s.extra["own_s"], s.extra["start_skew_s"] = own.Seconds(), skew.Seconds()
	if m.sys.kill {
		s.extra["killed"] = b2f(did)
		s.extra["kill_at_s"] = m.kill.Seconds()
	} else {
		cpu.stop(ctx, &s)
	}
	var survivors []int
	for h := 1; h < m.nodes; h++ {
		if did && h == victim {
			continue // its Get fails with it
		}
		if errs[h] != nil {
			return s, errs[h]
		}
		survivors = append(survivors, h)
	}
	return s, each(survivors, func(h int) error { return m.b.Verify(ctx, h, d.ID, []DataSpec{d}) })
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (m *measurement) gather(ctx context.Context) (sample, error) {
	specs := make([]DataSpec, m.nodes)
	var ids []string
	for h := 1; h < m.nodes; h++ {
		specs[h] = m.bytesSpec(fmt.Sprintf("part-%d", h))
		ids = append(ids, specs[h].ID)
	}
	defer m.b.Delete(ctx, ids)
	if err := each(span(1, m.nodes), func(h int) error { return m.create(ctx, h, specs[h]) }); err != nil {
		return sample{}, err
	}
	cpu := startCPU(ctx, m.b)
	begin := time.Now().Add(startLead)
	times := make([]timing, m.nodes)
	if err := each(span(1, m.nodes), func(h int) (err error) {
		times[h], err = m.b.Fetch(ctx, 0, specs[h].ID, begin)
		return err
	}); err != nil {
		return sample{}, err
	}
	s := sample{d: spanOf(times...)}
	cpu.stop(ctx, &s)
	return s, each(span(1, m.nodes), func(h int) error { return m.b.Verify(ctx, 0, specs[h].ID, specs[h:h+1]) })
}

// sources are one float32 object per host.
func (m *measurement) sources() ([]DataSpec, []string) {
	specs := make([]DataSpec, m.nodes)
	ids := make([]string, m.nodes)
	for h := range specs {
		specs[h] = DataSpec{ID: fmt.Sprintf("%s-src-%d", m.tag, h), Size: m.g.size, Float32: true, Sources: m.nodes}
		ids[h] = specs[h].ID
	}
	return specs, ids
}

func reducedSpecs(r *messages.ReduceReply, specs []DataSpec) ([]DataSpec, error) {
	var out []DataSpec
	for _, id := range r.GetReducedIds() {
		found := false
		for _, s := range specs {
			if s.ID == id {
				out, found = append(out, s), true
			}
		}
		if !found {
			return nil, fmt.Errorf("the reduce reports an unknown source %q", id)
		}
	}
	return out, nil
}

// target is the repetition's Reduce target: an id whose shard, and so
// the coordinator, is on host 0 (the caller), or with SysAnyTarget the
// repetition's own id, wherever its shard is.
func (m *measurement) target(ctx context.Context) (string, error) {
	if m.sys.anyTarget {
		return m.tag + "-sum", nil
	}
	return m.b.TargetID(ctx, m.tag+"-sum")
}

func (m *measurement) reduce(ctx context.Context, all bool) (sample, error) {
	specs, ids := m.sources()
	target, err := m.target(ctx)
	if err != nil {
		return sample{}, err
	}
	defer m.b.Delete(ctx, append(ids, target))
	if err := each(span(0, m.nodes), func(h int) error { return m.create(ctx, h, specs[h]) }); err != nil {
		return sample{}, err
	}
	num := m.g.reduced(m.nodes) // failure-reduce: one backup replaces a lost source
	done := make(chan struct{})
	cpu := startCPU(ctx, m.b)
	begin := time.Now().Add(startLead)
	_, wait := m.afterKill(ctx, begin, done)
	// The naive baseline has no allreduce: it reduces at the caller and
	// then every host Gets the result from there.
	r, t, err := m.b.Reduce(ctx, 0, target, ids, num, all && !m.sys.exp.Naive, begin)
	times := []timing{t}
	if err == nil && all && m.sys.exp.Naive {
		fetched := make([]timing, m.nodes)
		err = each(span(1, m.nodes), func(h int) (err error) {
			fetched[h], err = m.b.Fetch(ctx, h, target, time.Time{})
			return err
		})
		for _, f := range fetched {
			if !f.done.IsZero() {
				times = append(times, timing{start: t.start, done: f.done})
			}
		}
	}
	elapsed := spanOf(times...)
	close(done)
	killed, kerr := wait()
	if err != nil {
		return sample{}, fmt.Errorf("reduce %s: %w", target, err)
	}
	if kerr != nil {
		return sample{}, fmt.Errorf("kill host %d: %w", victim, kerr)
	}
	s := sample{d: elapsed, extra: planExtra(r.GetPlan())}
	if m.sys.kill {
		s.extra["killed"] = b2f(killed)
		s.extra["kill_at_s"] = m.kill.Seconds()
	} else {
		cpu.stop(ctx, &s)
	}
	want, err := reducedSpecs(r, specs)
	if err != nil {
		return s, err
	}
	if len(want) != num {
		return s, fmt.Errorf("reduce %s: %d sources reduced, want %d", target, len(want), num)
	}
	check := []int{0}
	if all {
		check = append(check, m.nodes-1)
	}
	err = each(check, func(h int) error { return m.b.Verify(ctx, h, target, want) })
	if err != nil && killed && errors.Is(err, messages.ErrLost) && rootReduced(r.GetPlan(), specs[victim].ID) {
		// The Reduce had finished when the victim died (its reply was on
		// its way), and the root there held the target's only copy: the
		// result is lost with its node, as any object's only copy is.
		// The time stands; the rep says so.
		s.extra["lost_with_root"] = 1
		return s, nil
	}
	return s, err
}

// rootReduced reports whether the plan's root position reduced source id
// (and so ran on its node).
func rootReduced(p *messages.ReducePlan, id string) bool {
	for _, pos := range p.GetPositions() {
		if pos.GetParent() < 0 {
			return pos.GetObjectId() == id
		}
	}
	return false
}

// planExtra is what a reduce sample records of its plan: the degree, the
// L and B it was chosen from, chain_leaf 1 if the tree had the
// chain-leaf shape (its degree is its binary top's), and sliced 1 for an
// AllReduce that reduce-scattered and all-gathered.
func planExtra(p *messages.ReducePlan) map[string]float64 {
	x := map[string]float64{"degree": float64(p.GetDegree())}
	// What the cost model chose from: the coordinator's L and B.
	if p.GetLatencyNs() > 0 {
		x["plan_latency_ms"] = float64(p.GetLatencyNs()) / 1e6
	}
	if p.GetBandwidth() > 0 {
		x["plan_bandwidth_mbit"] = p.GetBandwidth() * 8 / 1e6
	}
	if p.GetShape() == reduction.ShapeChainLeaf {
		x["chain_leaf"] = 1
	}
	if p.GetShape() == reduction.ShapeSliced {
		x["sliced"] = 1
		x["ring_gather"] = b2f(p.GetRingGather())
	}
	return x
}

// async: the Reduce is called first, then source i is Put at i·interval;
// the time is from the last Put to the Reduce's reply.
func (m *measurement) async(ctx context.Context) (sample, error) {
	specs, ids := m.sources()
	target, err := m.target(ctx)
	if err != nil {
		return sample{}, err
	}
	defer m.b.Delete(ctx, append(ids, target))
	if err := each(span(0, m.nodes), func(h int) error { return m.b.Prepare(ctx, h, specs[h]) }); err != nil {
		return sample{}, err
	}
	type result struct {
		r   *messages.ReduceReply
		err error
		t   timing
	}
	res := make(chan result, 1)
	begin := time.Now()
	go func() {
		r, t, err := m.b.Reduce(ctx, 0, target, ids, m.nodes, false, time.Time{})
		res <- result{r, err, t}
	}()
	arrivals := make([]time.Time, m.nodes)
	// A short lead lets the Reduce reach its coordinator before the first
	// source exists, as when a task system calls it ahead of its inputs.
	lead := 20 * time.Millisecond
	perr := each(span(0, m.nodes), func(h int) error {
		at, err := m.b.Put(ctx, h, ids[h], begin.Add(lead+time.Duration(h)*m.g.interval))
		arrivals[h] = at
		return err
	})
	r := <-res
	if perr != nil {
		return sample{}, perr
	}
	if r.err != nil {
		return sample{}, fmt.Errorf("reduce %s: %w", target, r.err)
	}
	last := arrivals[0]
	for _, a := range arrivals {
		if a.After(last) {
			last = a
		}
	}
	s := sample{d: r.t.done.Sub(last), extra: planExtra(r.r.GetPlan())}
	s.extra["total_s"] = r.t.done.Sub(begin).Seconds()
	want, err := reducedSpecs(r.r, specs)
	if err != nil {
		return s, err
	}
	return s, m.b.Verify(ctx, 0, target, want)
}
