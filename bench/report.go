package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hoplite-go/hoplite/internal/reduction"
)

// Result statuses.
const (
	StatusOK      = "ok"
	StatusSkipped = "skipped"
	StatusFailed  = "failed"
)

// Report is everything one run measured; it is what --json writes.
type Report struct {
	Scenario string    `json:"scenario"`
	Mode     string    `json:"mode"` // "in-process" or "testbed"
	Command  []string  `json:"command"`
	Date     time.Time `json:"date"`
	Machine  Machine   `json:"machine"`
	Nodes    int       `json:"nodes"`
	// BandwidthBits is B, each host's up and down link, in bit/s.
	BandwidthBits float64 `json:"bandwidth_bits_per_s"`
	Bandwidth     string  `json:"bandwidth"`
	Reps          int     `json:"reps"`
	// Warmup is the unrecorded reps before ours's first recorded one on
	// each cluster (0: none, the default; see Options.Warmup); Fresh,
	// whether every recorded rep had a new cluster (--fresh).
	Warmup int  `json:"warmup"`
	Fresh  bool `json:"fresh,omitempty"`
	// Load is the CPU-bound processes beside the cluster (--load) and
	// the machine's load average over the run.
	Load  RunLoad  `json:"load"`
	Sizes []int64  `json:"sizes"`
	Peers []string `json:"peers"`
	// RunOrder is OrderInterleaved (a comparison's systems take turns,
	// one repetition each: see Result.Order) or OrderSequential (each
	// system's repetitions back to back, Options.Sequential).
	RunOrder string   `json:"run_order,omitempty"`
	Results  []Result `json:"results"`
	// TradeOffs are the failure scenario's shapes at both ends: each
	// one's failure-free median against its median with the victim
	// killed (see TradeOff).
	TradeOffs []TradeOff `json:"trade_offs,omitempty"`
	Notes     []string   `json:"notes,omitempty"`
	// Seconds is the run's wall time.
	Seconds float64 `json:"seconds"`
}

// Machine describes where the run happened.
type Machine struct {
	GOOS      string `json:"goos"`
	GOARCH    string `json:"goarch"`
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpu_model,omitempty"`
	Kernel    string `json:"kernel,omitempty"`
	Hostname  string `json:"hostname,omitempty"`
	GoVersion string `json:"go_version"`
}

// Result is one system on one comparison: every repetition's time and
// their summary, in seconds.
type Result struct {
	Scenario string  `json:"scenario"`
	Size     int64   `json:"size"`
	Interval float64 `json:"interval_s,omitempty"` // async: the arrival interval
	System   string  `json:"system"`
	Status   string  `json:"status"`
	Reason   string  `json:"reason,omitempty"`
	// Times are the repetitions in the order they ran (ours, naive, and a
	// peer of an interleaved run, launched once per repetition); a peer
	// of a sequential run reports only its summary.
	Times []float64 `json:"times_s,omitempty"`
	// Order says when each of Times ran (same index): its repetition and
	// its place in the whole run, so that a reader can check which reps of
	// other systems ran between two of this one's.
	Order  []RepOrder `json:"order,omitempty"`
	Reps   int        `json:"reps"`
	Median float64    `json:"median_s,omitempty"`
	Min    float64    `json:"min_s,omitempty"`
	Max    float64    `json:"max_s,omitempty"`
	Ideal  float64    `json:"ideal_s"`
	// CPU is each repetition's CPU seconds, all hosts' processes
	// together, by their own accounting (ours and naive on the testbed);
	// CPUMedian is their median, or the median a peer reports.
	CPU       []float64 `json:"cpu_s,omitempty"`
	CPUMedian float64   `json:"cpu_median_s,omitempty"`
	// Load is the machine's one-minute load average as each recorded
	// repetition (or a sequential peer's one launch) ended, LoadMedian
	// their median: what else ran beside this system (on
	// Report.Machine.CPUs CPUs). LoadDiffers says when two systems'
	// medians do not compare.
	Load       []float64 `json:"load_1m,omitempty"`
	LoadMedian float64   `json:"load_1m_median,omitempty"`
	// Timing is how the repetitions were timed: TimingScheduled (from a
	// common scheduled start, the first participant's start to the last
	// one's end: ours, the floors and the MPI and Gloo peers),
	// TimingBarrier (each rank from its own barrier exit, the slowest:
	// MPI and Gloo before they were timed like ours) or TimingClient
	// (Dask). Reports written before it existed have none:
	// TimingMethod says which their system used.
	Timing string `json:"timing,omitempty"`
	// Ratio is this median over ours in the same comparison. For a
	// failure variant too: over ours failure-free, the cost model's
	// shape without a failure, whatever the variant's own shape. A
	// system timed otherwise than ours has none when ours's median is
	// under TimingMatters (CompareTiming): the methods' difference is of
	// the order of the figures there.
	Ratio float64 `json:"ratio_to_ours,omitempty"`
	// FailureFree names a failure variant's failure-free system (ours
	// for ours-failure, d=2 for d=2-failure): the same shape without the
	// kill, whose median placed the kill at 50 %. RatioToFree is this
	// median over that one's: what the repair cost that shape.
	FailureFree string  `json:"failure_free,omitempty"`
	RatioToFree float64 `json:"ratio_to_failure_free,omitempty"`
	// Extra holds per-scenario details: the degree the cost model chose,
	// async's total time, when the failure was injected, a broadcast's
	// slowest receiver from its own start. Each is the median over the
	// recorded repetitions (ExtraReps has every one), except killed, a
	// count of the repetitions whose victim was killed.
	Extra map[string]float64 `json:"extra,omitempty"`
	// ExtraReps holds each Extra's value in every recorded repetition,
	// in the order of TimesS.
	ExtraReps map[string][]float64 `json:"extra_reps,omitempty"`

	group group
}

// RepOrder places one recorded repetition in its run.
type RepOrder struct {
	// Rep is the measured repetition, from 1 (warm-ups are not recorded).
	Rep int `json:"rep"`
	// Seq is the step's number in the run, from 1, counting every
	// measurement as it starts (warm-ups, a profile's unrecorded fill and
	// every peer launch, a best peer's sweep included), over all
	// comparisons and systems.
	Seq int `json:"seq"`
}

func (r *Result) ok() bool { return r.Status == StatusOK }

func (r *Result) setTimes(ds []time.Duration) {
	r.Times = r.Times[:0]
	for _, d := range ds {
		r.Times = append(r.Times, d.Seconds())
	}
	st := Summarize(ds)
	r.Reps, r.Median, r.Min, r.Max = st.N, st.Median.Seconds(), st.Min.Seconds(), st.Max.Seconds()
}

func machine() Machine {
	m := Machine{GOOS: runtime.GOOS, GOARCH: runtime.GOARCH, CPUs: runtime.NumCPU(), GoVersion: runtime.Version()}
	m.Hostname, _ = os.Hostname()
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPUModel = strings.TrimSpace(v)
				break
			}
		}
	}
	return m
}

// WriteJSON writes the report to path.
func (r *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ReadJSON reads a report written by WriteJSON.
func ReadJSON(path string) (*Report, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Report
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

// secs formats seconds with 4 significant digits and no exponent:
// "4.915s", "0.8484s", "0.000055s".
func secs(s float64) string {
	if s >= 1 || s <= 0 {
		return strconv.FormatFloat(s, 'f', max(0, 3-int(math.Floor(math.Log10(math.Max(s, 1))))), 64) + "s"
	}
	dec := min(7, 3-int(math.Floor(math.Log10(s))))
	t := strings.TrimRight(strconv.FormatFloat(s, 'f', dec, 64), "0")
	return strings.TrimSuffix(t, ".") + "s"
}

// WriteTable prints the results as a table.
func (r *Report) WriteTable(w io.Writer) {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tsize\tsystem\tmedian\tmin\tmax\tideal\t×ours\tcpu/op\tmachine/op\tload\tnote")
	for _, res := range r.Results {
		name := res.Scenario
		if res.Interval > 0 || res.Scenario == "async" {
			name += " @" + secs(res.Interval)
		}
		if !res.ok() && res.Reps == 0 {
			reason, _, _ := strings.Cut(res.Reason, "\n")
			fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\t-\t%s\t\t\t\t\t%s: %s\n", name, SizeName(res.Size), res.System, secs(res.Ideal), res.Status, reason)
			continue
		}
		ratio := ""
		if res.Ratio > 0 {
			ratio = strconv.FormatFloat(res.Ratio, 'f', 2, 64) + "x"
		}
		note := ""
		if d := res.Extra["degree"]; d > 0 {
			note = fmt.Sprintf("degree %d", int(d))
			switch {
			case res.Extra["chain_leaf"] == 1 && d == 1:
				note = "chain-leaf: one chain (S/(B·L) >= N)"
			case res.Extra["chain_leaf"] == 1:
				note = "chain-leaf: binary top, chains below"
			case res.Extra["sliced"] == 1 && res.Extra["ring_gather"] == 1:
				note = "sliced: reduce-scatter, all-gather around the ring"
			case res.Extra["sliced"] == 1:
				note = "sliced: reduce-scatter, all-gather from the roots"
			}
		}
		if a, ok := res.Extra["algorithm"]; ok {
			note = fmt.Sprintf("algorithm %d", int(a))
		}
		if k, ok := res.Extra["killed"]; ok {
			note = fmt.Sprintf("killed in %d of %d reps at %s", int(k), res.Reps, secs(res.Extra["kill_at_s"]))
		}
		if differs, refuse := r.timingDiffers(res); differs != "" {
			if refuse {
				differs += ": not compared with ours at this size"
			}
			if note != "" {
				note += "; "
			}
			note += differs
		}
		if !res.ok() { // some repetitions failed: the others' times
			reason, _, _ := strings.Cut(res.Reason, "\n")
			note = res.Status + ": " + reason
		}
		cpu := ""
		if res.CPUMedian > 0 {
			cpu = secs(res.CPUMedian)
		}
		machine := ""
		if m, ok := res.Extra["machine_busy_s"]; ok {
			machine = secs(m)
		}
		load := ""
		if len(res.Load) > 0 {
			load = strconv.FormatFloat(res.LoadMedian, 'f', 2, 64)
			if r.loadDiffers(res) {
				load += "*"
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, SizeName(res.Size), res.System,
			secs(res.Median), secs(res.Min), secs(res.Max), secs(res.Ideal), ratio, cpu, machine, load, note)
	}
	_ = tw.Flush()
	fmt.Fprintf(w, "load: the one-minute load average as each rep ended, median, on %d CPUs", r.Machine.CPUs)
	if r.Load.Procs > 0 {
		fmt.Fprintf(w, ", with %d CPU-bound processes beside the cluster (--load)", r.Load.Procs)
	}
	fmt.Fprintln(w, "; * marks a system whose load differs from ours's by a CPU and a quarter or more: its times do not compare with ours's")
	if slices.ContainsFunc(r.Results, func(res Result) bool { _, ok := res.Extra["machine_busy_s"]; return ok }) {
		fmt.Fprintln(w, "cpu/op: the system's processes' CPU per operation, median; machine/op: the whole machine's busy CPU over it (the kernel's network work wherever it ran), median, in 10 ms ticks")
	}
	if r.Warmup == 0 {
		fmt.Fprintln(w, "no warm-up: every recorded rep is an operation as an application runs it (--warmup N adds unrecorded ones)")
	}
	r.writeTradeOffs(w)
}

// ResultLines are the machine-readable summary: one line per comparison,
// `RESULT scenario=broadcast nodes=8 size=33554432 ours=1.234s
// ideal=0.671s naive=...s mpi-default=...s ... cpu=ours:0.31s,...
// cpus=2 load=1.52` (a system that did not run shows skipped or failed;
// cpu is each system's median CPU per operation, cpus the machine's,
// load the median one-minute load average over the comparison's reps,
// and load-differs=mpi-best:3.10 names a system that ran under a load
// that differs from ours's, LoadDiffers; timing-differs=mpi-best:barrier
// one timed otherwise than ours, CompareTiming); with ours-tls, last, ours-tls/ours=1.050x;
// in the failure scenario, last, each failure variant over its
// failure-free system: ours-failure/ours=1.510x d=2-failure/d=2=1.200x.
func (r *Report) ResultLines() []string {
	var lines []string
	var cur []Result
	flush := func() {
		if len(cur) == 0 {
			return
		}
		first := cur[0]
		var b strings.Builder
		fmt.Fprintf(&b, "RESULT scenario=%s nodes=%d size=%d", first.Scenario, r.Nodes, first.Size)
		if first.Scenario == "async" {
			fmt.Fprintf(&b, " interval=%s", secs(first.Interval))
		}
		val := func(res Result) string {
			if !res.ok() {
				return res.Status
			}
			return secs(res.Median)
		}
		for _, res := range cur {
			if res.System == SysOurs {
				fmt.Fprintf(&b, " ours=%s ideal=%s", val(res), secs(res.Ideal))
			}
		}
		for _, res := range cur {
			if res.System != SysOurs {
				fmt.Fprintf(&b, " %s=%s", res.System, val(res))
			}
		}
		// What each system's operation cost in CPU, and what else ran.
		var cpu, differs, timed []string
		var loads []float64
		for _, res := range cur {
			if res.CPUMedian > 0 {
				cpu = append(cpu, res.System+":"+secs(res.CPUMedian))
			}
			loads = append(loads, res.Load...)
			if r.loadDiffers(res) {
				differs = append(differs, res.System+":"+strconv.FormatFloat(res.LoadMedian, 'f', 2, 64))
			}
			if d, _ := r.timingDiffers(res); d != "" {
				timed = append(timed, res.System+":"+res.TimingMethod())
			}
		}
		if len(cpu) > 0 {
			fmt.Fprintf(&b, " cpu=%s", strings.Join(cpu, ","))
		}
		fmt.Fprintf(&b, " cpus=%d", r.Machine.CPUs)
		if len(loads) > 0 {
			fmt.Fprintf(&b, " load=%s", strconv.FormatFloat(medianOf(loads), 'f', 2, 64))
		}
		if len(differs) > 0 {
			fmt.Fprintf(&b, " load-differs=%s", strings.Join(differs, ","))
		}
		if len(timed) > 0 {
			fmt.Fprintf(&b, " timing-differs=%s", strings.Join(timed, ","))
		}
		// TLS's cost at a glance: ours-tls's median over ours's.
		for _, res := range cur {
			if res.System == SysOursTLS && res.ok() && res.Ratio > 0 {
				fmt.Fprintf(&b, " %s/%s=%sx", SysOursTLS, SysOurs, strconv.FormatFloat(res.Ratio, 'f', 3, 64))
			}
		}
		// The repair's cost per shape.
		for _, res := range cur {
			if res.ok() && res.RatioToFree > 0 {
				fmt.Fprintf(&b, " %s/%s=%sx", res.System, res.FailureFree, strconv.FormatFloat(res.RatioToFree, 'f', 3, 64))
			}
		}
		lines = append(lines, b.String())
		cur = nil
	}
	for _, res := range r.Results {
		if len(cur) > 0 && (cur[0].Scenario != res.Scenario || cur[0].Size != res.Size || cur[0].Interval != res.Interval) {
			flush()
		}
		cur = append(cur, res)
	}
	flush()
	return lines
}

// loadDiffers says whether res ran under a load that differs from ours's
// in the same comparison (LoadDiffers).
func (r *Report) loadDiffers(res Result) bool {
	if res.System == SysOurs || len(res.Load) == 0 {
		return false
	}
	for _, o := range r.Results {
		if o.System == SysOurs && sameComparison(o, res) && len(o.Load) > 0 {
			return LoadDiffers(o.LoadMedian, res.LoadMedian, r.Machine.CPUs)
		}
	}
	return false
}

// timingDiffers says whether res was timed otherwise than ours in the
// same comparison, and whether the two must not be compared at all
// (CompareTiming).
func (r *Report) timingDiffers(res Result) (differs string, refuse bool) {
	if res.System == SysOurs || res.Median <= 0 {
		return "", false // ours, or a system with no time to compare
	}
	for _, o := range r.Results {
		if o.System == SysOurs && sameComparison(o, res) && o.ok() {
			return CompareTiming(o, res)
		}
	}
	return "", false
}

// sameComparison says whether a and b are measurements of one comparison
// (scenario, size, interval).
func sameComparison(a, b Result) bool {
	return a.Scenario == b.Scenario && a.Size == b.Size && a.Interval == b.Interval
}

// ratios fills Ratio, each median over ours's in the same comparison,
// RatioToFree, a failure variant's over its failure-free system's, and
// the trade-offs.
func (r *Report) ratios() {
	for i := range r.Results {
		res := &r.Results[i]
		res.Ratio, res.RatioToFree = 0, 0
		if !res.ok() {
			continue
		}
		for _, o := range r.Results {
			if !o.ok() || o.Median <= 0 || !sameComparison(o, *res) {
				continue
			}
			if o.System == SysOurs && res.System != SysOurs {
				if _, refuse := CompareTiming(o, *res); !refuse {
					res.Ratio = res.Median / o.Median
				}
			}
			if res.FailureFree != "" && o.System == res.FailureFree {
				res.RatioToFree = res.Median / o.Median
			}
		}
	}
	r.TradeOffs = tradeOffs(r.Results)
}

// TradeOff is one shape of the failure scenario at both ends (issue
// #15): its failure-free median, its median with host 1 killed at 50 %
// of that, and both against the cost model's shape failure-free. A shape
// that repairs cheaply but is slower without a failure shows a low
// FailureOverFree and a high FreeOverChosen. Medians in seconds.
type TradeOff struct {
	Scenario string `json:"scenario"`
	Size     int64  `json:"size"`
	// System is the failure-free system (ours: the cost model's shape;
	// d=2; chain-leaf), FailureSystem its failure variant.
	System        string `json:"system"`
	FailureSystem string `json:"failure_system"`
	// Degree is the tree degree the failure-free reduce ran with (its
	// last repetition; chain-leaf: its binary top's), Shape its shape
	// (d-ary, chain-leaf, inline); neither for a broadcast.
	Degree int    `json:"degree,omitempty"`
	Shape  string `json:"shape,omitempty"`
	// Status is ok when both ends are; else the first one's status and
	// reason ("n/a: a broadcast has no reduce tree ..." for a forced
	// degree in failure-broadcast). Medians of a failed result are of its
	// good repetitions.
	Status        string  `json:"status"`
	FreeMedian    float64 `json:"failure_free_median_s,omitempty"`
	FailureMedian float64 `json:"failure_median_s,omitempty"`
	// KillAt is when the victim was killed: half of FreeMedian.
	KillAt float64 `json:"kill_at_s,omitempty"`
	// FailureOverFree is FailureMedian / FreeMedian, the repair's cost;
	// FreeOverChosen and FailureOverChosen are FreeMedian and
	// FailureMedian over ours failure-free (the cost model's shape).
	FailureOverFree   float64 `json:"failure_over_free,omitempty"`
	FreeOverChosen    float64 `json:"failure_free_over_chosen,omitempty"`
	FailureOverChosen float64 `json:"failure_over_chosen,omitempty"`
}

// tradeOffs pairs every failure variant with its failure-free system, in
// the results' order.
func tradeOffs(results []Result) []TradeOff {
	var out []TradeOff
	for _, k := range results {
		if k.FailureFree == "" {
			continue
		}
		i := slices.IndexFunc(results, func(f Result) bool { return f.System == k.FailureFree && sameComparison(f, k) })
		if i < 0 {
			continue
		}
		f := results[i]
		t := TradeOff{Scenario: k.Scenario, Size: k.Size, System: f.System, FailureSystem: k.System, Status: StatusOK,
			KillAt: k.Extra["kill_at_s"]}
		for _, res := range []Result{f, k} {
			if !res.ok() {
				t.Status = res.Status + ": " + res.System + ": " + res.Reason
				if res.Status == StatusSkipped {
					t.Status = res.Reason
				}
				break
			}
		}
		if d, ok := f.Extra["degree"]; ok {
			t.Degree, t.Shape = int(d), reduction.ShapeDAry
			switch {
			case d == 0:
				t.Shape = reduction.ShapeInline
			case f.Extra["chain_leaf"] == 1:
				t.Shape = reduction.ShapeChainLeaf
			}
		}
		if f.Median > 0 && k.Median > 0 && f.Status != StatusSkipped && k.Status != StatusSkipped {
			t.FreeMedian, t.FailureMedian = f.Median, k.Median
			t.FailureOverFree = k.Median / f.Median
			for _, o := range results {
				if o.System == SysOurs && o.ok() && o.Median > 0 && sameComparison(o, k) {
					t.FreeOverChosen, t.FailureOverChosen = f.Median/o.Median, k.Median/o.Median
				}
			}
		}
		out = append(out, t)
	}
	return out
}

// writeTradeOffs prints the trade-offs as a second table.
func (r *Report) writeTradeOffs(w io.Writer) {
	if len(r.TradeOffs) == 0 {
		return
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "trade-off: each shape failure-free, and with host 1 killed at 50 % of that shape's own failure-free median;")
	fmt.Fprintln(w, "chosen = ours failure-free (the cost model's shape)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario	size	shape	tree	failure-free	failure	failure/free	free/chosen	failure/chosen	note")
	x := func(v float64) string {
		if v <= 0 {
			return "-"
		}
		return strconv.FormatFloat(v, 'f', 2, 64) + "x"
	}
	s := func(v float64) string {
		if v <= 0 {
			return "-"
		}
		return secs(v)
	}
	// Shapes with no counterpart (forced degrees in a broadcast) are one
	// line each comparison, after the table.
	type naLine struct{ where, why string }
	var na []naLine
	naSystems := map[naLine][]string{}
	for _, t := range r.TradeOffs {
		if strings.HasPrefix(t.Status, "n/a") {
			l := naLine{t.Scenario + " " + SizeName(t.Size), t.Status}
			if naSystems[l] == nil {
				na = append(na, l)
			}
			naSystems[l] = append(naSystems[l], t.System)
			continue
		}
		tree := "-"
		switch t.Shape {
		case reduction.ShapeDAry:
			tree = fmt.Sprintf("degree %d", t.Degree)
		case reduction.ShapeChainLeaf:
			tree = fmt.Sprintf("chain-leaf, top %d", t.Degree)
		case reduction.ShapeInline:
			tree = "inline"
		}
		note := ""
		if t.KillAt > 0 {
			note = "killed at " + secs(t.KillAt)
		}
		if t.Status != StatusOK {
			note, _, _ = strings.Cut(t.Status, "\n")
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.Scenario, SizeName(t.Size), t.System, tree,
			s(t.FreeMedian), s(t.FailureMedian), x(t.FailureOverFree), x(t.FreeOverChosen), x(t.FailureOverChosen), note)
	}
	_ = tw.Flush()
	for _, l := range na {
		fmt.Fprintf(w, "%s: %s %s\n", l.where, strings.Join(naSystems[l], ", "), l.why)
	}
}
