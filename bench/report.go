package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
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
	BandwidthBits float64  `json:"bandwidth_bits_per_s"`
	Bandwidth     string   `json:"bandwidth"`
	Reps          int      `json:"reps"`
	Sizes         []int64  `json:"sizes"`
	Peers         []string `json:"peers"`
	Results       []Result `json:"results"`
	Notes         []string `json:"notes,omitempty"`
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
	// Times are the repetitions in the order they ran (ours, naive); a
	// peer reports only its summary.
	Times  []float64 `json:"times_s,omitempty"`
	Reps   int       `json:"reps"`
	Median float64   `json:"median_s,omitempty"`
	Min    float64   `json:"min_s,omitempty"`
	Max    float64   `json:"max_s,omitempty"`
	Ideal  float64   `json:"ideal_s"`
	// CPU is each repetition's CPU seconds, all hosts' processes
	// together, by their own accounting (ours and naive on the testbed);
	// CPUMedian is their median, or the median a peer reports.
	CPU       []float64 `json:"cpu_s,omitempty"`
	CPUMedian float64   `json:"cpu_median_s,omitempty"`
	// Ratio is this median over ours in the same comparison (for
	// ours-failure: over the failure-free time).
	Ratio float64 `json:"ratio_to_ours,omitempty"`
	// Extra holds per-scenario details: the degree the cost model chose,
	// async's total time, when the failure was injected.
	Extra map[string]float64 `json:"extra,omitempty"`

	group group
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
	fmt.Fprintln(tw, "scenario\tsize\tsystem\tmedian\tmin\tmax\tideal\t×ours\tcpu/op\tnote")
	for _, res := range r.Results {
		name := res.Scenario
		if res.Interval > 0 || res.Scenario == "async" {
			name += " @" + secs(res.Interval)
		}
		if !res.ok() && res.Reps == 0 {
			reason, _, _ := strings.Cut(res.Reason, "\n")
			fmt.Fprintf(tw, "%s\t%s\t%s\t-\t-\t-\t%s\t\t\t%s: %s\n", name, SizeName(res.Size), res.System, secs(res.Ideal), res.Status, reason)
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
			case res.Extra["sliced"] == 1:
				note = "sliced: reduce-scatter, all-gather"
			}
		}
		if a, ok := res.Extra["algorithm"]; ok {
			note = fmt.Sprintf("algorithm %d", int(a))
		}
		if k, ok := res.Extra["killed"]; ok {
			note = fmt.Sprintf("killed in %d of %d reps at %s", int(k), res.Reps, secs(res.Extra["kill_at_s"]))
		}
		if !res.ok() { // some repetitions failed: the others' times
			reason, _, _ := strings.Cut(res.Reason, "\n")
			note = res.Status + ": " + reason
		}
		cpu := ""
		if res.CPUMedian > 0 {
			cpu = secs(res.CPUMedian)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", name, SizeName(res.Size), res.System,
			secs(res.Median), secs(res.Min), secs(res.Max), secs(res.Ideal), ratio, cpu, note)
	}
	_ = tw.Flush()
}

// ResultLines are the machine-readable summary: one line per comparison,
// `RESULT scenario=broadcast nodes=8 size=33554432 ours=1.234s
// ideal=0.671s naive=...s mpi-default=...s ...` (a system that did not
// run shows skipped or failed); with ours-tls, last, ours-tls/ours=1.050x.
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
		// TLS's cost at a glance: ours-tls's median over ours's.
		for _, res := range cur {
			if res.System == SysOursTLS && res.ok() && res.Ratio > 0 {
				fmt.Fprintf(&b, " %s/%s=%sx", SysOursTLS, SysOurs, strconv.FormatFloat(res.Ratio, 'f', 3, 64))
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

// ratios fills Ratio: each median over ours's in the same comparison.
func (r *Report) ratios() {
	for i := range r.Results {
		res := &r.Results[i]
		res.Ratio = 0
		if !res.ok() || res.System == SysOurs {
			continue
		}
		for _, o := range r.Results {
			if o.System == SysOurs && o.ok() && o.Scenario == res.Scenario && o.Size == res.Size && o.Interval == res.Interval && o.Median > 0 {
				res.Ratio = res.Median / o.Median
			}
		}
	}
}
