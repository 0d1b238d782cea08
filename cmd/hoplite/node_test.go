package main

import (
	"flag"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/cluster"
)

// The benchmark flags become the member's configuration.
func TestNodeBenchFlagsReachTheMemberConfig(t *testing.T) {
	for _, c := range []struct {
		args          []string
		naive         bool
		degree        int
		shape         string
		arShape       string
		benchAgentSet bool
		actorLocates  bool
	}{
		{args: nil},
		{args: []string{"-naive"}, naive: true},
		{args: []string{"-reduce-degree", "2"}, degree: 2},
		{args: []string{"-reduce-degree", "3", "-reduce-shape", "d-ary"}, degree: 3, shape: "d-ary"},
		{args: []string{"-reduce-shape", "chain-leaf", "-bench-agent"}, shape: "chain-leaf", benchAgentSet: true},
		{args: []string{"-allreduce-shape", "sliced"}, arShape: "sliced"},
		{args: []string{"-allreduce-shape", "d-ary"}, arShape: "d-ary"},
		{args: []string{"-actor-locates"}, actorLocates: true},
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
		if cfg.Naive != c.naive || cfg.ReduceDegree != c.degree || cfg.ReduceShape != c.shape || cfg.AllReduceShape != c.arShape || f.benchAgent != c.benchAgentSet || cfg.ActorLocates != c.actorLocates {
			t.Errorf("%q: naive %v degree %d shape %q allreduce shape %q bench agent %v", c.args, cfg.Naive, cfg.ReduceDegree, cfg.ReduceShape, cfg.AllReduceShape, f.benchAgent)
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

// Bad benchmark flags fail at once with the member's clear error, before
// anything listens.
func TestNodeRejectsBadReduceFlags(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-reduce-degree", "-2"}, "reduce degree -2"},
		{[]string{"-reduce-shape", "star"}, `unknown reduce shape "star"`},
		{[]string{"-allreduce-shape", "ring"}, `unknown allreduce shape "ring"`},
		{[]string{"-reduce-degree", "two"}, `invalid value "two" for flag -reduce-degree`},
	} {
		code, stdout, stderr := hoplite(t, append([]string{"node", "-bind", "127.0.0.1:7000", "-seeds", "127.0.0.1:8000"}, c.args...)...)
		if code == 0 || !strings.Contains(stderr, c.want) || stdout != "" {
			t.Errorf("%q: exit %d, stdout %q, stderr:\n%s\nwant an error naming %q", c.args, code, stdout, stderr, c.want)
		}
	}
}

func TestNodeUsageListsTheBenchFlags(t *testing.T) {
	code, _, stderr := hoplite(t, "node", "-h")
	if code != 0 {
		t.Errorf("exit code %d", code)
	}
	for _, want := range []string{"-naive", "-reduce-degree", "-reduce-shape", "d-ary or chain-leaf", "-allreduce-shape", "-bench-agent"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("usage has no %q:\n%s", want, stderr)
		}
	}
}

// The fault-injection flags each set their own hook and nothing else: a
// member started without them has no hook, so its store node pays
// nothing per chunk.
func TestNodeFaultInjectionFlagsSetTheirHooks(t *testing.T) {
	for _, c := range []struct {
		args          []string
		fetch, reduce bool
	}{
		{args: nil},
		{args: []string{"-test-chunk-delay", "1ms"}, fetch: true},
		{args: []string{"-test-reduce-chunk-delay", "1ms"}, reduce: true},
		{args: []string{"-test-chunk-delay", "1ms", "-test-reduce-chunk-delay", "1ms"}, fetch: true, reduce: true},
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
		h := cfg.Hooks
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
