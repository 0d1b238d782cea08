package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
)

// The modes of `hoplite bench ops`: two members of an embedded cluster
// in this process (the in-memory data plane), or this process's member
// and a `hoplite node` process on loopback (the TCP data plane).
const (
	OpsInProcess = "in-process"
	OpsProcesses = "processes"
)

// The operations `hoplite bench ops` times, in the order each group
// runs them.
const (
	// OpPing is the data plane's bare control round trip from the
	// caller's member to the other: the floor a Get's Locate pays.
	OpPing = "ping"
	// OpPut is a Put on the caller's member of a new object whose
	// directory shard is on the other member.
	OpPut = "put"
	// OpGetAfterPut is a Put on the other member, then, timed alone, a
	// Get on the caller's member as soon as the Put returned. Its ops/s
	// and CPU count both (the pair).
	OpGetAfterPut = "get-after-put"
	// OpGet is a Get on the caller's member of an object the other
	// member Put before the phase (its shard there too): one the
	// caller's member has never fetched.
	OpGet = "get"
	// OpDelete is a Delete, on the caller's member, of an object the
	// put phase created.
	OpDelete = "delete"
)

// OpsOptions configures RunOps. Zero fields take the defaults.
type OpsOptions struct {
	// Modes are OpsInProcess and/or OpsProcesses (default both).
	Modes []string
	// Sizes are the object sizes (default 1 KiB and 64 KiB).
	Sizes []int64
	// Callers are the numbers of concurrent callers (default 1, 8, 64).
	Callers []int
	// Phase is how long each operation is timed (default 200 ms): a
	// phase also ends after MaxOps operations, or sooner when it runs
	// out of objects (a delete phase has the put phase's).
	Phase time.Duration
	// MaxOps bounds each phase's operations (default 20000), and with
	// them the objects a phase creates: at most opsMemory bytes of them.
	MaxOps int
	// Binary is the hoplite binary whose `node` the processes mode
	// starts (required for it).
	Binary string
	// OpTimeout bounds every single operation (default 30 s).
	OpTimeout time.Duration
	// Progress, if set, gets one line per phase.
	Progress io.Writer
	// Log receives the members' logs (default: errors to stderr).
	Log *logrus.Logger
}

// opsMemory bounds the bytes of the objects one phase creates (the put
// phase's stay until the delete phase): at 64 KiB, 2048 objects.
const opsMemory = 128 << 20

// opsCheckEvery: every so many operations' bytes are compared with what
// was Put, after the phase (the comparison is no part of its CPU).
const opsCheckEvery = 16

func (o *OpsOptions) defaults() error {
	if len(o.Modes) == 0 {
		o.Modes = []string{OpsInProcess, OpsProcesses}
	}
	for _, m := range o.Modes {
		if m != OpsInProcess && m != OpsProcesses {
			return fmt.Errorf("mode %q: want %s or %s", m, OpsInProcess, OpsProcesses)
		}
		if m == OpsProcesses && o.Binary == "" {
			return errors.New("the processes mode needs the hoplite binary (OpsOptions.Binary)")
		}
	}
	if len(o.Sizes) == 0 {
		o.Sizes = []int64{1 << 10, 64 << 10}
	}
	for _, s := range o.Sizes {
		if s < 1 || s > opsMemory {
			return fmt.Errorf("size %d: want 1 byte .. %s", s, SizeName(opsMemory))
		}
	}
	if len(o.Callers) == 0 {
		o.Callers = []int{1, 8, 64}
	}
	for _, c := range o.Callers {
		if c < 1 || c > 1024 {
			return fmt.Errorf("%d callers: want 1..1024", c)
		}
	}
	if o.Phase == 0 {
		o.Phase = 200 * time.Millisecond
	}
	if o.MaxOps == 0 {
		o.MaxOps = 20000
	}
	if o.OpTimeout == 0 {
		o.OpTimeout = 30 * time.Second
	}
	if o.Phase < 0 || o.MaxOps < 1 || o.OpTimeout < 0 {
		return errors.New("need a phase > 0, max ops >= 1 and an operation timeout > 0")
	}
	return nil
}

// opsBackend is two members: the callers' (where every timed operation
// starts) and the other.
type opsBackend interface {
	// put Puts on the callers' member; putOther d's bytes, data, on the
	// other member.
	put(ctx context.Context, id string, data []byte) error
	putOther(ctx context.Context, d DataSpec, data []byte) error
	get(ctx context.Context, id string) ([]byte, error)
	del(ctx context.Context, id string) error
	ping(ctx context.Context) error
	// otherShard says whether id's directory shard is on the other member.
	otherShard(id string) bool
	// cpu is both members' CPU time so far.
	cpu(ctx context.Context) (time.Duration, error)
	close()
}

// RunOps runs `hoplite bench ops`: for each mode, size and number of
// callers, the bare round trip, Puts, Gets after Puts, Gets and Deletes,
// each timed for a phase.
func RunOps(ctx context.Context, o OpsOptions) (*OpsReport, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	if o.Log == nil {
		o.Log = logrus.New()
		o.Log.SetLevel(logrus.ErrorLevel)
	}
	rep := &OpsReport{Phase: o.Phase, MaxOps: o.MaxOps, CPUs: runtime.NumCPU(), GOMAXPROCS: runtime.GOMAXPROCS(0)}
	for _, mode := range o.Modes {
		var b opsBackend
		var err error
		if mode == OpsInProcess {
			b, err = openOpsLocal(&o)
		} else {
			b, err = openOpsProcesses(ctx, &o)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", mode, err)
		}
		for _, size := range o.Sizes {
			for _, callers := range o.Callers {
				r := opsGroup{o: &o, b: b, mode: mode, size: size, callers: callers}
				rows, err := r.run(ctx)
				rep.Rows = append(rep.Rows, rows...)
				if err != nil {
					b.close()
					return rep, fmt.Errorf("%s, %s, %d callers: %w", mode, SizeName(size), callers, err)
				}
			}
		}
		b.close()
	}
	return rep, nil
}

// opsGroup is one mode, size and number of callers: its phases share the
// objects (the delete phase deletes the put phase's).
type opsGroup struct {
	o       *OpsOptions
	b       opsBackend
	mode    string
	size    int64
	callers int
	next    int // the next id's number
}

// ids returns n new ids whose shard is on the other member (shards are
// placed by hashing: some candidates are skipped).
func (g *opsGroup) ids(n int) ([]string, error) {
	out := make([]string, 0, n)
	for tries := 0; len(out) < n; tries++ {
		if tries > 100*n+1000 {
			return nil, fmt.Errorf("%d of %d ids found whose shard is on the other member", len(out), n)
		}
		id := fmt.Sprintf("ops-%s-%d-%d-%d", g.mode, g.size, g.callers, g.next)
		g.next++
		if g.b.otherShard(id) {
			out = append(out, id)
		}
	}
	return out, nil
}

// budget is how many operations a phase may run.
func (g *opsGroup) budget() int {
	return max(g.callers, min(g.o.MaxOps, int(opsMemory/g.size)))
}

func (g *opsGroup) generate(ids []string) [][]byte {
	data := make([][]byte, len(ids))
	for i, id := range ids {
		data[i] = Generate(DataSpec{ID: id, Size: g.size})
	}
	return data
}

func (g *opsGroup) run(ctx context.Context) ([]OpsRow, error) {
	var rows []OpsRow
	n := g.budget()
	ping, err := g.phase(ctx, OpPing, n, func(ctx context.Context, _ int) (time.Duration, error) {
		t0 := time.Now()
		err := g.b.ping(ctx)
		return time.Since(t0), err
	}, nil)
	if err != nil {
		return rows, err
	}
	rows = append(rows, ping)
	add := func(r OpsRow) {
		r.PingP50 = ping.P50
		rows = append(rows, r)
	}

	// Puts on the callers' member, kept for the delete phase.
	putIDs, err := g.ids(n)
	if err != nil {
		return rows, err
	}
	putData := g.generate(putIDs)
	put, err := g.phase(ctx, OpPut, n, func(ctx context.Context, i int) (time.Duration, error) {
		t0 := time.Now()
		err := g.b.put(ctx, putIDs[i], putData[i])
		return time.Since(t0), err
	}, nil)
	putData = nil
	putIDs = putIDs[:put.Ops]
	if err != nil {
		g.cleanup(ctx, putIDs)
		return rows, err
	}
	add(put)

	gapIDs, err := g.ids(n)
	if err != nil {
		g.cleanup(ctx, putIDs)
		return rows, err
	}
	gapData := g.generate(gapIDs)
	check := &opsChecker{size: g.size}
	gap, err := g.phase(ctx, OpGetAfterPut, n, func(ctx context.Context, i int) (time.Duration, error) {
		if err := g.b.putOther(ctx, DataSpec{ID: gapIDs[i], Size: g.size}, gapData[i]); err != nil {
			return 0, err
		}
		t0 := time.Now()
		got, err := g.b.get(ctx, gapIDs[i])
		lat := time.Since(t0)
		check.keep(i, gapIDs[i], got)
		return lat, err
	}, check)
	gapData = nil
	g.cleanup(ctx, gapIDs) // every one: a failed phase may have Put more than it counted
	if err != nil {
		g.cleanup(ctx, putIDs)
		return rows, err
	}
	add(gap)

	// The Gets' objects are Put before their phase: as many as the
	// faster of the puts' and the gets after puts' rates would need
	// twice over (a Get costs about what either does).
	rate := max(put.OpsPerSecond(), gap.OpsPerSecond())
	pool := min(n, max(4*g.callers, int(2*rate*g.o.Phase.Seconds())))
	getIDs, err := g.ids(pool)
	if err == nil {
		err = g.prepare(ctx, getIDs)
	}
	var get OpsRow
	if err == nil {
		check = &opsChecker{size: g.size}
		get, err = g.phase(ctx, OpGet, pool, func(ctx context.Context, i int) (time.Duration, error) {
			t0 := time.Now()
			got, err := g.b.get(ctx, getIDs[i])
			lat := time.Since(t0)
			check.keep(i, getIDs[i], got)
			return lat, err
		}, check)
	}
	g.cleanup(ctx, getIDs)
	if err != nil {
		g.cleanup(ctx, putIDs)
		return rows, err
	}
	add(get)

	del, err := g.phase(ctx, OpDelete, len(putIDs), func(ctx context.Context, i int) (time.Duration, error) {
		t0 := time.Now()
		err := g.b.del(ctx, putIDs[i])
		return time.Since(t0), err
	}, nil)
	g.cleanup(ctx, putIDs[min(del.Ops, len(putIDs)):])
	if err != nil {
		return rows, err
	}
	add(del)
	return rows, nil
}

// prepare Puts ids on the other member, untimed, with the group's
// callers.
func (g *opsGroup) prepare(ctx context.Context, ids []string) error {
	return g.each(ctx, ids, func(ctx context.Context, id string) error {
		d := DataSpec{ID: id, Size: g.size}
		return g.b.putOther(ctx, d, Generate(d))
	})
}

// cleanup Deletes ids, untimed; an id that was never Put is no error.
func (g *opsGroup) cleanup(ctx context.Context, ids []string) {
	_ = g.each(ctx, ids, func(ctx context.Context, id string) error {
		_ = g.b.del(ctx, id)
		return nil
	})
}

// each runs f on every id with the group's callers; the first error
// stops it.
func (g *opsGroup) each(ctx context.Context, ids []string, f func(ctx context.Context, id string) error) error {
	var next atomic.Int64
	var mu sync.Mutex
	var first error
	var wg sync.WaitGroup
	for range min(g.callers, len(ids)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1) - 1)
				if i >= len(ids) || ctx.Err() != nil {
					return
				}
				octx, cancel := context.WithTimeout(ctx, g.o.OpTimeout)
				err := f(octx, ids[i])
				cancel()
				if err != nil {
					mu.Lock()
					first = cmpOr(first, err)
					mu.Unlock()
					next.Store(int64(len(ids)))
					return
				}
			}
		})
	}
	wg.Wait()
	if first == nil {
		first = ctx.Err()
	}
	return first
}

func cmpOr(a, b error) error {
	if a != nil {
		return a
	}
	return b
}

// phase times op from the group's callers until the phase's time is up
// or n operations were started: op i runs once for every i < Ops, and
// returns its own latency (the part of it that is timed). A failed
// operation ends the phase with its error. check, if set, compares the
// bytes op kept after the phase's CPU was read.
func (g *opsGroup) phase(ctx context.Context, name string, n int, op func(ctx context.Context, i int) (time.Duration, error), check *opsChecker) (OpsRow, error) {
	r := OpsRow{Mode: g.mode, Op: name, Size: g.size, Callers: g.callers}
	if name == OpPing {
		r.Size = 0
	}
	lat := make([]time.Duration, n)
	var next, done atomic.Int64
	var mu sync.Mutex
	var first error
	cpu0, err := g.cpu(ctx)
	if err != nil {
		return r, err
	}
	start := time.Now()
	deadline := start.Add(g.o.Phase)
	var wg sync.WaitGroup
	for range g.callers {
		wg.Go(func() {
			for time.Now().Before(deadline) && ctx.Err() == nil {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				octx, cancel := context.WithTimeout(ctx, g.o.OpTimeout)
				d, err := op(octx, i)
				cancel()
				if err != nil {
					mu.Lock()
					first = cmpOr(first, fmt.Errorf("%s %d: %w", name, i, err))
					mu.Unlock()
					next.Store(int64(n)) // the others stop at their next claim
					return
				}
				lat[i] = d
				done.Add(1)
			}
		})
	}
	wg.Wait()
	r.Elapsed = time.Since(start)
	cpu1, err := g.cpu(ctx)
	if first == nil {
		first = cmpOr(err, ctx.Err())
	}
	r.CPU = cpu1 - cpu0
	r.Ops = int(done.Load())
	if first == nil && check != nil {
		first = check.verify()
	}
	if first != nil {
		return r, first
	}
	// Without an error every claimed operation completed: they are
	// 0..Ops-1.
	summarizeOps(&r, lat[:r.Ops])
	if g.o.Progress != nil {
		fmt.Fprintf(g.o.Progress, "ops: %-10s %-13s %8s x%-3d %7d ops %10.0f/s p50 %v p99 %v\n",
			g.mode, name, sizeOrDash(r.Size), g.callers, r.Ops, r.OpsPerSecond(), r.P50, r.P99)
	}
	return r, nil
}

// cpu is both members' CPU time so far, asked with the operations'
// deadline.
func (g *opsGroup) cpu(ctx context.Context) (time.Duration, error) {
	ctx, cancel := context.WithTimeout(ctx, g.o.OpTimeout)
	defer cancel()
	return g.b.cpu(ctx)
}

func sizeOrDash(n int64) string {
	if n == 0 {
		return "-"
	}
	return SizeName(n)
}

// opsChecker keeps every opsCheckEvery-th Get's bytes of a phase for a
// comparison after it; every Get's length is checked at once.
type opsChecker struct {
	size int64
	mu   sync.Mutex
	kept map[string][]byte
	bad  error
}

func (c *opsChecker) keep(i int, id string, got []byte) {
	if got == nil {
		return // the Get failed: its error ends the phase
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if int64(len(got)) != c.size {
		c.bad = cmpOr(c.bad, fmt.Errorf("get %s: %d bytes, want %d", id, len(got), c.size))
		return
	}
	if i%opsCheckEvery == 0 {
		if c.kept == nil {
			c.kept = map[string][]byte{}
		}
		c.kept[id] = got
	}
}

func (c *opsChecker) verify() error {
	if c.bad != nil {
		return c.bad
	}
	for id, got := range c.kept {
		if !bytes.Equal(got, Generate(DataSpec{ID: id, Size: c.size})) {
			return fmt.Errorf("get %s: other bytes than were Put", id)
		}
	}
	return nil
}
