package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/fingerprint"
	"github.com/hoplite-go/hoplite/messages"
)

// The operations of `hoplite bench routes` (a Result's Scenario): a Put
// through each route, a Get through each route, and the CLI's cost
// without an object (a process's start, and its start with a Dial and one
// request).
const (
	RoutesPut      = "put"
	RoutesGet      = "get"
	RoutesCLIStart = "cli-start"
)

// The routes `hoplite bench routes` times (a Result's System). The
// cluster is three members on 127.0.0.1: this process's (embedded) and
// two `hoplite node` processes, the first of them (P) the member the
// routes from outside talk to, the second (Q) the other member of the
// baseline.
const (
	// RouteM2M is the baseline: the member-to-member transfer, Q's
	// prefetching Get of an object created on P (Q fetches it on its data
	// plane and answers without the bytes). The same times stand in both
	// the put and the get rows.
	RouteM2M = "m2m"
	// RouteClient is the embedded member's storenode.Client (Member.Client):
	// a Put creates the object in this process's member; a Get fetches an
	// object created on P into this member, then copies it into a new
	// slice.
	RouteClient = "client"
	// RouteClientInto is that Client's GetInto, into a buffer of the
	// caller's.
	RouteClientInto = "client-getinto"
	// RouteActor is an application actor spawned in the embedded
	// member's own actor system (Member.Spawn), sending messages.Put (the
	// bytes by reference) and messages.Get (read_only: the store's own
	// buffer) to its store node: same process.
	RouteActor = "actor"
	// RouteRemoteActor is an application actor in an actor system of its
	// own in this process (no member), sending messages.Put and
	// messages.Get to P's store node over Proto.Actor remote: another
	// process. The bytes ride inside one remote message each way, which
	// carries at most 256 MiB: a larger object is refused
	// (INVALID_ARGUMENT), recorded as RouteRefused.
	RouteRemoteActor = "remote-actor"
	// RouteRemoteActorData is an application actor in that actor system
	// of its own using a cluster.Dial client of P made from it
	// (cluster.WithActorSystem): it calls the client's Put and Get on a
	// goroutine and sends itself the result, and the bytes move on P's
	// data plane, as a Dial client's do, with no cap but P's capacity.
	RouteRemoteActorData = "remote-actor-data"
	// RouteDial is a cluster.Dial client of P: Put and Get, the bytes on
	// P's data plane.
	RouteDial = "dial"
	// RouteDialInto is that client's GetInto.
	RouteDialInto = "dial-getinto"
	// RouteCLI is `hoplite put --addr P ID FILE` (a file written before,
	// in the page cache) and `hoplite get --addr P ID` to a pipe this
	// process reads: each a process, its start and Dial included.
	RouteCLI = "cli"
	// RouteCLIVersion is `hoplite version`: a process's start and exit
	// alone. RouteCLIMembers is `hoplite members --addr P`: a start, a
	// Dial and one request. Both are in the cli-start rows, what a CLI
	// Put or Get pays before its first byte.
	RouteCLIVersion = "cli-version"
	RouteCLIMembers = "cli-members"
)

// RouteRefused is the Status of a route that refused the object as it
// is documented to (the remote actor's past one remote message), its
// error the Reason.
const RouteRefused = "refused"

// RoutesTarget is the target: each route within this factor of
// the member-to-member transfer of the same object.
const RoutesTarget = 1.15

// RoutesOptions configures RunRoutes. Zero fields take the defaults.
type RoutesOptions struct {
	// Size is the object size (default 64 MiB).
	Size int64
	// Reps is how many times each route runs (default 5), all counted:
	// no warm-up.
	Reps int
	// Binary is the hoplite binary whose `node`, `put`, `get`, `version`
	// and `members` the run starts (required).
	Binary string
	// OpTimeout bounds every single operation (default 5 minutes).
	OpTimeout time.Duration
	// Command is recorded in the report.
	Command []string
	// Progress, if set, gets one line per operation.
	Progress io.Writer
	// Log receives the embedded member's logs (default: errors to stderr).
	Log *logrus.Logger
}

// routesMaxSize bounds Size: the run holds the object about seven times
// over in memory (this process's buffers and copies, P's two, Q's one).
const routesMaxSize = 4 << 30

func (o *RoutesOptions) defaults() error {
	if o.Size == 0 {
		o.Size = 64 << 20
	}
	if o.Reps == 0 {
		o.Reps = 5
	}
	if o.OpTimeout == 0 {
		o.OpTimeout = 5 * time.Minute
	}
	switch {
	case o.Size < 1 || o.Size > routesMaxSize:
		return fmt.Errorf("size %d: want 1 byte .. %s", o.Size, SizeName(routesMaxSize))
	case o.Reps < 1:
		return fmt.Errorf("%d reps: want at least 1", o.Reps)
	case o.OpTimeout < 0:
		return errors.New("need an operation timeout > 0")
	case o.Binary == "":
		return errors.New("routes needs the hoplite binary (RoutesOptions.Binary)")
	}
	return nil
}

// routeOp is one route's Put or Get: it runs the operation of rep and
// returns the time of its timed section alone; the bytes are checked
// after it, untimed. A refused operation returns errRouteRefused.
type routeOp struct {
	scenario, system string
	run              func(ctx context.Context, rep int) (time.Duration, error)
}

// errRouteRefused wraps a route's documented refusal of the object.
var errRouteRefused = errors.New("refused")

// RunRoutes runs `hoplite bench routes`: Reps rounds, each of which
// times every route's Put and Get of one object of Size once, the
// baseline first, so that the routes take turns under the same load.
func RunRoutes(ctx context.Context, o RoutesOptions) (*Report, error) {
	if err := o.defaults(); err != nil {
		return nil, err
	}
	if o.Log == nil {
		o.Log = logrus.New()
		o.Log.SetLevel(logrus.ErrorLevel)
	}
	start := time.Now()
	rep := &Report{Scenario: "routes", Mode: OpsProcesses, Command: o.Command, Date: start.UTC(), Machine: machine(),
		Nodes: 3, Reps: o.Reps, Sizes: []int64{o.Size}, RunOrder: OrderInterleaved}
	rep.Load.CPUs = rep.Machine.CPUs
	rep.Load.Start, rep.Load.Measured = LoadAvg()
	c, err := openRoutes(ctx, &o)
	if err != nil {
		return nil, err
	}
	defer c.close()
	ops := c.ops()
	times := make([][]time.Duration, len(ops))
	faults := make([][]float64, len(ops))
	runq := make([][]float64, len(ops))
	refused := make([]string, len(ops))
	var loads []float64
	for r := range o.Reps {
		for i, op := range ops {
			if refused[i] != "" || op.run == nil {
				continue
			}
			// Every route starts from a collected heap here: the garbage
			// of the one before (a Get's slice) is not collected in its
			// timed section.
			runtime.GC()
			octx, cancel := context.WithTimeout(ctx, o.OpTimeout)
			d, err := op.run(octx, r)
			cancel()
			if errors.Is(err, errRouteRefused) {
				refused[i] = strings.TrimPrefix(err.Error(), errRouteRefused.Error()+": ")
				c.progress("routes: %-9s %-17s %s rep %d: %v", op.scenario, op.system, SizeName(o.Size), r+1, err)
				continue
			}
			if err != nil {
				return nil, fmt.Errorf("%s %s, rep %d: %w", op.scenario, op.system, r+1, err)
			}
			times[i] = append(times[i], d)
			faults[i] = append(faults[i], float64(c.counted.minflt))
			runq[i] = append(runq[i], float64(c.counted.runqNs)/1e6)
			c.progress("routes: %-9s %-17s %s rep %d: %v", op.scenario, op.system, SizeName(o.Size), r+1, d)
		}
		if l, ok := LoadAvg(); ok {
			loads = append(loads, l)
		}
	}
	// A row without its own operation is the baseline's, in the put rows.
	for i, op := range ops {
		if op.run == nil {
			times[i], faults[i], runq[i] = times[0], faults[0], runq[0]
		}
	}
	base := map[string]float64{}
	for i, op := range ops {
		res := Result{Scenario: op.scenario, Size: o.Size, System: op.system, Status: StatusOK, Timing: TimingClient, Load: loads}
		if refused[i] != "" {
			res.Status, res.Reason = RouteRefused, refused[i]
		} else {
			res.setTimes(times[i])
			res.Extra = map[string]float64{"verified_reps": float64(len(times[i])), "minflt": medianOf(faults[i]), "runq_ms": medianOf(runq[i])}
			res.ExtraReps = map[string][]float64{"minflt": faults[i], "runq_ms": runq[i]}
		}
		res.LoadMedian = medianOf(loads)
		if op.system == RouteM2M {
			base[op.scenario] = res.Median
		}
		rep.Results = append(rep.Results, res)
	}
	for i := range rep.Results {
		res := &rep.Results[i]
		if b := base[res.Scenario]; b > 0 && res.Median > 0 {
			res.Extra["over_m2m"] = res.Median / b
		}
	}
	rep.Notes = routesNotes(o.Size)
	if len(loads) > 0 {
		rep.Load.Min, rep.Load.Max = slices.Min(loads), slices.Max(loads)
	}
	rep.Load.End, _ = LoadAvg()
	rep.Seconds = time.Since(start).Seconds()
	return rep, nil
}

// routesNotes say what each route is, for the report's reader.
func routesNotes(size int64) []string {
	return []string{
		"members: this process's (embedded, M) and two `hoplite node` processes, P and Q, on 127.0.0.1 (TCP data plane, no TLS)",
		"m2m (the baseline of every ratio): Q's prefetching Get of an object created on P, timed from this process's request to Q's answer; the same times stand in the put and the get rows",
		"every Get moves the bytes once: the routes of M (client, client-getinto, actor) fetch an object created on P that M has not held; those from outside (remote-actor, dial, dial-getinto, cli) Get through P, which holds it",
		"a Put's bytes: client and actor copy them into M's store in this process; remote-actor, dial and cli send them to P (its creator copy)",
		"actor: spawned in M's own actor system (Member.Spawn), messages.Put and messages.Get{read_only} to M's store node; remote-actor: an actor system of its own in this process, messages.Put and messages.Get to P's store node over Proto.Actor remote (the bytes inside one message each way, at most 256 MiB); remote-actor-data: an actor in that system calling Put and Get of a cluster.Dial client of P made from it (WithActorSystem) on a goroutine, the bytes on P's data plane",
		"cli: `hoplite put --addr P ID FILE` of a file written before the run (in the page cache) and `hoplite get --addr P ID` to a pipe this process reads into a buffer: a process each, its start and Dial included; cli-start: `hoplite version` (a start alone) and `hoplite members --addr P` (a start, a Dial and one request)",
		"minflt: the minor page faults of every process (this one, P, Q and a CLI process) in the timed section, median over the reps (a fault is a page touched for the first time: a fresh buffer); runq: the time their threads waited for a CPU in it (not the CLI's)",
		"this process's heap is collected before every operation (untimed), so that no route's timed section collects another's garbage",
		fmt.Sprintf("no warm-up: each route's first rep counts; every Get's bytes and every Put's (read back through Q) are compared by fingerprint after the timed section, %s each", SizeName(size)),
	}
}

func (c *routesCluster) progress(format string, a ...any) {
	if c.o.Progress != nil {
		fmt.Fprintf(c.o.Progress, format+"\n", a...)
	}
}

// RouteRatio is res's median over the baseline's in its row (0 when it
// has none).
func RouteRatio(res Result) float64 { return res.Extra["over_m2m"] }

// WriteRoutesTable prints a routes report: per operation and route, the
// median, the spread and the ratio to the member-to-member transfer of
// the same run.
func WriteRoutesTable(w io.Writer, r *Report) {
	size := int64(0)
	if len(r.Sizes) > 0 {
		size = r.Sizes[0]
	}
	fmt.Fprintf(w, "hoplite bench routes: %s, %d reps each (no warm-up), %d CPUs, load %.2f–%.2f\n",
		SizeName(size), r.Reps, r.Machine.CPUs, r.Load.Min, r.Load.Max)
	for _, n := range r.Notes {
		fmt.Fprintln(w, "  "+n)
	}
	fmt.Fprintf(w, "%-9s  %-17s  %10s  %-23s  %8s  %8s  %6s  %s\n", "op", "route", "median", "min–max", "minflt", "runq", "×m2m", "within "+fmt.Sprintf("%.2f×", RoutesTarget))
	for _, res := range r.Results {
		if res.Status != StatusOK {
			fmt.Fprintf(w, "%-9s  %-17s  %10s  %-23s  %8s  %8s  %6s  %s\n", res.Scenario, res.System, "-", "-", "-", "-", "-", res.Status+": "+res.Reason)
			continue
		}
		ratio, within := "-", "-"
		if v := RouteRatio(res); v > 0 && res.Scenario != RoutesCLIStart {
			ratio = fmt.Sprintf("%.2f", v)
			within = "yes"
			if v > RoutesTarget {
				within = "no"
			}
			if res.System == RouteM2M {
				within = "(baseline)"
			}
		}
		fmt.Fprintf(w, "%-9s  %-17s  %10s  %-23s  %8.0f  %5.1f ms  %6s  %s\n", res.Scenario, res.System, fmtSeconds(res.Median),
			fmtSeconds(res.Min)+"–"+fmtSeconds(res.Max), res.Extra["minflt"], res.Extra["runq_ms"], ratio, within)
	}
}

// fmtSeconds formats seconds as the routes table prints them.
func fmtSeconds(s float64) string {
	if s >= 1 {
		return fmt.Sprintf("%.3f s", s)
	}
	return fmt.Sprintf("%.1f ms", s*1e3)
}

// checkBytes says whether got is the run's object.
func checkBytes(what string, got []byte, size int64, want uint64) error {
	if int64(len(got)) != size {
		return fmt.Errorf("%s: %d bytes, want %d", what, len(got), size)
	}
	if fp := fingerprint.Of(got); fp != want {
		return fmt.Errorf("%s: other bytes than were Put (fingerprint %x, want %x)", what, fp, want)
	}
	return nil
}

// replyErr is a Put's or Get's reply's error, or one for a reply of
// another type.
func replyErr(res any) error {
	switch r := res.(type) {
	case *messages.PutReply:
		return messages.ErrOrNil(r.GetError())
	case *messages.GetReply:
		return messages.ErrOrNil(r.GetError())
	}
	return messages.Errorf(messages.ErrorCode_INTERNAL, "unexpected reply %T", res)
}

// sliceWriter writes into buf, and fails past its end.
type sliceWriter struct {
	buf []byte
	n   int
}

func (w *sliceWriter) Write(p []byte) (int, error) {
	if len(p) > len(w.buf)-w.n {
		return 0, fmt.Errorf("more than the %d bytes expected", len(w.buf))
	}
	w.n += copy(w.buf[w.n:], p)
	return len(p), nil
}

// writeTemp writes data to a new file in dir.
func writeTemp(dir string, data []byte) (string, error) {
	f, err := os.CreateTemp(dir, "object-*")
	if err != nil {
		return "", err
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return "", err
	}
	return f.Name(), f.Close()
}
