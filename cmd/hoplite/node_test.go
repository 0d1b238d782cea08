package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"io"
	"net"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/internal/experiments"
	"github.com/hoplite-go/hoplite/internal/testhooks"
)

// The hidden -experiments flag becomes the member's experiments, and the
// bench agent's switch.
func TestNodeExperimentsReachTheMemberConfig(t *testing.T) {
	for _, c := range []struct {
		args []string
		want experiments.Set
	}{
		{args: nil},
		{args: []string{"-experiments", "naive"}, want: experiments.Set{Naive: true}},
		{args: []string{"-experiments", "reduce-degree=3,reduce-shape=d-ary"}, want: experiments.Set{ReduceDegree: 3, ReduceShape: "d-ary"}},
		{args: []string{"-experiments", "reduce-shape=chain-leaf,bench-agent"}, want: experiments.Set{ReduceShape: "chain-leaf", BenchAgent: true}},
		{args: []string{"-experiments", "allreduce-shape=sliced,no-ring-gather,no-inline-push"}, want: experiments.Set{AllReduceShape: "sliced", NoRingGather: true, NoInlinePush: true}},
		{args: []string{"-experiments", "actor-locates,actor-subscribes,unbatched-reduce-tasks,no-warm-up"},
			want: experiments.Set{ActorLocates: true, ActorSubscribes: true, UnbatchedReduceTasks: true, NoWarmUp: true}},
	} {
		fs := flag.NewFlagSet("node", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var f nodeFlags
		f.register(fs)
		if err := fs.Parse(append([]string{"-bind", "127.0.0.1:7000"}, c.args...)); err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		cfg, err := f.config(logrus.New())
		if err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		if got := *experiments.In(&cfg); got != c.want || f.exp != c.want {
			t.Errorf("%q: member config %+v, flags %+v; want %+v", c.args, got, f.exp, c.want)
		}
	}
}

// nodeConfig parses `hoplite node -bind 127.0.0.1:7000` and args into the
// member's config.
func nodeConfig(t *testing.T, args ...string) (cluster.MemberConfig, error) {
	t.Helper()
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var f nodeFlags
	f.register(fs)
	if err := fs.Parse(append([]string{"-bind", "127.0.0.1:7000"}, args...)); err != nil {
		t.Fatalf("%q: %v", args, err)
	}
	return f.config(logrus.New())
}

// nodeRefuses runs `hoplite node` with flag set to value and checks that
// it exits non-zero before starting, saying want on stderr.
func nodeRefuses(t *testing.T, flag, value, want string) {
	t.Helper()
	code, stdout, stderr := hoplite(t, "node", "-bind", "127.0.0.1:7000", "-seeds", "127.0.0.1:8000", flag, value)
	if code == 0 || !strings.Contains(stderr, want) || stdout != "" {
		t.Errorf("%s %s: exit %d, stdout %q, stderr:\n%s", flag, value, code, stdout, stderr)
	}
}

// -link-rate takes the bandwidth forms of bench --bandwidth.
func TestNodeLinkRate(t *testing.T) {
	for arg, want := range map[string]float64{"": 0, "400mbit": 400e6, "10gbit": 10e9, "50MB/s": 400e6} {
		var args []string
		if arg != "" {
			args = []string{"-link-rate", arg}
		}
		cfg, err := nodeConfig(t, args...)
		if err != nil || cfg.LinkRate != want {
			t.Errorf("-link-rate %q: %v bit/s, %v; want %v", arg, cfg.LinkRate, err, want)
		}
	}
	nodeRefuses(t, "-link-rate", "fast", `-link-rate: bandwidth "fast"`)
}

// -link-burst takes a size and needs -link-rate.
func TestNodeLinkBurst(t *testing.T) {
	for _, c := range []struct {
		args []string
		want int64
	}{{nil, 0}, {[]string{"-link-rate", "400mbit", "-link-burst", "200000"}, 200000}, {[]string{"-link-rate", "400mbit", "-link-burst", "128KiB"}, 128 << 10}} {
		cfg, err := nodeConfig(t, c.args...)
		if err != nil || cfg.LinkBurst != c.want {
			t.Errorf("%q: burst %d, %v; want %d", c.args, cfg.LinkBurst, err, c.want)
		}
	}
	if _, err := nodeConfig(t, "-link-burst", "128KiB"); err == nil || !strings.Contains(err.Error(), "needs -link-rate") {
		t.Errorf("-link-burst without -link-rate: %v, want refused", err)
	}
	nodeRefuses(t, "-link-burst", "lots", "-link-burst")
}

// Bad experiments fail at once with a clear error, before anything
// listens; the benchmark-only flags of old are not flags.
func TestNodeRejectsBadExperiments(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-experiments", "reduce-degree=-2"}, "reduce degree -2"},
		{[]string{"-experiments", "reduce-shape=star"}, `unknown reduce shape "star"`},
		{[]string{"-experiments", "allreduce-shape=ring"}, `unknown allreduce shape "ring"`},
		{[]string{"-experiments", "reduce-degree=two"}, `experiment "reduce-degree=two": the degree must be an integer`},
		{[]string{"-experiments", "fast"}, `unknown experiment "fast"`},
		{[]string{"-naive"}, "flag provided but not defined: -naive"},
		{[]string{"-no-warm-up"}, "flag provided but not defined: -no-warm-up"},
	} {
		code, stdout, stderr := hoplite(t, append([]string{"node", "-bind", "127.0.0.1:7000", "-seeds", "127.0.0.1:8000"}, c.args...)...)
		if code == 0 || !strings.Contains(stderr, c.want) || stdout != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr:\n%s\nwant an error naming %q", c.args, code, stdout, stderr, c.want)
		}
	}
}

// `hoplite node -h` lists what an operator sets and nothing of the
// experiments: neither -experiments nor a flag named as an experiment.
func TestNodeUsageListsNoExperiments(t *testing.T) {
	code, _, stderr := hoplite(t, "node", "-h")
	if code != 0 {
		t.Errorf("exit code %d", code)
	}
	listed := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`).FindAllStringSubmatch(stderr, -1) {
		listed[m[1]] = true
	}
	for _, want := range []string{"bind", "seeds", "tls-cert", "link-rate", "warm-memory"} {
		if !listed[want] {
			t.Errorf("usage does not list -%s:\n%s", want, stderr)
		}
	}
	forbidden := append([]string{experiments.Flag, "bench-agent"}, experiments.Names()...)
	for _, name := range forbidden {
		name = strings.TrimSuffix(name, "=")
		if listed[name] || strings.Contains(stderr, "-"+name) {
			t.Errorf("usage names the experiment %q:\n%s", name, stderr)
		}
	}
	if strings.Contains(strings.ToLower(stderr), "benchmark") {
		t.Errorf("usage speaks of benchmarks:\n%s", stderr)
	}
}

// The fault-injection flags each set their own hook and nothing else: a
// member started without them has no hook, so its store node pays
// nothing per chunk.
func TestNodeFaultInjectionFlagsSetTheirHooks(t *testing.T) {
	for _, c := range []struct {
		args          []string
		fetch, reduce bool
		probe         time.Duration
		version       uint32
	}{
		{args: nil},
		{args: []string{"-test-chunk-delay", "1ms"}, fetch: true},
		{args: []string{"-test-reduce-chunk-delay", "1ms"}, reduce: true},
		{args: []string{"-test-chunk-delay", "1ms", "-test-reduce-chunk-delay", "1ms"}, fetch: true, reduce: true},
		{args: []string{"-test-probe-delay", "2ms", "-protocol-version", "5"}, probe: 2 * time.Millisecond, version: 5},
	} {
		fs := flag.NewFlagSet("node", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		var f nodeFlags
		f.register(fs)
		if err := fs.Parse(c.args); err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		cfg, err := f.config(logrus.New())
		if err != nil {
			t.Fatalf("%q: %v", c.args, err)
		}
		if got := testhooks.In(&cfg); got.ProbeDelay != c.probe || got.ProtocolVersion != c.version {
			t.Errorf("%q: probe delay %v, protocol version %d; want %v, %d", c.args, got.ProbeDelay, got.ProtocolVersion, c.probe, c.version)
		}
		h := testhooks.In(&cfg).Store
		if (h.BeforeFetchChunk != nil) != c.fetch || (h.BeforeReduceChunk != nil) != c.reduce || h.BeforePutChunk != nil || h.BeforeReceive != nil {
			t.Errorf("%q: fetch hook %v, reduce hook %v, put hook %v, receive hook %v; want fetch %v, reduce %v, no others", c.args,
				h.BeforeFetchChunk != nil, h.BeforeReduceChunk != nil, h.BeforePutChunk != nil, h.BeforeReceive != nil, c.fetch, c.reduce)
		}
	}
}

// -stall-timeout reaches the member's config (default 10 s); a duration
// that is not positive fails at once.
func TestNodeStallTimeout(t *testing.T) {
	for arg, want := range map[string]time.Duration{"": 10 * time.Second, "250ms": 250 * time.Millisecond} {
		var args []string
		if arg != "" {
			args = []string{"-stall-timeout", arg}
		}
		cfg, err := nodeConfig(t, args...)
		if err != nil || cfg.StallTimeout != want {
			t.Errorf("-stall-timeout %q: %v, %v; want %v", arg, cfg.StallTimeout, err, want)
		}
	}
	nodeRefuses(t, "-stall-timeout", "0s", "-stall-timeout 0s: want a positive duration")
}

// -timer-slack takes 0 (the kernel's) up to 10 ms; anything else is
// refused before the node starts.
func TestNodeTimerSlackBounds(t *testing.T) {
	for _, arg := range []string{"0s", "1ms", "10ms"} {
		if _, err := nodeConfig(t, "-timer-slack", arg); err != nil {
			t.Errorf("-timer-slack %s: %v", arg, err)
		}
	}
	for _, arg := range []string{"-1ms", "11ms"} {
		nodeRefuses(t, "-timer-slack", arg, "-timer-slack "+arg+": want 0 (the kernel's) up to 10ms")
	}
}

// -pages takes auto, small or huge; anything else is refused before the
// node starts, naming the flag and what it takes.
func TestNodePagesValues(t *testing.T) {
	for _, arg := range []string{"auto", "small", "huge"} {
		if _, err := nodeConfig(t, "-pages", arg); err != nil {
			t.Errorf("-pages %s: %v", arg, err)
		}
	}
	nodeRefuses(t, "-pages", "big", `-pages "big": want auto, small or huge`)
}

// A member started with -experiments runs with them, and its join log
// says which (a benchmark's logs name the system each member was).
func TestNodeReportsItsExperiments(t *testing.T) {
	bin := builtHoplite(t)
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	bind, manage := freeLoopback(t), freeLoopback(t)
	_, mport, _ := net.SplitHostPort(manage)
	cmd := exec.CommandContext(ctx, bin, "node", "-bind", bind, "-manage-port", mport, "-seeds", manage,
		"-log-format", "json", "-log-level", "info", "-experiments", "reduce-degree=2,no-warm-up")
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}()
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		var rec map[string]any
		if json.Unmarshal(sc.Bytes(), &rec) != nil || rec["msg"] != "member joined the cluster" {
			continue
		}
		if got := rec["experiments"]; got != "no-warm-up,reduce-degree=2" {
			t.Errorf("join log's experiments %v, want no-warm-up,reduce-degree=2: %s", got, sc.Text())
		}
		return
	}
	t.Fatalf("no join log before the member's stderr closed (%v)", ctx.Err())
}
