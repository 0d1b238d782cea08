package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/hoplite-go/hoplite/bench"
)

// helpHint is the hint a usage error ends with.
var helpHint = regexp.MustCompile(`\((hoplite [^()]*-h) for help\)\n$`)

// TestBenchErrorsNameTheSubcommand: every error of a hoplite bench
// subcommand carries one prefix, the command as typed ("hoplite bench
// report: "); a usage error exits 2 and its help hint runs as printed,
// a runtime error exits 1.
func TestBenchErrorsNameTheSubcommand(t *testing.T) {
	bin := builtHoplite(t)
	missing := filepath.Join(t.TempDir(), "missing")
	for _, c := range []struct {
		args      []string
		code      int
		cmd, want string
	}{
		{[]string{"bench"}, 2, "bench", "missing scenario"},
		{[]string{"bench", "frobnicate"}, 2, "bench", "unknown scenario"},
		{[]string{"bench", "broadcast", "--reps", "0"}, 2, "bench broadcast", "--reps"},
		{[]string{"bench", "allreduce", "extra"}, 2, "bench allreduce", "unexpected arguments"},
		{[]string{"bench", "p2p", "--nodes", "1"}, 2, "bench p2p", "--nodes 1"},
		{[]string{"bench", "p2p", "--small", "0"}, 2, "bench p2p", "-small"},
		{[]string{"bench", "p2p-tcp", "--size", "1QB"}, 2, "bench p2p-tcp", "-size"},
		{[]string{"bench", "report", "--update"}, 2, "bench report", "--update"},
		{[]string{"bench", "report", "--results", missing}, 1, "bench report", "--results DIR"},
		{[]string{"bench", "scale-plot"}, 2, "bench scale-plot", "-o FILE.png"},
		{[]string{"bench", "scale-plot", "-o", filepath.Join(missing, "x.png"), filepath.Join(missing, "r.json")}, 1, "bench scale-plot", "r.json"},
		{[]string{"bench", bench.LoadSpinCommand, "--for", "0"}, 2, "bench " + bench.LoadSpinCommand, "--for"},
	} {
		code, stdout, stderr := hoplite(t, c.args...)
		prefix := "hoplite " + c.cmd + ": "
		if code != c.code || !strings.HasPrefix(stderr, prefix) || !strings.Contains(stderr, c.want) ||
			strings.Contains(stderr, "hoplite:") || strings.Count(stderr, "hoplite bench") != strings.Count(stderr, "hoplite "+c.cmd) ||
			strings.Count(stderr, prefix) != 1 || stdout != "" {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want %d, the prefix %q and %q", c.args, code, stdout, stderr, c.code, prefix, c.want)
			continue
		}
		if c.code != 2 {
			continue
		}
		m := helpHint.FindStringSubmatch(stderr)
		if m == nil || m[1] != "hoplite "+c.cmd+" -h" {
			t.Errorf("%v: the usage error's help hint %q, want hoplite %s -h", c.args, stderr, c.cmd)
			continue
		}
		help := exec.Command("sh", "-c", m[1])
		help.Env = append(help.Environ(), "PATH="+dirOf(bin)+":"+pathEnv())
		if out, err := help.CombinedOutput(); err != nil || !strings.Contains(string(out), "usage: "+strings.Fields(m[1])[0]+" bench") {
			t.Errorf("%v: the hint %q as printed: %v\n%s", c.args, m[1], err, out)
		}
	}
}

// TestBenchReportHintRunsAsPrinted: a table that differs from the
// reports is named with the command that regenerates it, --results
// included, and that command, run as printed from elsewhere, does.
func TestBenchReportHintRunsAsPrinted(t *testing.T) {
	bin := builtHoplite(t)
	results, _ := filepath.Abs(filepath.Join("..", "..", "bench", "results"))
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	doc := filepath.Join(dir, "README.md")
	// A copy elsewhere links the results from there: the check fails.
	if err := os.WriteFile(doc, readme, 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := hoplite(t, "bench", "report", "--results", results, doc)
	m := regexp.MustCompile(`\((hoplite bench report .*)\)\n$`).FindStringSubmatch(stderr)
	if code != 1 || !strings.HasPrefix(stderr, "hoplite bench report: ") || m == nil {
		t.Fatalf("check of a stale table: exit %d, %q; want 1 and a hint", code, stderr)
	}
	hint := exec.Command("sh", "-c", m[1])
	hint.Dir = dir // neither bench/results nor the repository here
	hint.Env = append(hint.Environ(), "PATH="+dirOf(bin)+":"+pathEnv())
	if out, err := hint.CombinedOutput(); err != nil {
		t.Fatalf("the hint %q as printed: %v\n%s", m[1], err, out)
	}
	if code, _, stderr := hoplite(t, "bench", "report", "--results", results, doc); code != 0 {
		t.Errorf("check after the hint ran: exit %d, %s", code, stderr)
	}
}
