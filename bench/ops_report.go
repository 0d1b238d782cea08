package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// OpsReport is what `hoplite bench ops` measured.
type OpsReport struct {
	Command    []string      `json:"command,omitempty"`
	Phase      time.Duration `json:"phase_ns"`
	MaxOps     int           `json:"max_ops"`
	CPUs       int           `json:"cpus"`
	GOMAXPROCS int           `json:"gomaxprocs"`
	Rows       []OpsRow      `json:"rows"`
}

// RayFigure is one of Ray's published `ray microbenchmark` results.
type RayFigure struct {
	Name      string
	OpsPerSec float64
	What      string
}

// RaySource is where RayFigures come from: Ray's own release figures,
// measured on Ray's release-test machine, not on this one.
const RaySource = "ray-project/ray release/perf_metrics/microbenchmark.json at commit 08444c4cf99b7584c60525e67a370e9382e13a81 " +
	"(python/ray/_private/ray_perf.py: ray.put(0) and ray.get of one such object, on one node)"

// RayFigures are the `ray microbenchmark` rows nearest to small-object
// Puts and Gets, as published (RaySource).
var RayFigures = []RayFigure{
	{"single_client_get_calls_Plasma_Store", 10620.4, "1 caller, ray.get of one tiny local object, again and again"},
	{"single_client_put_calls_Plasma_Store", 5173.3, "1 caller, ray.put(0)"},
	{"multi_client_put_calls_Plasma_Store", 16526.4, "10 tasks x ray.put(0), one node"},
}

// us formats d in microseconds.
func us(d time.Duration) string { return fmt.Sprintf("%.1fµs", float64(d)/float64(time.Microsecond)) }

// WriteTable prints the rows, then Ray's published figures.
func (r *OpsReport) WriteTable(w io.Writer) {
	fmt.Fprintf(w, "hoplite bench ops: %v per phase (at most %d operations), %d CPUs, GOMAXPROCS %d\n",
		r.Phase, r.MaxOps, r.CPUs, r.GOMAXPROCS)
	fmt.Fprintln(w, "callers on member 0; every object's directory shard on member 1; ping: the data plane's bare round trip 0 -> 1, measured just before each group")
	fmt.Fprintln(w, "ops/s: member 0's callers' operations per second; ops/cpu-s: per second of CPU, both members' (what one core sustains); cpu/op: both members' CPU")
	fmt.Fprintln(w, "get-after-put: Put on member 1, then the Get on member 0 timed alone; its ops/s and cpu/op count the pair")
	fmt.Fprintln(w, "in-process, the data plane is in memory: its ping is a call within the process, no network round trip (processes: TCP on loopback)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "mode\top\tsize\tcallers\tops\tops/s\tops/cpu-s\tp50\tp99\tcpu/op\tp50/ping\t")
	for _, row := range r.Rows {
		ratio := "-"
		if v := row.P50OverPing(); v > 0 {
			ratio = fmt.Sprintf("%.2f", v)
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%d\t%.0f\t%.0f\t%s\t%s\t%s\t%s\t\n", row.Mode, row.Op, sizeOrDash(row.Size), row.Callers, row.Ops,
			row.OpsPerSecond(), row.OpsPerCPUSecond(), us(row.P50), us(row.P99), us(row.CPUPerOp()), ratio)
	}
	tw.Flush()
	fmt.Fprintln(w, "Ray's published `ray microbenchmark` figures (another machine, not measured here; "+RaySource+"):")
	for _, f := range RayFigures {
		fmt.Fprintf(w, "  %-40s %8.0f/s  %s\n", f.Name, f.OpsPerSec, f.What)
	}
}

// ResultLines are one line per row, for scripts:
//
//	RESULT ops mode=in-process op=get size=1024 callers=1 ops=... elapsed_ns=... ops_per_s=... p50_ns=... ...
func (r *OpsReport) ResultLines() []string {
	var out []string
	for _, row := range r.Rows {
		out = append(out, strings.Join([]string{"RESULT ops",
			"mode=" + row.Mode, "op=" + row.Op, fmt.Sprintf("size=%d", row.Size), fmt.Sprintf("callers=%d", row.Callers),
			fmt.Sprintf("ops=%d", row.Ops), fmt.Sprintf("elapsed_ns=%d", row.Elapsed.Nanoseconds()),
			fmt.Sprintf("ops_per_s=%.3f", row.OpsPerSecond()), fmt.Sprintf("ops_per_cpu_s=%.3f", row.OpsPerCPUSecond()),
			fmt.Sprintf("p50_ns=%d", row.P50.Nanoseconds()), fmt.Sprintf("p99_ns=%d", row.P99.Nanoseconds()),
			fmt.Sprintf("cpu_per_op_ns=%d", row.CPUPerOp().Nanoseconds()), fmt.Sprintf("ping_p50_ns=%d", row.PingP50.Nanoseconds()),
			fmt.Sprintf("p50_over_ping=%.4f", row.P50OverPing()),
		}, " "))
	}
	return out
}

// WriteJSON writes the report to path.
func (r *OpsReport) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ReadOpsJSON reads a report WriteJSON wrote.
func ReadOpsJSON(path string) (*OpsReport, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r OpsReport
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return &r, nil
}

// OpsMarkdown is the markdown table of the rows of one or more runs of
// the same `hoplite bench ops` (its repetitions): a line per size,
// callers and operation in the first run's order, and per mode the
// median of the runs' p50 with their least and greatest, the median p50
// over the ping's (×), and the median CPU per operation.
func OpsMarkdown(runs []*OpsReport) string {
	type key struct {
		size    int64
		callers int
		op      string
	}
	var order []key
	var modes []string
	rows := map[key]map[string][]OpsRow{}
	for _, r := range runs {
		for _, row := range r.Rows {
			k := key{row.Size, row.Callers, row.Op}
			if rows[k] == nil {
				order = append(order, k)
				rows[k] = map[string][]OpsRow{}
			}
			if !slices.Contains(modes, row.Mode) {
				modes = append(modes, row.Mode)
			}
			rows[k][row.Mode] = append(rows[k][row.Mode], row)
		}
	}
	median := func(v []float64) float64 {
		s := slices.Clone(v)
		slices.Sort(s)
		if len(s)%2 == 1 {
			return s[len(s)/2]
		}
		return (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	var b strings.Builder
	b.WriteString("| op | size | callers |")
	sep := "| --- | --- | ---: |"
	for _, m := range modes {
		fmt.Fprintf(&b, " %s: p50 (min–max), ×ping | cpu/op |", m)
		sep += " ---: | ---: |"
	}
	b.WriteString("\n" + sep + "\n")
	for _, k := range order {
		fmt.Fprintf(&b, "| %s | %s | %d |", k.op, sizeOrDash(k.size), k.callers)
		for _, m := range modes {
			rs := rows[k][m]
			if len(rs) == 0 {
				b.WriteString(" - | - |")
				continue
			}
			var p50, ratio, cpu []float64
			for _, row := range rs {
				p50 = append(p50, float64(row.P50)/float64(time.Microsecond))
				ratio = append(ratio, row.P50OverPing())
				cpu = append(cpu, float64(row.CPUPerOp())/float64(time.Microsecond))
			}
			fmt.Fprintf(&b, " %.1f µs (%.1f–%.1f)", median(p50), slices.Min(p50), slices.Max(p50))
			if k.op != OpPing {
				fmt.Fprintf(&b, ", %.2f×", median(ratio))
			}
			fmt.Fprintf(&b, " | %.1f µs |", median(cpu))
		}
		b.WriteString("\n")
	}
	return b.String()
}
