package main

import (
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/hoplite-go/hoplite/bench"
)

// The benchmark tables and figures of README.md and docs/ are generated
// from the reports in bench/results by `hoplite bench report`: nobody
// copies a figure by hand. bench/results/tables.json names each table's
// rows (a report file, a scenario and a size), all from one machine; a
// document holds a table between the markers below, a figure in prose
// after a marker of its own (report_figure.go), and
// TestBenchTablesAreGenerated fails when one differs from what the
// command makes of the files.

const reportUsage = `usage: hoplite bench report [--results DIR] [--update] [FILE.md ...]

Makes the benchmark tables (markdown) from the JSON reports in DIR
(default bench/results) as DIR/tables.json lists them, one machine's
runs to a table. With no FILE it prints every table. With FILEs it
checks the tables between the markers

  <!-- hoplite bench report NAME -->
  <!-- end hoplite bench report -->

and the figure after each marker

  <!-- hoplite bench figure FILE SCENARIO SIZE SYSTEM -->        (its median)
  <!-- hoplite bench figure FILE SCENARIO SIZE SYSTEM/SYSTEM -->  (their ratio)

in each FILE (SYSTEM:min, SYSTEM:max and SYSTEM:cpu name a system's
other statistics), and the table of hoplite bench ops reports between

  <!-- hoplite bench ops REPORT.json [REPORT.json ...] -->
  <!-- end hoplite bench ops -->

(the medians of the reports' rows), exiting 1 if one differs; --update
rewrites them instead.

flags:
`

const (
	resultsDefault = "bench/results"
	reportBegin    = "<!-- hoplite bench report "
	reportEnd      = "<!-- end hoplite bench report -->"
)

// reportManifest is bench/results/tables.json.
type reportManifest struct {
	Tables []reportTable `json:"tables"`
}

type reportTable struct {
	Name string      `json:"name"`
	Rows []reportRow `json:"rows"`
	// Brief leaves out the machine's line and the list of every run's
	// command (each row still links its report, which holds them): for
	// the README, which says the machine in its own words and links
	// docs/benchmarks.md for the rest.
	Brief bool `json:"brief,omitempty"`
}

type reportRow struct {
	Label    string `json:"label"`
	File     string `json:"file"`
	Scenario string `json:"scenario"`
	Size     string `json:"size"`
}

func reportCommand(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench report", flag.ContinueOnError)
	fs.SetOutput(flagOutput(stderr, "bench report"))
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), reportUsage)
		fs.PrintDefaults()
	}
	results := fs.String("results", resultsDefault, "the directory of the reports and tables.json")
	update := fs.Bool("update", false, "rewrite the tables in the files instead of checking them")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *update && fs.NArg() == 0 {
		return usageError{"--update rewrites the tables of the FILE.md arguments: name at least one"}
	}
	m, err := readManifest(*results)
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("%w (run it in the source tree's root, or pass --results DIR)", err)
	}
	if err != nil {
		return err
	}
	if fs.NArg() == 0 {
		for _, t := range m.Tables {
			s, err := renderTable(*results, t, ".")
			if err != nil {
				return err
			}
			fmt.Fprintf(stdout, "%s%s -->\n%s%s\n\n", reportBegin, t.Name, s, reportEnd)
		}
		return nil
	}
	var stale []string
	for _, doc := range fs.Args() {
		old, err := os.ReadFile(doc)
		if err != nil {
			return err
		}
		now, err := regenerate(string(old), *results, filepath.Dir(doc), m)
		if err != nil {
			return fmt.Errorf("%s: %w", doc, err)
		}
		switch {
		case now == string(old):
		case *update:
			if err := os.WriteFile(doc, []byte(now), 0o644); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "updated %s\n", doc)
		default:
			stale = append(stale, doc)
		}
	}
	if len(stale) > 0 {
		// The hint runs as printed: the same results, the same files.
		hint := []string{"hoplite", "bench", "report"}
		if *results != resultsDefault {
			hint = append(hint, "--results", *results)
		}
		hint = append(append(hint, "--update"), stale...)
		for i, a := range hint {
			hint[i] = shellQuote(a)
		}
		return fmt.Errorf("tables differ from the reports in %s (%s)", strings.Join(stale, ", "), strings.Join(hint, " "))
	}
	return nil
}

func readManifest(dir string) (*reportManifest, error) {
	b, err := os.ReadFile(filepath.Join(dir, "tables.json"))
	if err != nil {
		return nil, err
	}
	var m reportManifest
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, "tables.json"), err)
	}
	return &m, nil
}

// regenerate replaces every marked table and figure in doc (a document
// in docDir) with the one the reports make.
func regenerate(doc, results, docDir string, m *reportManifest) (string, error) {
	doc, err := regenerateTables(doc, results, docDir, m)
	if err != nil {
		return "", err
	}
	if doc, err = regenerateOps(doc, results); err != nil {
		return "", err
	}
	return regenerateFigures(doc, results)
}

func regenerateTables(doc, results, docDir string, m *reportManifest) (string, error) {
	var out strings.Builder
	for {
		i := strings.Index(doc, reportBegin)
		if i < 0 {
			out.WriteString(doc)
			return out.String(), nil
		}
		nameEnd := strings.Index(doc[i:], " -->")
		if nameEnd < 0 {
			return "", errors.New("a table marker without its end")
		}
		name := doc[i+len(reportBegin) : i+nameEnd]
		j := strings.Index(doc[i:], reportEnd)
		if j < 0 {
			return "", fmt.Errorf("table %q: no %s", name, reportEnd)
		}
		k := slices.IndexFunc(m.Tables, func(t reportTable) bool { return t.Name == name })
		if k < 0 {
			return "", fmt.Errorf("table %q is not in tables.json", name)
		}
		rel, err := filepath.Rel(docDir, results)
		if err != nil {
			return "", err
		}
		s, err := renderTable(results, m.Tables[k], rel)
		if err != nil {
			return "", err
		}
		out.WriteString(doc[:i+nameEnd+len(" -->")] + "\n" + s)
		doc = doc[i+j:]
		// The end marker stays in doc: the next round copies it.
		out.WriteString(doc[:len(reportEnd)])
		doc = doc[len(reportEnd):]
	}
}

// peerSystem: a system the tables compare ours with (not one of ours's
// variants or a floor).
func peerSystem(s string) bool {
	return s != "ours" && !strings.HasPrefix(s, "ours-") && !strings.HasSuffix(s, "-rtt") && s != "reduce-bcast" && !strings.HasPrefix(s, "d=")
}

// bestPeer is the fastest of peers timed as ours was, or, if none was,
// the fastest of them all (nil if there are none).
func bestPeer(ours bench.Result, peers []*bench.Result) *bench.Result {
	var best, bestAlike *bench.Result
	for _, p := range peers {
		if best == nil || p.Median < best.Median {
			best = p
		}
		if differs, _ := bench.CompareTiming(ours, *p); differs == "" && (bestAlike == nil || p.Median < bestAlike.Median) {
			bestAlike = p
		}
	}
	if bestAlike != nil {
		return bestAlike
	}
	return best
}

// renderTable makes one table; link is the results directory as the
// document links it.
func renderTable(results string, t reportTable, link string) (string, error) {
	var b strings.Builder
	var files []string
	var machine string
	for i, row := range t.Rows {
		r, err := bench.ReadJSON(filepath.Join(results, row.File))
		if err != nil {
			return "", err
		}
		// Figures of two machines in one table read as one comparison;
		// they are not (the same build's times differ by machine).
		if m := machineOf(r.Machine); i == 0 {
			machine = m
			if !t.Brief {
				fmt.Fprintf(&b, "On %s:\n\n", machine)
			}
			b.WriteString("| operation | ours | best peer | ours / peer | run |\n| --- | --- | --- | --- | --- |\n")
		} else if m != machine {
			return "", fmt.Errorf("table %q: %s ran on %s, its first row on %s: one table holds one machine's runs", t.Name, row.File, m, machine)
		}
		size, err := bench.ParseSize(row.Size)
		if err != nil {
			return "", fmt.Errorf("%s: %w", row.Label, err)
		}
		var ours *bench.Result
		var peers []*bench.Result
		for i := range r.Results {
			res := &r.Results[i]
			if res.Scenario != row.Scenario || res.Size != size || res.Status != bench.StatusOK || res.Median <= 0 {
				continue
			}
			switch {
			case res.System == "ours":
				ours = res
			case peerSystem(res.System):
				peers = append(peers, res)
			}
		}
		if ours == nil {
			return "", fmt.Errorf("%s: no result of ours for %s %s in %s", row.Label, row.Scenario, row.Size, row.File)
		}
		best := bestPeer(*ours, peers)
		oursCell := duration(ours.Median)
		if ours.Ideal > 0 && size >= 1<<20 && row.Scenario != "allreduce" {
			oursCell += fmt.Sprintf(" (%.2f S/B)", ours.Median/ours.Ideal)
		}
		peerCell, ratio := "—", "—"
		if best != nil {
			peerCell = fmt.Sprintf("%s %s", duration(best.Median), best.System)
			ratio = fmt.Sprintf("%.2f×", ours.Median/best.Median)
			// A peer timed otherwise than ours is compared only where the
			// methods' difference is small beside the figures, and said
			// so; below that, not at all.
			if differs, refuse := bench.CompareTiming(*ours, *best); refuse {
				ratio = "— (" + differs + ")"
			} else if differs != "" {
				ratio += " (" + differs + ")"
			}
			// A peer that ran under another load than ours's is not
			// compared like with like: say so beside the ratio.
			if len(ours.Load) > 0 && len(best.Load) > 0 && bench.LoadDiffers(ours.LoadMedian, best.LoadMedian, r.Machine.CPUs) {
				ratio += fmt.Sprintf(" (load differs: %.2f against %.2f)", ours.LoadMedian, best.LoadMedian)
			}
		}
		// A warm-up changes what a figure means (the cluster's first
		// operation is left out): a row says so where its run had one.
		label := row.Label
		if r.Warmup > 0 {
			label += fmt.Sprintf("; after %d warm-up", r.Warmup)
		}
		fmt.Fprintf(&b, "| %s | **%s** | %s | %s | [%s](%s) |\n", label, oursCell, peerCell, ratio,
			r.Date.UTC().Format("2006-01-02"), filepath.ToSlash(filepath.Join(link, row.File)))
		if !slices.Contains(files, row.File) {
			files = append(files, row.File)
		}
	}
	if t.Brief {
		return b.String(), nil
	}
	b.WriteString("\nMedians of each run's repetitions; every run's machine and command:\n\n")
	for _, f := range files {
		r, err := bench.ReadJSON(filepath.Join(results, f))
		if err != nil {
			return "", err
		}
		cmd := slices.Clone(r.Command)
		if len(cmd) > 0 {
			cmd[0] = "hoplite"
		}
		load := ""
		if r.Load.Measured {
			load = fmt.Sprintf(", load %.2f–%.2f", r.Load.Min, r.Load.Max)
			if r.Load.Procs > 0 {
				load += fmt.Sprintf(" with %d CPU-bound processes beside", r.Load.Procs)
			}
		}
		fmt.Fprintf(&b, "- [%s](%s): %s; %s, %d hosts at %s, %d repetitions; %d CPUs (%s)%s, %s %s, %s; `%s`\n",
			f, filepath.ToSlash(filepath.Join(link, f)), r.Date.UTC().Format("2006-01-02 15:04 UTC"), r.Mode, r.Nodes,
			r.Bandwidth, r.Reps, r.Machine.CPUs, r.Machine.CPUModel, load, r.Machine.GOOS, r.Machine.Kernel, r.Machine.GoVersion,
			strings.Join(cmd, " "))
	}
	return b.String(), nil
}

// machineOf names the machine a report ran on, as a table says it.
func machineOf(m bench.Machine) string {
	return fmt.Sprintf("%d CPUs (%s), %s %s", m.CPUs, m.CPUModel, m.GOOS, m.Kernel)
}

// duration formats seconds for a table: "0.723 s", "5.770 s", "20.8 ms".
func duration(s float64) string {
	if s >= 0.1 {
		return fmt.Sprintf("%.3f s", s)
	}
	return fmt.Sprintf("%.3g ms", s*1e3)
}
