package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// requireTestbed skips the test where the testbed cannot exist (not
// root: it creates network namespaces) and fails it where it should and
// does not: a missing tool is one the README's test command installs
// (bench/peers/install brings iproute2).
func requireTestbed(t *testing.T, script string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("not root: the testbed creates network namespaces")
	}
	for _, tool := range []string{"ip", "tc", "bash"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("the testbed needs %s: run scripts/test as root (bench/peers/install installs iproute2)", tool)
		}
	}
	if out, err := exec.Command("ip", "netns", "list").CombinedOutput(); err != nil {
		t.Fatalf("`ip netns list` fails: %v %s", err, bytes.TrimSpace(out))
	}
	if st, err := os.Stat(script); err != nil || st.Mode()&0o111 == 0 {
		t.Fatalf("%s is missing or not executable", script)
	}
}

// freeTestbedNet picks a testbed network no interface uses yet, and a
// prefix of its own: the smoke run must not tear down (or share) the
// testbed of a benchmark someone runs at the same time (default prefix
// hpb, net 3) or of another test run.
func freeTestbedNet() (string, int, error) {
	out, err := exec.Command("ip", "-o", "addr", "show").Output()
	if err != nil {
		return "", 0, fmt.Errorf("ip -o addr show: %w", err)
	}
	ns, _ := exec.Command("ip", "netns", "list").Output()
	start := 100 + os.Getpid()%100
	for i := 0; i < 100; i++ {
		k := 100 + (start+i)%100
		prefix := "hpt" + strconv.Itoa(k)
		if !strings.Contains(string(out), fmt.Sprintf("198.18.%d.", k)) && !strings.Contains(string(ns), prefix+"-h") {
			return prefix, k, nil
		}
	}
	return "", 0, fmt.Errorf("no free testbed network in 198.18.100-199.0/24")
}

// The testbed smoke run: 3 namespaces, 1 MiB broadcast, reduce and the
// degree ablation, ours and naive (and each forced degree and the
// chain-leaf shape: nodes started with -reduce-degree or -reduce-shape),
// and the peers whose scripts exist (below: which scenario runs which);
// then a 1 KiB AllReduce, ours and
// ours-no-push (-no-inline-push); every result verified by the agents in
// the nodes.
func TestTestbedSmoke(t *testing.T) {
	script, _ := filepath.Abs("testbed")
	requireTestbed(t, script)
	bin := filepath.Join(t.TempDir(), "hoplite")
	if out, err := exec.Command("go", "build", "-o", bin, "github.com/hoplite-go/hoplite/cmd/hoplite").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	ourPeers := []string{"naive", "actor", "data"}
	var external []string
	for _, p := range []string{"mpi", "dask", "gloo"} {
		if st, err := os.Stat(filepath.Join("peers", p, "run")); err == nil && st.Mode()&0o111 != 0 {
			external = append(external, p)
		}
	}
	prefix, net, err := freeTestbedNet()
	if err != nil {
		t.Fatal(err)
	}
	for _, scenario := range []string{"broadcast", "reduce", "degree"} {
		// The external peers start their own programs (MPI's algorithm
		// choice alone is 7 s a scenario), so they run in the broadcast
		// only, which starts each of them; the reduce keeps MPI, the
		// reduce's usual reference. HOPLITE_SMOKE_PEERS=all runs every
		// peer in every scenario.
		peers := ourPeers
		switch {
		case scenario == "broadcast" || os.Getenv("HOPLITE_SMOKE_PEERS") == "all":
			peers = slices.Concat(ourPeers, external)
		case scenario == "reduce" && slices.Contains(external, "mpi"):
			peers = slices.Concat(ourPeers, []string{"mpi"})
		}
		t.Run(scenario, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(t.Context(), 8*time.Minute)
			defer cancel()
			dir := t.TempDir()
			js := filepath.Join(dir, "r.json")
			cmd := exec.CommandContext(ctx, bin, "bench", scenario, "--testbed", "--testbed-script", script, "--nodes", "3",
				"--testbed-prefix", prefix, "--testbed-net", strconv.Itoa(net),
				"--size", "1MiB", "--reps", "1", "--warmup", "0", "--peers", strings.Join(peers, ","), "--json", js,
				"--log-dir", filepath.Join(dir, "logs"))
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			if err != nil {
				t.Fatalf("%v\nstdout:\n%s\nstderr:\n%s", err, stdout.String(), stderr.String())
			}
			lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
			if last := lines[len(lines)-1]; !resultLine.MatchString(last) || !strings.Contains(last, "scenario="+scenario+" nodes=3 size=1048576 ") {
				t.Errorf("last line %q is not the RESULT line", last)
			}
			r, err := ReadJSON(js)
			if err != nil {
				t.Fatal(err)
			}
			if r.Mode != "testbed" {
				t.Errorf("mode %q", r.Mode)
			}
			// The nodes' page choice is the machine's: the report says it.
			if !slices.ContainsFunc(r.Notes, func(n string) bool {
				return strings.HasPrefix(n, SysOurs+": object buffers on ") && strings.Contains(n, " pages (")
			}) {
				t.Errorf("no note on ours's pages in %q", r.Notes)
			}
			for _, res := range r.Results {
				forced := strings.HasPrefix(res.System, "d=")
				ours := res.System == SysOurs || res.System == SysNaive || res.System == SysChainLeaf || forced
				if ours && (!res.ok() || len(res.Times) != 1 || res.Median <= 0) {
					t.Errorf("%s: %s %q times %v", res.System, res.Status, res.Reason, res.Times)
				}
				// The members' own CPU accounting, and MPI's, per call. Ours
				// is measured for every rep; its value may be 0: a smoke
				// run's small operation costs less than the noise of the
				// idle baseline subtracted from it (a heartbeat in the
				// baseline's window), and a check of > 0 failed so on CI's
				// machine (d=1: [0]).
				if ours && res.ok() && (len(res.CPU) != len(res.Times) || slices.ContainsFunc(res.CPU, func(c float64) bool { return c < 0 })) {
					t.Errorf("%s: CPU per rep %v for times %v: want one measurement (>= 0) each", res.System, res.CPU, res.Times)
				}
				if strings.HasPrefix(res.System, "mpi") && res.ok() && res.CPUMedian <= 0 {
					t.Errorf("%s: the RESULT line carried no cpu_s", res.System)
				}
				if forced && "d="+strconv.Itoa(int(res.Extra["degree"])) != res.System {
					t.Errorf("%s: the reduce ran with degree %v", res.System, res.Extra["degree"])
				}
				if res.System == SysChainLeaf && res.Extra["chain_leaf"] != 1 {
					t.Errorf("%s: the reduce ran with a d-ary tree", res.System)
				}
				// The control plane's floor is ours to measure, where the
				// scenario has a round-trip pattern.
				if (res.System == SysActorRTT || res.System == SysDataRTT) && scenario != "degree" && (!res.ok() || len(res.Times) != 1 || res.Median <= 0) {
					t.Errorf("%s: %s %q times %v", res.System, res.Status, res.Reason, res.Times)
				}
				if !ours && !res.ok() {
					// A peer's own failure is reported, not ours to fail
					// on, unless the test command installed the peers
					// (bench/peers/install left out Dask's NumPy, and
					// the peer failed unseen); a system skipped where the
					// scenario has no use for it is only reported.
					if os.Getenv("HOPLITE_PEERS_INSTALLED") == "1" && res.Status == StatusFailed {
						t.Errorf("peer %s: %s: %s (HOPLITE_PEERS_INSTALLED=1: bench/peers/install ran)", res.System, res.Status, res.Reason)
					} else {
						t.Logf("peer %s: %s: %s", res.System, res.Status, res.Reason)
					}
				}
			}
			if t.Failed() {
				t.Logf("stdout:\n%s\nstderr:\n%s", stdout.String(), stderr.String())
			}
		})
	}
	// An inline AllReduce on hoplite node processes, with the result
	// pushed to the participants (ours) and located by them (no-push,
	// nodes started with -no-inline-push); the agents verify both.
	t.Run("allreduce-inline", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(t.Context(), 4*time.Minute)
		defer cancel()
		dir := t.TempDir()
		js := filepath.Join(dir, "r.json")
		cmd := exec.CommandContext(ctx, bin, "bench", "allreduce", "--testbed", "--testbed-script", script, "--nodes", "3",
			"--testbed-prefix", prefix, "--testbed-net", strconv.Itoa(net),
			"--size", "1KiB", "--reps", "2", "--warmup", "0", "--peers", "no-push", "--json", js)
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("%v\n%s", err, out)
		}
		r, err := ReadJSON(js)
		if err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for _, res := range r.Results {
			seen[res.System] = true
			if (res.System == SysOurs || res.System == SysNoPush) && (!res.ok() || len(res.Times) != 2) {
				t.Errorf("%s: %s %q times %v\n%s", res.System, res.Status, res.Reason, res.Times, out)
			}
		}
		if !seen[SysOurs] || !seen[SysNoPush] {
			t.Errorf("systems %v, want %s and %s", seen, SysOurs, SysNoPush)
		}
	})
}

// A report's pages note comes from the first node log of each system
// that has the warm-up's line; a system without one gets no note.
func TestPagesNotes(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	chosen := write("a.log", `{"level":"info","msg":"joined","time":"x"}`+"\n"+
		`{"level":"info","member":"m","msg":"object buffers: huge pages (first touch 77µs/MiB with huge pages, 3.874ms/MiB with 4 KiB)","time":"x"}`+"\n")
	forced := write("b.log", `{"level":"info","msg":"object buffers: small pages (forced)","time":"x"}`+"\n")
	none := write("c.log", `{"level":"info","msg":"joined","time":"x"}`+"\n")
	tr := &testbedRun{}
	tr.notePages(SysOurs, chosen)
	tr.notePages(SysOurs, forced) // the first log read for a system stands
	tr.notePages(SysSmallPages, forced)
	tr.notePages(SysNaive, none)
	got := tr.pagesNotes([]system{{name: SysOurs}, {name: SysNaive}, {name: SysSmallPages}})
	want := []string{
		SysOurs + ": object buffers on huge pages (first touch 77µs/MiB with huge pages, 3.874ms/MiB with 4 KiB), host 0's node",
		SysSmallPages + ": object buffers on small pages (forced), host 0's node",
	}
	if !slices.Equal(got, want) {
		t.Errorf("pagesNotes = %q, want %q", got, want)
	}
}
