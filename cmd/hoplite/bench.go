package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/hoplite-go/hoplite/bench"
)

const benchUsage = `usage: hoplite bench <scenario> [flags]

Runs one of the thesis's benchmark scenarios on N hosts with B up and B
down each, and compares Hoplite ("ours") with the naive baseline and the
peers in the same run: in process by default (an embedded cluster whose
in-memory data plane emulates each host's link), or with --testbed on the
network-namespace testbed (bench/testbed; root), one hoplite node per
host, OpenMPI, Dask and Gloo as peers. A progress bar goes to stderr; stdout gets
a table and, last, one RESULT line per comparison:

  RESULT scenario=broadcast nodes=8 size=33554432 ours=0.70s ideal=0.671s naive=4.9s ...

"hoplite bench failure --degree 1,2,n,chain-leaf" measures the reduce
repair's trade-off: every shape failure-free (ours: the cost model's; d=2;
...) and with host 1 killed at 50 %% of that shape's own failure-free
median (ours-failure, d=2-failure, ...); a second table (and the JSON's
trade_offs) gives each one's failure/free ratio and both times over ours
failure-free.

scenarios:
%s
"hoplite bench p2p" without --testbed and without any of the flags above
the legacy ones runs the two-process loopback benchmark instead
(hoplite bench p2p-tcp -h). "hoplite bench ops" times small-object
Puts, Gets and Deletes per second (hoplite bench ops -h). "hoplite bench routes"
times one object's Put and Get through every client route against the
member-to-member transfer (hoplite bench routes -h). "hoplite bench scale-plot -o F.png R.json..."
draws time / (S/B) against N from --json reports of several N.

flags:
`

// benchFlags are the flags of `hoplite bench <scenario>`.
type benchFlags struct {
	nodes, reps, warmup, net                 int
	size, bandwidth, peers, interval, degree string
	jsonPath, plotPath                       string
	testbed, tls, sequential, fresh          bool
	load                                     int
	loadFor                                  time.Duration
	script, binary, peersDir, logDir, prefix string
	chunk, logLevel, profile, nodeProcs      string
	sizeMiB, chunkKiB, profileSeconds        int
	linkMbps                                 float64
}

func (f *benchFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.nodes, "nodes", 8, "N: hosts")
	fs.StringVar(&f.size, "size", "32MiB", "object size S, or several: 1KiB,32KiB,1MiB,32MiB,256MiB")
	fs.StringVar(&f.bandwidth, "bandwidth", "400mbit", "B: each host's up and down link (400mbit, 1gbit, 50MB/s)")
	fs.StringVar(&f.peers, "peers", "", "systems to compare with ours: naive,mpi,dask,gloo,actor (all but naive and actor-locates need --testbed; actor-locates is ours with every Locate as an actor message instead of on the data plane; star-gather is ours with a sliced AllReduce gathering every slice from its root instead of around the ring; sliced is ours with every AllReduce forced to the sliced shape (the allreduce scenario); go-procs is ours with every testbed node at Go's default GOMAXPROCS instead of its share of the CPUs; any-target is ours with each Reduce's target named as an application names it, its coordinator on whichever member hosts the target's shard (ours picks a target whose shard is on the caller's member); kernel-slack is ours with every testbed node at the kernel's timer slack (hoplite node -timer-slack 0); lazy-free is ours with every testbed node's Go runtime giving freed memory back lazily (GODEBUG=madvdontneed=0); small-pages and huge-pages are ours with every testbed node's large object buffers on 4 KiB or transparent huge pages (hoplite node -pages) instead of the warm-up's measured choice; cold is ours with every testbed node reporting ready without its warm-up (the no-warm-up experiment: no data-plane connections to its peers, no -link-rate chunk size, until the first operations; 4 KiB pages for its object buffers); ui is ours with a client reading host 0's live view feed (/live/feed) during each repetition; no-push is ours with an inline AllReduce's participants locating its result instead of receiving it with their Gets; actor is the actor control plane's floor: bare Proto.Actor round trips between the nodes in the scenario's fan-in or fan-out; data is the data plane's: the same round trips as bare control requests on the data plane, the way a Get's Locate travels; echo is the network's: the same round trips of 64 bytes over TCP in C, bench/peers/echo, p2p and broadcast)")
	fs.IntVar(&f.reps, "reps", 3, "measured repetitions per system and size")
	fs.IntVar(&f.warmup, "warmup", 0, "unrecorded repetitions before them on each of ours's clusters (naive too; each peer launch runs its own warm-up); "+
		"unless 0, in interleaved rounds each of ours's measured reps also follows one of its own. "+
		"Default 0: every figure is what an application's operations get, the first ones included")
	fs.BoolVar(&f.fresh, "fresh", false, "a new cluster for every measured repetition of ours's systems (its start not timed; --warmup reps on it first): "+
		"what the first operations on a cluster cost, as a tracked figure")
	fs.IntVar(&f.load, "load", 0, "run N CPU-bound processes beside the cluster for the whole run (a busy machine; each stops by itself after --load-for, "+
		"when the run ends, or with the run's process); every result records the load average either way")
	fs.DurationVar(&f.loadFor, "load-for", bench.DefaultLoadFor, "with --load: the longest a load process runs (0: the default)")
	fs.BoolVar(&f.sequential, "sequential", false, "run each system's repetitions back to back, one system after another, each peer in one launch of --reps "+
		"(the order before interleaving). Default: a comparison's repetitions interleave across its systems: warm-ups first, then rep 1 of every system, rep 2 of every system, ... "+
		"(the order rotated each round; a peer launched once per rep, a best peer's algorithm chosen by an unrecorded sweep first; failure variants after their failure-free rounds), "+
		"so that drift in the machine's load falls on every system alike. --profile runs sequentially anyway")
	fs.StringVar(&f.interval, "interval", "", "async: arrival interval(s), e.g. 0,50ms,200ms (default S/(4B))")
	fs.StringVar(&f.degree, "degree", "", "reduce trees to compare with the chosen degree: d[,d...] (d >= 1, n, or chain-leaf: the published code's binary tree of chains; chosen, the cost model's, is always measured), chosen, or all = 1,2,n,chain-leaf (degree scenario: all). "+
		"failure: each one at both ends, d=2 failure-free and d=2-failure killed at 50 % of d=2's own failure-free median, in failure-reduce only (a broadcast has no reduce tree)")
	fs.StringVar(&f.jsonPath, "json", "", "write every measurement and the machine to this JSON file")
	fs.StringVar(&f.plotPath, "plot", "", "draw the results into this PNG file")
	fs.BoolVar(&f.testbed, "testbed", false, "run on the network-namespace testbed (root; re-runs itself under bench/testbed run)")
	fs.BoolVar(&f.tls, "tls", false, "with --testbed: also run ours with every node over mutual TLS (system ours-tls, certificates made for the run in the log dir), its repetitions interleaved with ours's")
	fs.StringVar(&f.script, "testbed-script", "", "the testbed script (default: bench/testbed of the source tree)")
	fs.StringVar(&f.prefix, "testbed-prefix", "hpb", "the testbed's namespace prefix")
	fs.IntVar(&f.net, "testbed-net", 3, "the testbed's network: hosts are 198.18.NET.1..N")
	fs.StringVar(&f.binary, "hoplite", "", "the hoplite binary the testbed nodes run (default: this one)")
	fs.StringVar(&f.peersDir, "peers-dir", "", "the peers' scripts (default: bench/peers beside the testbed script)")
	fs.StringVar(&f.logDir, "log-dir", "", "where the testbed's node and peer logs go (default: a temporary directory)")
	fs.StringVar(&f.chunk, "chunk-size", "auto", "Hoplite's transfer chunk size, or auto: about 5 ms of the measured bandwidth (256KiB at 400mbit)")
	fs.StringVar(&f.nodeProcs, "node-procs", "auto", "with --testbed: GOMAXPROCS of each node: auto (its share of this machine's CPUs, NumCPU/N, at least 1), go (Go's default: every CPU), or a number")
	fs.StringVar(&f.profile, "profile", "", "with --testbed: write Go profiles of ours's nodes (started with -pprof) to this directory, "+
		"DIR/host-H-{cpu,heap,allocs,mutex,block}.pb.gz (DIR/<comparison>/... with several sizes or intervals). "+
		"The CPU, allocs, mutex and block profiles cover one window of --profile-seconds opened just before ours's first measured rep "+
		"(the warm-up is outside it); if the measured reps end sooner, ours repeats the operation unrecorded until the window closes, "+
		"if they outlast it, it holds their first seconds (the report's notes say which). The heap is fetched after the window. "+
		"Not with --tls or the failure scenario")
	fs.IntVar(&f.profileSeconds, "profile-seconds", 10, fmt.Sprintf("with --profile: the profile window in seconds (1..%d)", bench.MaxProfileSeconds))
	fs.StringVar(&f.logLevel, "log-level", "", "in process: print Hoplite's logs at this level (error, info, debug) to stderr")
	// The flags of the earlier `hoplite bench broadcast`, still accepted.
	fs.IntVar(&f.sizeMiB, "size-mib", 0, "legacy: object size in MiB (overrides -size)")
	fs.Float64Var(&f.linkMbps, "link-mbps", 0, "legacy: B in Mbit/s (overrides -bandwidth)")
	fs.IntVar(&f.chunkKiB, "chunk-kib", 0, "legacy: chunk size in KiB (overrides -chunk-size)")
}

// legacyBenchFlags are accepted but not shown (the earlier bench command's).
var legacyBenchFlags = []string{"size-mib", "link-mbps", "chunk-kib"}

// newScenarioFlags are the flags only the scenario runner has: with none
// of them (and no --testbed), `bench p2p` is the loopback benchmark.
var newScenarioFlags = []string{"nodes", "bandwidth", "peers", "warmup", "interval", "degree", "json", "plot", "testbed",
	"testbed-script", "testbed-prefix", "testbed-net", "hoplite", "peers-dir", "log-dir", "log-level", "size-mib", "link-mbps", "chunk-kib",
	"profile", "profile-seconds", "sequential", "node-procs", "fresh", "load", "load-for"}

// legacyP2P says whether `bench p2p ARGS` means the two-process loopback
// benchmark (p2p.go).
func legacyP2P(args []string) bool {
	for _, a := range args {
		name := strings.TrimLeft(a, "-")
		name, _, _ = strings.Cut(name, "=")
		if strings.HasPrefix(a, "-") && slices.Contains(newScenarioFlags, name) {
			return false
		}
	}
	return true
}

func benchCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	usage := func() { fmt.Fprintf(stderr, benchUsage, strings.TrimRight(bench.ScenarioHelp(), "\n")) }
	if len(args) == 0 || strings.HasPrefix(args[0], "-") {
		fs := flag.NewFlagSet("bench", flag.ContinueOnError)
		fs.SetOutput(flagOutput(stderr, "bench"))
		var f benchFlags
		f.register(fs)
		fs.Usage = func() {
			usage()
			printFlags(fs, legacyBenchFlags...)
		}
		// Flags before the scenario: their errors first (an unknown flag
		// is named), then the missing scenario.
		if err := fs.Parse(args); err != nil {
			return err
		}
		return usageError{"missing scenario (the first argument): " + strings.Join(bench.Scenarios, ", ")}
	}
	scenario := args[0]
	if scenario == "p2p-tcp" {
		return p2pTCPCommand(ctx, "bench p2p-tcp", args[1:], stdout, stderr)
	}
	if scenario == "ops" {
		return benchOpsCommand(ctx, args[1:], stdout, stderr)
	}
	if scenario == "routes" {
		return benchRoutesCommand(ctx, args[1:], stdout, stderr)
	}
	if scenario == "scale-plot" {
		return scalePlotCommand(args[1:], stdout, stderr)
	}
	if scenario == bench.LoadSpinCommand {
		return loadSpinCommand(args[1:], stderr)
	}
	if !slices.Contains(bench.Scenarios, scenario) {
		return usageError{fmt.Sprintf("unknown scenario %q: want one of %s", scenario, strings.Join(bench.Scenarios, ", "))}
	}
	fs := flag.NewFlagSet("bench "+scenario, flag.ContinueOnError)
	fs.SetOutput(flagOutput(stderr, "bench "+scenario))
	var f benchFlags
	f.register(fs)
	fs.Usage = func() {
		usage()
		printFlags(fs, legacyBenchFlags...)
	}
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("unexpected arguments %q", fs.Args())}
	}
	opts, err := f.options(scenario)
	if err != nil {
		return asUsage(err)
	}
	opts.Command = append([]string{"hoplite", "bench"}, args...)
	if c := os.Getenv(benchCommandEnv); c != "" && f.testbed {
		// Re-run under the testbed script: record what the user typed.
		opts.Command = strings.Split(c, "\x1f")
	}
	opts.Progress, opts.ProgressTTY = stderr, isTerminal(stderr)
	if f.logLevel != "" {
		lvl, err := parseLogLevel(f.logLevel)
		if err != nil {
			return err
		}
		opts.Log, opts.LogLevel = stderr, lvl
	}
	if f.testbed {
		tb, inside, err := bench.TestbedFromEnv()
		if err != nil {
			return err
		}
		if !inside {
			return reexecInTestbed(ctx, &f, opts, args, stdout, stderr)
		}
		if tb.Binary = f.binary; tb.Binary == "" {
			if tb.Binary, err = os.Executable(); err != nil {
				return err
			}
		}
		if tb.PeersDir = f.peersDir; tb.PeersDir == "" {
			tb.PeersDir = filepath.Join(filepath.Dir(os.Getenv("HOPLITE_TESTBED")), "peers")
		}
		tb.LogDir = f.logDir
		opts.Testbed = tb
	}
	report, err := bench.Run(ctx, *opts)
	if err != nil {
		return err
	}
	report.WriteTable(stdout)
	if f.jsonPath != "" {
		if err := report.WriteJSON(f.jsonPath); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "wrote %s\n", f.jsonPath)
	}
	if f.plotPath != "" {
		if err := bench.Plot(report, f.plotPath); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "wrote %s\n", f.plotPath)
	}
	for _, line := range report.ResultLines() {
		fmt.Fprintln(stdout, line)
	}
	return nil
}

func (f *benchFlags) options(scenario string) (*bench.Options, error) {
	// Zero options mean defaults to bench.Run; zero flags are mistakes.
	if f.reps < 1 || f.warmup < 0 {
		return nil, errors.New("need --reps >= 1 and --warmup >= 0")
	}
	if f.nodes < 2 {
		return nil, fmt.Errorf("--nodes %d: need at least 2", f.nodes)
	}
	if f.tls && !f.testbed {
		return nil, usageError{"--tls needs --testbed: the in-process cluster runs without TLS (hoplite bench p2p-tcp --tls measures TLS on loopback)"}
	}
	if f.tls && scenario == "failure" {
		return nil, usageError{"--tls is not for the failure scenario"}
	}
	if f.profile != "" {
		switch {
		case !f.testbed:
			return nil, usageError{"--profile needs --testbed: it profiles the testbed's hoplite node processes (in process, go test -cpuprofile profiles the embedded cluster)"}
		case f.tls:
			return nil, usageError{"--profile is not for --tls runs (ours-tls's reps would run inside ours's profile window)"}
		case scenario == "failure":
			return nil, usageError{"--profile is not for the failure scenario (a fresh cluster per repetition)"}
		case f.profileSeconds < 1 || f.profileSeconds > bench.MaxProfileSeconds:
			return nil, usageError{fmt.Sprintf("--profile-seconds %d: want 1..%d", f.profileSeconds, bench.MaxProfileSeconds)}
		}
	}
	if f.fresh && f.profile != "" {
		return nil, usageError{"--profile is not for --fresh runs (a fresh cluster per repetition)"}
	}
	if f.load < 0 || f.loadFor < 0 {
		return nil, usageError{"need --load >= 0 and --load-for >= 0 (0: the default)"}
	}
	o := &bench.Options{Scenario: scenario, Nodes: f.nodes, Reps: f.reps, Warmup: f.warmup, TLS: f.tls, Sequential: f.sequential,
		Fresh: f.fresh, Load: f.load, LoadFor: f.loadFor}
	var err error
	if f.profile != "" {
		// Absolute: the run under the testbed script, and the report,
		// name the same directory.
		if o.Profile, err = filepath.Abs(f.profile); err != nil {
			return nil, err
		}
		o.ProfileSeconds = f.profileSeconds
	}
	if f.sizeMiB > 0 {
		o.Sizes = []int64{int64(f.sizeMiB) << 20}
	} else if o.Sizes, err = bench.ParseSizes(f.size); err != nil {
		return nil, fmt.Errorf("-size: %w", err)
	}
	if f.linkMbps > 0 {
		o.Bandwidth = bench.Bandwidth{BitsPerSecond: f.linkMbps * 1e6}
	} else if o.Bandwidth, err = bench.ParseBandwidth(f.bandwidth); err != nil {
		return nil, fmt.Errorf("-bandwidth: %w", err)
	}
	for _, p := range strings.Split(f.peers, ",") {
		if p = strings.TrimSpace(p); p != "" {
			o.Peers = append(o.Peers, p)
		}
	}
	if err := bench.CheckPeers(o.Peers); err != nil {
		return nil, err
	}
	if f.interval != "" {
		if scenario != "async" {
			return nil, errors.New("-interval is for the async scenario")
		}
		if o.Intervals, err = bench.ParseDurations(f.interval); err != nil {
			return nil, fmt.Errorf("-interval: %w", err)
		}
	}
	if o.Degrees, err = parseDegrees(f.degree, scenario); err != nil {
		return nil, err
	}
	chunk := int64(f.chunkKiB) << 10
	if chunk == 0 && f.chunk != "auto" {
		if chunk, err = bench.ParseSize(f.chunk); err != nil || chunk < 1 || chunk > 64<<20 {
			return nil, fmt.Errorf("-chunk-size %q: want 1 byte .. 64MiB, or auto", f.chunk)
		}
	}
	o.ChunkSize = int(chunk)
	switch f.nodeProcs {
	case "auto", "":
	case "go":
		o.NodeProcs = bench.NodeProcsGo
	default:
		if o.NodeProcs, err = strconv.Atoi(f.nodeProcs); err != nil || o.NodeProcs < 1 || o.NodeProcs > 1024 {
			return nil, fmt.Errorf("-node-procs %q: want auto, go or 1..1024", f.nodeProcs)
		}
	}
	return o, nil
}

// parseDegrees reads --degree: "all" (1, 2, N and chain-leaf), "chosen"
// (none forced) or a list (in which chosen, always measured, adds
// nothing); the degree scenario defaults to all.
func parseDegrees(s, scenario string) ([]int, error) {
	if s == "" && scenario == "degree" {
		s = "all"
	}
	if s == "" {
		return nil, nil
	}
	switch scenario {
	case "degree", "reduce", "allreduce", "async", "failure":
	default:
		return nil, fmt.Errorf("-degree is for the reduce scenarios, not %s", scenario)
	}
	switch s {
	case "all":
		return []int{1, 2, bench.DegreeN, bench.DegreeChainLeaf}, nil
	case "chosen":
		return []int{}, nil
	}
	var out []int
	for _, p := range strings.Split(s, ",") {
		p = strings.TrimSpace(p)
		if p == "n" || p == "N" {
			out = append(out, bench.DegreeN)
			continue
		}
		if p == bench.SysChainLeaf {
			out = append(out, bench.DegreeChainLeaf)
			continue
		}
		if p == "chosen" {
			continue // the cost model's: always measured (ours)
		}
		d, err := strconv.Atoi(p)
		if err != nil || d < 1 {
			return nil, fmt.Errorf("-degree %q: want d[,d...] (d >= 1, n, chain-leaf or chosen), chosen or all", s)
		}
		out = append(out, d)
	}
	return out, nil
}

// benchCommandEnv carries the user's command line into the re-run under
// the testbed script (which adds flags of its own).
const benchCommandEnv = "HOPLITE_BENCH_COMMAND"

// reexecInTestbed runs this same command under `bench/testbed run`, which
// creates the namespaces and always tears them down.
func reexecInTestbed(ctx context.Context, f *benchFlags, o *bench.Options, args []string, stdout, stderr io.Writer) error {
	if os.Geteuid() != 0 {
		return errors.New("--testbed needs root: it creates network namespaces, a bridge and tc qdiscs")
	}
	script := f.script
	if script == "" {
		var err error
		if script, err = findTestbedScript(); err != nil {
			return err
		}
	}
	exe, err := os.Executable()
	if err != nil {
		return err
	}
	cmdArgs := []string{"run", "--hosts", strconv.Itoa(o.Nodes), "--bandwidth", o.Bandwidth.TC(),
		"--prefix", f.prefix, "--net", strconv.Itoa(f.net), "--", exe, "bench"}
	cmdArgs = append(cmdArgs, args...)
	if f.binary == "" {
		cmdArgs = append(cmdArgs, "--hoplite", exe)
	}
	cmd := exec.CommandContext(ctx, script, cmdArgs...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, stdout, stderr
	cmd.Env = append(os.Environ(), benchCommandEnv+"="+strings.Join(o.Command, "\x1f"))
	// Ctrl-C reaches the script too (same process group); give it time to
	// tear the testbed down rather than killing it.
	cmd.Cancel = func() error { return cmd.Process.Signal(os.Interrupt) }
	cmd.WaitDelay = 30 * time.Second
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s run: %w", script, err)
	}
	return nil
}

// findTestbedScript looks for bench/testbed in the working directory and
// its parents (the source tree), then beside the executable.
func findTestbedScript() (string, error) {
	var dirs []string
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			dirs = append(dirs, d)
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	if exe, err := os.Executable(); err == nil {
		dirs = append(dirs, filepath.Dir(exe), filepath.Dir(filepath.Dir(exe)))
	}
	for _, d := range dirs {
		p := filepath.Join(d, "bench", "testbed")
		if st, err := os.Stat(p); err == nil && !st.IsDir() && st.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", errors.New("bench/testbed not found in the working directory, its parents or beside the executable; pass --testbed-script")
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

const scalePlotUsage = `usage: hoplite bench scale-plot -o FILE.png [-systems ours,mpi-best] REPORT.json...

Reads --json reports of the same scenarios at several N (and possibly
different bandwidths) and draws each system's median time over the ideal
(S/B for broadcast and reduce) against N, with its min-max range; prints
the points as a table.

flags:
`

// scalePlotCommand is `hoplite bench scale-plot`.
func scalePlotCommand(args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench scale-plot", flag.ContinueOnError)
	fs.SetOutput(flagOutput(stderr, "bench scale-plot"))
	out := fs.String("o", "", "the PNG file to write")
	systems := fs.String("systems", "ours,mpi-best", "the systems to draw (comma-separated; all: every one)")
	title := fs.String("title", "time / (S/B) against N", "the plot's title")
	fs.Usage = func() {
		fmt.Fprint(stderr, scalePlotUsage)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *out == "" || fs.NArg() == 0 {
		return usageError{"scale-plot needs -o FILE.png and at least one report"}
	}
	var reports []*bench.Report
	for _, path := range fs.Args() {
		r, err := bench.ReadJSON(path)
		if err != nil {
			return err
		}
		reports = append(reports, r)
	}
	var keep []string
	if *systems != "all" {
		keep = strings.Split(*systems, ",")
	}
	pts := bench.ScalePoints(reports, keep)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tsystem\tN\tmedian/ideal\tmin\tmax")
	for _, p := range pts {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%.3f\t%.3f\t%.3f\n", p.Scenario, p.System, p.Nodes, p.Ratio, p.Lo, p.Hi)
	}
	tw.Flush()
	if err := bench.PlotScale(pts, *title, *out); err != nil {
		return err
	}
	fmt.Fprintf(stderr, "wrote %s\n", *out)
	return nil
}

// loadSpinCommand is `hoplite bench load-spin --for D`, not listed: one
// CPU-bound load process of `hoplite bench --load` (bench.Spin), which
// ends after D or when its standard input closes.
func loadSpinCommand(args []string, stderr io.Writer) error {
	fs := flag.NewFlagSet("bench "+bench.LoadSpinCommand, flag.ContinueOnError)
	fs.SetOutput(flagOutput(stderr, "bench "+bench.LoadSpinCommand))
	d := fs.Duration("for", bench.DefaultLoadFor, "how long to run at most")
	fs.Usage = func() {
		fmt.Fprintf(stderr, "usage: hoplite bench %s --for D\n\nOne CPU-bound load process of hoplite bench --load: it spins until D has passed or its standard input closes.\n\nflags:\n", bench.LoadSpinCommand)
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *d <= 0 || fs.NArg() > 0 {
		return usageError{"load-spin takes --for D (D > 0) only"}
	}
	bench.Spin(os.Stdin, time.Now().Add(*d))
	return nil
}
