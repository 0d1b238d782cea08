package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/testutil"
)

// hoplite runs the command line in process with a deadline and returns the
// exit code and both outputs. The outputs are safe for concurrent writes:
// a stopped cluster's remote endpoints may still log their teardown (to
// stderr) after run returned.
func hoplite(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var stdout, stderr testutil.SyncBuffer
	code := run(ctx, args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

func TestNoArgsPrintsUsage(t *testing.T) {
	code, stdout, stderr := hoplite(t)
	if code != 2 {
		t.Errorf("exit code %d, want 2", code)
	}
	if !strings.Contains(stderr, "usage: hoplite <command>") || !strings.Contains(stderr, "demo") || !strings.Contains(stderr, "bench") {
		t.Errorf("stderr has no usage:\n%s", stderr)
	}
	if stdout != "" {
		t.Errorf("stdout not empty: %q", stdout)
	}
}

func TestUnknownCommand(t *testing.T) {
	code, _, stderr := hoplite(t, "frobnicate")
	if code != 2 {
		t.Errorf("exit code %d, want 2", code)
	}
	if !strings.Contains(stderr, `unknown command "frobnicate"`) || !strings.Contains(stderr, "usage:") {
		t.Errorf("stderr:\n%s", stderr)
	}
}

func TestHelp(t *testing.T) {
	for _, arg := range []string{"help", "-h", "--help"} {
		code, stdout, _ := hoplite(t, arg)
		if code != 0 {
			t.Errorf("%s: exit code %d, want 0", arg, code)
		}
		if !strings.Contains(stdout, "usage: hoplite <command>") {
			t.Errorf("%s: stdout has no usage:\n%s", arg, stdout)
		}
	}
}

func TestDemo(t *testing.T) {
	code, stdout, stderr := hoplite(t, "demo", "-nodes", "4", "-size", "2MiB", "-link-mbps", "0", "-chunk-size", "256KiB",
		"-reduce-size", "1MiB", "-arrival-interval", "1ms", "-recovery-size", "2MiB")
	if code != 0 {
		t.Fatalf("exit code %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	same := "all 3 receivers have the same 2097152 bytes (verified)"
	if n := strings.Count(stdout, same); n != 2 {
		t.Errorf("%q appears %d times, want 2 (tree and naive):\n%s", same, n, stdout)
	}
	for _, want := range []string{
		"Hoplite demo: 4 nodes, 2MiB object",
		"== Broadcast, receiver-driven tree ==",
		"== Broadcast, naive (every receiver from the creator) ==",
		"who fetched from whom",
		"node-0 (creator)",
		"the tree is",
		"the speed of the naive pattern",
		"== Reduce: SUM of 2 of 4 float32 sources of 1MiB",
		"cost model: T(1)=",
		"tree (root first; children reduce into their parent):",
		"tree reduce: ",
		"naive (gather all at the caller, reduce there): ",
	} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	if n := strings.Count(stdout, "(creator)"); n != 2 {
		t.Errorf("%d trees printed, want 2:\n%s", n, stdout)
	}
	// Every receiver appears in each printed tree.
	for _, node := range []string{"node-1", "node-2", "node-3"} {
		if n := strings.Count(stdout, "─ "+node+"\n"); n != 2 {
			t.Errorf("%s appears in %d trees, want 2:\n%s", node, n, stdout)
		}
	}
	if n := strings.Count(stdout, "result checked element by element"); n != 2 {
		t.Errorf("%d checked reduce results, want 2 (tree and naive):\n%s", n, stdout)
	}
	// The printed tree holds exactly the reduced sources: 2 positions.
	before, _, _ := strings.Cut(stdout, "== Recovery")
	if n := strings.Count(before, "position "); n != 2 {
		t.Errorf("%d tree positions printed, want 2:\n%s", n, stdout)
	}
	cmpLine := regexp.MustCompile(`(?m)^reduce tree \S+ vs naive gather \S+: [\d.]+x$`)
	if !cmpLine.MatchString(stdout) {
		t.Errorf("no reduce tree vs naive comparison line:\n%s", stdout)
	}
	// The recovery part comes last: node-1 dies mid-broadcast and
	// mid-reduce, the recovery events show, the results are verified.
	_, recovery, ok := strings.Cut(stdout, "\n== Recovery: a node killed mid-broadcast and mid-reduce (8 nodes, link unlimited (memory speed)) ==\n")
	if !ok || cmpLine.MatchString(recovery) {
		t.Fatalf("no recovery part after the reduce part:\n%s", stdout)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`broadcast 2 MiB: node-1 stalls at 1\.0 MiB, node-2\.\.node-7 fetch behind it; killing node-1\n`),
		regexp.MustCompile(`\[NodeFailed\] node-1 failed \(seen by [^)]+\)`),
		regexp.MustCompile(`\[SenderSwitched\] node-2 switched sender node-1 → node-0 at 1\.0 MiB\n`),
		regexp.MustCompile(`broadcast: all 6 live receivers have the same 2097152 bytes \(verified\)`),
		regexp.MustCompile(`reduce: SUM of 6 of 8 int64 sources of 1 MiB, R6's Put held, R7 a backup; killing node-1 \(R2\)\n`),
		regexp.MustCompile(`\[TreeNodeReplaced\] position 1 lost R2, R7 takes it\n`),
		regexp.MustCompile(`\[AncestorsInvalidated\] ancestors \[3\] cleared`),
		regexp.MustCompile(`\[ReduceDone\] done in \S+: reduced \[R1 R7 R3 R4 R5 R6\]\n`),
	} {
		if !want.MatchString(recovery) {
			t.Errorf("recovery part lacks %q:\n%s", want, recovery)
		}
	}
	if n := len(regexp.MustCompile(`\[NodeFailed\] node-1(#\d+)? failed`).FindAllString(recovery, -1)); n != 2 {
		t.Errorf("node-1 failed %d times, want 2 (mid-broadcast, mid-reduce):\n%s", n, recovery)
	}
	if strings.Contains(stderr, "level=warning") {
		t.Errorf("the recovery part logged warnings the events already tell:\n%s", stderr)
	}
	if last := lastLine(stdout); last != "  reduce: demo-recovery-sum = R1+R7+R3+R4+R5+R6, verified element by element" {
		t.Errorf("last line is %q, want the verified recovery reduce", last)
	}
}

// -recovery=false leaves the recovery part out; with -reduce-mib 0 the
// broadcast comparison is the last line.
func TestDemoWithoutRecovery(t *testing.T) {
	code, stdout, stderr := hoplite(t, "demo", "-nodes", "3", "-size-mib", "1", "-link-mbps", "0", "-chunk-kib", "256",
		"-reduce-mib", "0", "-recovery=false")
	if code != 0 {
		t.Fatalf("exit code %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if strings.Contains(stdout, "Recovery") || strings.Contains(stdout, "== Reduce") {
		t.Errorf("skipped parts ran:\n%s", stdout)
	}
	if last := lastLine(stdout); !strings.HasPrefix(last, "tree ") || !strings.HasSuffix(last, "the speed of the naive pattern") {
		t.Errorf("last line is %q, want the broadcast comparison", last)
	}
}

// The recovery part needs an object of at least two chunks: it says so
// instead of waiting for a stall that cannot happen.
func TestDemoRecoveryTooSmall(t *testing.T) {
	code, stdout, stderr := hoplite(t, "demo", "-nodes", "2", "-size-mib", "1", "-link-mbps", "0", "-chunk-kib", "1024",
		"-reduce-mib", "0", "-recovery-mib", "1")
	if code != 1 || !strings.Contains(stderr, "must span at least two chunks") {
		t.Errorf("exit code %d, stderr %q; want 1 and the reason", code, stderr)
	}
	if !strings.Contains(stdout, "== Recovery") {
		t.Errorf("the recovery part did not start:\n%s", stdout)
	}
}

func TestDemoNeedsTwoNodes(t *testing.T) {
	code, _, stderr := hoplite(t, "demo", "-nodes", "1")
	if code != 2 {
		t.Errorf("exit code %d, want 2", code)
	}
	if !strings.Contains(stderr, "hoplite demo:") || !strings.Contains(stderr, "at least 2 nodes") {
		t.Errorf("stderr has no error:\n%s", stderr)
	}
}

func TestDemoBadFlag(t *testing.T) {
	code, _, stderr := hoplite(t, "demo", "-no-such-flag")
	if code != 2 { // a usage error, as Go's tools exit
		t.Errorf("exit code %d, want 2", code)
	}
	if !strings.Contains(stderr, "-no-such-flag") {
		t.Errorf("stderr does not name the bad flag:\n%s", stderr)
	}
}

func TestDemoHelp(t *testing.T) {
	code, stdout, stderr := hoplite(t, "demo", "-h")
	if code != 0 {
		t.Errorf("exit code %d, want 0", code)
	}
	for _, flag := range []string{"-nodes", "-size", "-link-mbps", "-chunk-size", "-reduce-size"} {
		if !strings.Contains(stderr, flag) {
			t.Errorf("flag help lacks %s:\n%s", flag, stderr)
		}
	}
	if strings.Contains(stdout, "Hoplite demo:") {
		t.Errorf("demo -h ran the demo:\n%s", stdout)
	}
}

// The scenarios run in process by default: a table, then RESULT lines.
func TestBenchBroadcast(t *testing.T) {
	code, stdout, stderr := hoplite(t, "bench", "broadcast", "--nodes", "3", "--size", "1MiB", "--reps", "1", "--warmup", "0",
		"--bandwidth", "4gbit", "--peers", "naive,mpi")
	if code != 0 {
		t.Fatalf("exit code %d, want 0\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, want := range []string{"scenario", "broadcast  1MiB  ours", "naive", "skipped: needs --testbed"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, stdout)
		}
	}
	last := regexp.MustCompile(`^RESULT scenario=broadcast nodes=3 size=1048576 ours=\S+s ideal=0\.002097s naive=\S+s mpi-default=skipped mpi-best=skipped( cpu=\S+)? cpus=\d+ load=[0-9.]+( load-differs=\S+)?$`)
	if !last.MatchString(lastLine(stdout)) {
		t.Errorf("last line is %q, want the RESULT line", lastLine(stdout))
	}
	if !strings.Contains(stderr, "] 2/2 done") {
		t.Errorf("no progress bar on stderr:\n%s", stderr)
	}
}

// The earlier flags of `hoplite bench broadcast` still work.
func TestBenchLegacyFlags(t *testing.T) {
	code, stdout, stderr := hoplite(t, "bench", "broadcast", "-nodes", "3", "-size-mib", "1", "-link-mbps", "4000", "-reps", "1", "-warmup", "0")
	if code != 0 || !strings.HasPrefix(lastLine(stdout), "RESULT scenario=broadcast nodes=3 size=1048576 ours=") {
		t.Errorf("exit %d, last line %q\nstderr:\n%s", code, lastLine(stdout), stderr)
	}
}

func TestBenchJSONAndPlot(t *testing.T) {
	dir := t.TempDir()
	code, stdout, stderr := hoplite(t, "bench", "reduce", "--nodes", "3", "--size", "256KiB,1MiB", "--reps", "1", "--warmup", "0",
		"--bandwidth", "4gbit", "--json", dir+"/r.json", "--plot", dir+"/r.png")
	if code != 0 {
		t.Fatalf("exit code %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	if n := strings.Count(stdout, "RESULT scenario=reduce nodes=3 "); n != 2 || !strings.HasPrefix(lastLine(stdout), "RESULT ") {
		t.Errorf("%d RESULT lines, want 2, the last line last:\n%s", n, stdout)
	}
	b, err := os.ReadFile(dir + "/r.json")
	if err != nil {
		t.Fatal(err)
	}
	var r struct {
		Command []string
		Results []struct {
			System string
			Times  []float64 `json:"times_s"`
		}
	}
	if err := json.Unmarshal(b, &r); err != nil || len(r.Results) != 2 || len(r.Results[0].Times) != 1 || r.Command[2] != "reduce" {
		t.Errorf("JSON %s: %v", b, err)
	}
	png, err := os.ReadFile(dir + "/r.png")
	if err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Errorf("no PNG: %v", err)
	}
}

// scale-plot reads reports of several N and draws time / ideal against N.
func TestBenchScalePlot(t *testing.T) {
	dir := t.TempDir()
	for _, n := range []string{"3", "4"} {
		code, stdout, stderr := hoplite(t, "bench", "broadcast", "--nodes", n, "--size", "1MiB", "--reps", "1", "--warmup", "0",
			"--bandwidth", "4gbit", "--peers", "naive", "--json", dir+"/b"+n+".json")
		if code != 0 {
			t.Fatalf("exit code %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
		}
	}
	code, stdout, stderr := hoplite(t, "bench", "scale-plot", "-o", dir+"/s.png", "-systems", "ours,naive", dir+"/b3.json", dir+"/b4.json")
	if code != 0 {
		t.Fatalf("exit code %d\nstdout:\n%s\nstderr:\n%s", code, stdout, stderr)
	}
	for _, row := range []string{"broadcast  naive   3", "broadcast  naive   4", "broadcast  ours    3", "broadcast  ours    4"} {
		if !strings.Contains(stdout, row) {
			t.Errorf("no row %q in:\n%s", row, stdout)
		}
	}
	if png, err := os.ReadFile(dir + "/s.png"); err != nil || !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Errorf("no PNG: %v", err)
	}
	if code, _, stderr := hoplite(t, "bench", "scale-plot", dir+"/b3.json"); code != 2 || !strings.Contains(stderr, "needs -o") {
		t.Errorf("without -o: exit %d, %s", code, stderr)
	}
}

// `bench p2p` is the loopback benchmark unless scenario flags say otherwise.
func TestBenchP2PDispatch(t *testing.T) {
	for _, c := range []struct {
		args   []string
		legacy bool
	}{
		{[]string{"--size", "1GiB", "--reps", "3"}, true},
		{[]string{"-size", "1GiB", "-small", "10"}, true},
		{nil, true},
		{[]string{"--size", "1MiB", "--testbed"}, false},
		{[]string{"-nodes=2"}, false},
		{[]string{"--json", "x.json"}, false},
	} {
		if got := legacyP2P(c.args); got != c.legacy {
			t.Errorf("legacyP2P(%q) = %v, want %v", c.args, got, c.legacy)
		}
	}
	code, stdout, stderr := hoplite(t, "bench", "p2p", "--nodes", "2", "--size", "256KiB", "--reps", "1", "--warmup", "0", "--bandwidth", "4gbit")
	if code != 0 || !strings.HasPrefix(lastLine(stdout), "RESULT scenario=p2p nodes=2 size=262144 ours=") {
		t.Errorf("exit %d, last line %q\nstderr:\n%s", code, lastLine(stdout), stderr)
	}
}

func TestBenchNeedsScenario(t *testing.T) {
	for _, args := range [][]string{{"bench"}, {"bench", "frobnicate"}, {"bench", "--nodes", "3"}} {
		code, stdout, stderr := hoplite(t, args...)
		if code != 2 {
			t.Errorf("%v: exit code %d, want 2 (a usage error)", args, code)
		}
		if !strings.Contains(stderr, "allreduce") || !strings.Contains(stderr, "hoplite bench -h") {
			t.Errorf("%v: stderr names neither the scenarios nor the help:\n%s", args, stderr)
		}
		if strings.Contains(stdout, "RESULT") {
			t.Errorf("%v: ran a benchmark:\n%s", args, stdout)
		}
	}
	// An unknown flag is named, not reported as a missing scenario.
	code, _, stderr := hoplite(t, "bench", "--bogus")
	if code != 2 || !strings.Contains(stderr, "-bogus") || strings.Contains(stderr, "missing scenario") {
		t.Errorf("bench --bogus: exit %d, stderr:\n%s", code, stderr)
	}
}

// Usage errors exit 2 and say what is wrong in our words; test-only and
// legacy flags are accepted but not shown.
func TestUsageConventions(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"demo", "extra"}, `unexpected arguments ["extra"]`},
		{[]string{"node", "--bind", "127.0.0.1:7000", "--log-level", "loud"}, `--log-level "loud": want debug, info, warn or error`},
		{[]string{"node", "--bind", "127.0.0.1:7000", "stray"}, `unexpected arguments ["stray"]`},
		{[]string{"version", "extra"}, `unexpected arguments`},
	} {
		code, _, stderr := hoplite(t, c.args...)
		if code != 2 || !strings.Contains(stderr, c.want) || strings.Contains(stderr, "hoplite: hoplite") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, stderr, c.want)
		}
	}
	_, _, stderr := hoplite(t, "node", "-h")
	for _, hidden := range []string{"-test-chunk-delay", "-test-reduce-chunk-delay", "-protocol-version"} {
		if strings.Contains(stderr, hidden) {
			t.Errorf("node -h shows the test-only flag %s", hidden)
		}
	}
	_, _, stderr = hoplite(t, "bench", "broadcast", "-h")
	if strings.Contains(stderr, "-size-mib") || !strings.Contains(stderr, "-size string") {
		t.Errorf("bench -h shows legacy flags or hides -size:\n%s", stderr)
	}
}

func TestBenchHelp(t *testing.T) {
	for _, args := range [][]string{{"bench", "-h"}, {"bench", "broadcast", "-h"}} {
		code, _, stderr := hoplite(t, args...)
		if code != 0 {
			t.Errorf("%v: exit code %d, want 0", args, code)
		}
		if !strings.Contains(stderr, "usage: hoplite bench <scenario>") || !strings.Contains(stderr, "-testbed") {
			t.Errorf("%v: stderr has no bench usage:\n%s", args, stderr)
		}
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return lines[len(lines)-1]
}

func TestBenchRejectsBadFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"bench", "broadcast", "-reps", "0"}, "need --reps >= 1"},
		{[]string{"bench", "broadcast", "-nodes", "1"}, "need at least 2"},
		{[]string{"bench", "broadcast", "-size", "0"}, "-size"},
		{[]string{"bench", "broadcast", "-bandwidth", "fast"}, "-bandwidth"},
		{[]string{"bench", "broadcast", "-peers", "nccl"}, "unknown peer"},
		{[]string{"bench", "broadcast", "-interval", "5ms"}, "async"},
		{[]string{"bench", "broadcast", "-degree", "2"}, "-degree"},
	} {
		var out, errb bytes.Buffer
		if code := run(t.Context(), c.args, &out, &errb); code != 2 || !strings.Contains(errb.String(), c.want) {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, errb.String(), c.want)
		}
	}
}
