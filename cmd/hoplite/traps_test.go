package main

import (
	"bytes"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// TestHelpEverywhere: -h prints the usage and exits 0 in every command,
// and hoplite --version is hoplite version.
func TestHelpEverywhere(t *testing.T) {
	for _, args := range [][]string{{"demo"}, {"bench"}, {"bench", "p2p"}, {"bench", "report"}, {"node"}, {"certs"}, {"sim"},
		{"put"}, {"get"}, {"rm"}, {"stat"}, {"ls"}, {"members"}, {"status"}, {"version"}, {"completion"}, {"completion", "bash"},
		{"reduce"}, {"allreduce"}, {"events"},
		{"bench", "broadcast"}, {"bench", "p2p-tcp"}, {"bench", "scale-plot"}} {
		code, stdout, stderr := hoplite(t, append(args, "-h")...)
		if code != 0 || !strings.Contains(stdout+stderr, "usage: hoplite "+args[0]) {
			t.Errorf("%v -h: exit %d, output:\n%s%s", args, code, stdout, stderr)
		}
	}
	for _, v := range []string{"--version", "version"} {
		code, stdout, stderr := hoplite(t, v)
		if code != 0 || !strings.HasPrefix(stdout, "hoplite ") {
			t.Errorf("hoplite %s: exit %d, %q %q", v, code, stdout, stderr)
		}
	}
}

// TestUsageErrorsExitTwo: a bad command line exits 2 in every command,
// with one "hoplite CMD:" prefix and no "hoplite:" or "CMD:" after it.
func TestUsageErrorsExitTwo(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"node", "--capacity", "4XiB"}, "-capacity"},
		{[]string{"node", "--stall-timeout", "0s"}, "-stall-timeout"},
		{[]string{"demo", "--size", "1QB"}, "--size"},
		{[]string{"demo", "--nodes", "2", "--reduce-num", "9", "--size", "1MiB", "--recovery=false"}, "-reduce-num"},
		{[]string{"certs"}, "-dir is required"},
		{[]string{"certs", "--dir", t.TempDir(), "extra"}, "unexpected arguments"},
		{[]string{"bench", "broadcast", "--reps", "0"}, "--reps"},
		{[]string{"bench", "p2p", "--small", "0"}, "-small"},
		{[]string{"get", "id"}, "--addr is required"},
		{[]string{"ls", "--addr", "127.0.0.1:1", "--limit", "0"}, "--limit 0"},
		{[]string{"get", "--addr", "127.0.0.1:1", "--wait", "-1s", "id"}, "--wait"},
		{[]string{"completion", "fish"}, "bash or zsh"},
		{[]string{"completion"}, "bash or zsh"},
		{[]string{"completion", "bash", "extra"}, "unexpected arguments [\"extra\"]"},
		{[]string{"version", "extra"}, "unexpected arguments"},
		// A value the member's configuration refuses, before it starts.
		{[]string{"node", "--bind", "nonsense"}, "bind address"},
		{[]string{"node", "--bind", "127.0.0.1:7001", "--manage-port", "-5"}, "manage port"},
		{[]string{"certs", "--dir", t.TempDir(), "--hosts", ","}, "--hosts"},
		{[]string{"get", "--addr", "nonsense", "id"}, "--addr"},
		{[]string{"get", "--addr", "127.0.0.1:1,nonsense", "id"}, "--addr"},
		{[]string{"reduce", "--addr", "127.0.0.1:1", "--op", "avg", "t", "s"}, "--op"},
		{[]string{"allreduce", "--addr", "127.0.0.1:1", "--dtype", "int8", "t", "s"}, "--dtype"},
		{[]string{"events", "--addr", "127.0.0.1:1", "--for", "-1s"}, "--for"},
		{[]string{"get", "--addr", "127.0.0.1:1", "--tls-cert", "member.pem", "id"}, "--tls-key"},
		{[]string{"sim", "1024"}, "unexpected arguments"},
		{[]string{"sim", "--size", "1QB"}, "--size"},
		{[]string{"sim", "--nodes", "1"}, "--nodes"},
		{[]string{"sim", "--nodes", "2", "--shards", "0"}, "--shards"},
		{[]string{"sim", "--nodes", "2", "--scenario", "bogus"}, "unknown scenario"},
		{[]string{"sim", "--nodes", "2", "--latency", "-1s"}, "--latency"},
		{[]string{"sim", "--nodes", "2", "--slow-fraction", "2"}, "--slow-fraction"},
		{[]string{"sim", "--nodes", "2", "--cpu-model", "fast"}, "--cpu-model \"fast\": want one of testbed, unshaped"},
		{[]string{"sim", "--nodes", "2,8", "--num", "-1"}, "--num"},
		{[]string{"sim", "--nodes", "4", "--kill", "3"}, "kill"},
		{[]string{"sim", "--nodes", "4", "--allreduce-shape", "ring"}, "--allreduce-shape"},
		{[]string{"sim", "--nodes", "4", "--scenario", "reduce", "--size", "1KiB"}, "inline"},
	} {
		code, _, stderr := hoplite(t, c.args...)
		prefix := "hoplite " + commandName(c.args) + ": "
		if code != 2 || !strings.Contains(stderr, c.want) || !strings.HasPrefix(stderr, prefix) || strings.Contains(stderr, "hoplite:") ||
			strings.HasPrefix(stderr, prefix+c.args[0]+": ") {
			t.Errorf("%v: exit %d, stderr %q; want 2 and %q", c.args, code, stderr, c.want)
		}
	}
}

// TestNodeHelpIsTrue: the manage port listens on the bind host, as the
// member does (cluster's manageServer), not on all interfaces, and serves
// what cluster's manageRoutes serves with either provider.
func TestNodeHelpIsTrue(t *testing.T) {
	_, _, stderr := hoplite(t, "node", "-h")
	_, manage, _ := strings.Cut(stderr, "  -manage-port int\n")
	manage, _, _ = strings.Cut(manage, "\n")
	if strings.Contains(stderr, "all interfaces") || !strings.Contains(manage, "on the bind host") ||
		!strings.Contains(manage, "/metrics") || !strings.Contains(manage, "/live/") || strings.HasPrefix(strings.TrimSpace(manage), "automanaged") {
		t.Errorf("node -h about the manage port: %q\n%s", manage, stderr)
	}
}

// TestCompletionScripts: the bash script is valid bash and completes a
// command's flags from the binary's own usage; the zsh one names every
// command.
func TestCompletionScripts(t *testing.T) {
	code, script, stderr := hoplite(t, "completion", "bash")
	if code != 0 {
		t.Fatalf("completion bash: exit %d, %s", code, stderr)
	}
	if bash, err := exec.LookPath("bash"); err == nil {
		for _, c := range []struct{ words, cword, want string }{
			{"hoplite get --w", "2", "--wait"},
			{"hoplite ls --li", "2", "--limit"},
			{"hoplite bench p2p --small-s", "3", "--small-size"},
			{"hoplite bench rep", "2", "report"},
			{"hoplite bench report --up", "3", "--update"},
			{"hoplite bench broad", "2", "broadcast"},
			{"hoplite bench scale-plot --sys", "3", "--systems"},
			{"hoplite mem", "1", "members"},
			{"hoplite allred", "1", "allreduce"},
			{"hoplite reduce --op pr", "3", "prod"},
			{"hoplite allreduce --dtype float6", "3", "float64"},
			{"hoplite events --fo", "2", "--for"},
			{"hoplite completion z", "2", "zsh"},
		} {
			out, err := exec.Command(bash, "-c", script+"\nCOMP_WORDS=("+c.words+"); COMP_CWORD="+c.cword+"; _hoplite; echo \"${COMPREPLY[*]}\"").CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != c.want {
				t.Errorf("bash completion of %q: %q, %v; want %q", c.words, out, err, c.want)
			}
		}
	}
	code, script, _ = hoplite(t, "completion", "zsh")
	if code != 0 || !strings.HasPrefix(script, "#compdef hoplite") {
		t.Fatalf("completion zsh: exit %d\n%s", code, script)
	}
	for _, cmd := range []string{"demo", "node", "members", "completion", "--addr", "--wait"} {
		if !strings.Contains(script, cmd) {
			t.Errorf("zsh completion lacks %s", cmd)
		}
	}
	zsh, err := exec.LookPath("zsh")
	if err != nil {
		return // .ci/run installs zsh, so CI always runs what follows
	}
	// The script loaded by zsh's own completion system; compadd, which
	// only a completion widget may call, prints what it was offered
	// (zsh filters the offers by PREFIX itself).
	for _, c := range []struct {
		words, prefix string
		current       int
		want          []string
	}{
		{"hoplite me", "me", 2, []string{"members", "completion", "--version"}},
		{"hoplite get --w", "--w", 3, []string{"--wait", "--addr"}},
		{"hoplite bench p2p --small-s", "--small-s", 4, []string{"--small-size"}},
		{"hoplite bench re", "re", 3, []string{"report", "reduce"}},
		{"hoplite bench report --up", "--up", 4, []string{"--update"}},
		{"hoplite completion z", "z", 3, []string{"bash", "zsh"}},
		{"hoplite reduce --dtype ''", "", 4, []string{"float32", "int64"}},
	} {
		prog := "autoload -U compinit && compinit -u -d " + filepath.Join(t.TempDir(), "zcompdump") + "\n" + script +
			"\ncompadd() { print -r -- \"offered: $*\" }\n_files() { : }\n" +
			"words=(" + c.words + "); CURRENT=" + strconv.Itoa(c.current) + "; PREFIX=" + c.prefix + "; _hoplite\n"
		out, err := exec.Command(zsh, "-f", "-c", prog).CombinedOutput()
		offered := ""
		for _, line := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(line, "offered: ") {
				offered += " " + strings.TrimPrefix(line, "offered: ") + " "
			}
		}
		for _, w := range c.want {
			if err != nil || !strings.Contains(offered, " "+w+" ") {
				t.Errorf("zsh completion of %q offered %q (%v), want %s among them; output:\n%s", c.words, offered, err, w, out)
			}
		}
	}
}

var lsHintLine = regexp.MustCompile(`(?m)^more: (hoplite .*)$`)

// TestCLITraps: against a running member, the operator commands do what
// a shell user expects: a Get of an id that does not exist is NOT_FOUND
// at once (or waits --wait for its creation); --addr names the member
// by another name of its host; ls's continuation hint runs as printed;
// an error of rm is prefixed once.
func TestCLITraps(t *testing.T) {
	bin := builtHoplite(t)
	addr := startMembers(t, bin, 1)[0]
	a := "--addr=" + addr

	// --addr localhost:PORT for a member bound to 127.0.0.1:PORT.
	_, port, _ := net.SplitHostPort(addr)
	if code, out, errs := cli(t, bin, nil, "members", "--addr", net.JoinHostPort("localhost", port), "--timeout", "20s"); code != 0 || !strings.Contains(out, addr) {
		t.Errorf("members --addr localhost:%s: exit %d, %q %q", port, code, out, errs)
	}

	// An id that does not exist, with a timeout far beyond the answer.
	if code, _, errs := cli(t, bin, nil, "get", a, "--timeout", "20s", "never-put"); code != 1 || !strings.Contains(errs, "NOT_FOUND") {
		t.Errorf("get of a missing id: exit %d, %s", code, errs)
	}
	if code, _, errs := cli(t, bin, nil, "get", a, "--wait", "100ms", "never-put"); code != 1 || !strings.Contains(errs, "NOT_FOUND") || !strings.Contains(errs, "--wait") {
		t.Errorf("get --wait 100ms of a missing id: exit %d, %s", code, errs)
	}
	// --wait: the object created meanwhile arrives.
	waiting := exec.Command(bin, "get", a, "--wait", "50s", "--timeout", "55s", "later")
	var got, gotErr bytes.Buffer
	waiting.Stdout, waiting.Stderr = &got, &gotErr
	if err := waiting.Start(); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := cli(t, bin, []byte("made later"), "put", a, "later"); code != 0 {
		t.Fatalf("put: exit %d, %s", code, errs)
	}
	if err := waiting.Wait(); err != nil || got.String() != "made later" {
		t.Errorf("get --wait of an object put meanwhile: %v, %q %q", err, got.String(), gotErr.String())
	}

	// ls --limit 1 over two objects: the hint lists the next page.
	if code, _, errs := cli(t, bin, []byte("x"), "put", a, "second"); code != 0 {
		t.Fatalf("put: exit %d, %s", code, errs)
	}
	code, out, errs := cli(t, bin, nil, "ls", a, "--limit", "1")
	m := lsHintLine.FindStringSubmatch(out)
	if code != 0 || m == nil {
		t.Fatalf("ls --limit 1: exit %d, no hint:\n%s%s", code, out, errs)
	}
	hint := exec.Command("sh", "-c", m[1])
	hint.Env = append(hint.Environ(), "PATH="+dirOf(bin)+":"+pathEnv())
	next, err := hint.CombinedOutput()
	if err != nil || !strings.Contains(string(next), "ID") {
		t.Errorf("the hint %q as printed: %v\n%s", m[1], err, next)
	}

	// rm of an id that does not exist: one prefix.
	code, _, errs = cli(t, bin, nil, "rm", a, "no-such-id")
	if code != 1 || !strings.HasPrefix(errs, "hoplite rm: no-such-id: ") || strings.Contains(errs, "hoplite:") {
		t.Errorf("rm of a missing id: exit %d, %q", code, errs)
	}
}

func dirOf(path string) string { return path[:strings.LastIndex(path, "/")] }

func pathEnv() string {
	p, _ := exec.LookPath("sh")
	return dirOf(p) + ":/usr/bin:/bin"
}
