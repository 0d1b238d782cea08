package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/remote"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/certs"
	"github.com/hoplite-go/hoplite/internal/experiments"
	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/storenode"
)

// Testbed is where a testbed run happens: what `bench/testbed run`
// exports, and the programs the run starts.
type Testbed struct {
	// Hosts are the hosts' addresses, host 0 first.
	Hosts []string
	// Namespaces are the hosts' network namespaces.
	Namespaces []string
	// Bridge is the root namespace's address on the bridge: the driver
	// binds its actor system there.
	Bridge string
	// Bandwidth is the shaping the script applied (tc units).
	Bandwidth string
	// Binary is the hoplite binary the nodes run.
	Binary string
	// PeersDir holds the peers' scripts (PeersDir/mpi/run, PeersDir/dask/run,
	// PeersDir/gloo/run).
	PeersDir string
	// LogDir receives every node's and peer's log (default: a new
	// temporary directory).
	LogDir string
}

// TestbedFromEnv reads the variables `bench/testbed run` sets; ok is false
// when HOPLITE_TESTBED_HOSTS is not set (not inside a testbed).
func TestbedFromEnv() (tb *Testbed, ok bool, err error) {
	hosts := os.Getenv("HOPLITE_TESTBED_HOSTS")
	if hosts == "" {
		return nil, false, nil
	}
	tb = &Testbed{Hosts: strings.Split(hosts, ","), Namespaces: strings.Split(os.Getenv("HOPLITE_TESTBED_NS"), ","),
		Bridge: os.Getenv("HOPLITE_TESTBED_BRIDGE_ADDR"), Bandwidth: os.Getenv("HOPLITE_TESTBED_BANDWIDTH")}
	if len(tb.Namespaces) != len(tb.Hosts) || tb.Bridge == "" {
		return nil, true, fmt.Errorf("HOPLITE_TESTBED_HOSTS (%d hosts), HOPLITE_TESTBED_NS (%d) and HOPLITE_TESTBED_BRIDGE_ADDR (%q) do not match",
			len(tb.Hosts), len(tb.Namespaces), tb.Bridge)
	}
	return tb, true, nil
}

// testbedRun is the driver: a Proto.Actor remote actor system on the
// bridge that talks to the nodes' store nodes and bench agents, and with
// --tls a second one over mutual TLS for the nodes of ours-tls.
type testbedRun struct {
	o         *Options
	tb        *Testbed
	system    *actor.ActorSystem
	tlsSystem *actor.ActorSystem // nil without --tls
	certs     certs.Files        // the run's certificates (--tls)
	prog      *progress
	logDir    string
	gen       int
	// pages is what each system's nodes chose for the pages of their
	// large buffers, as host 0's node logged it (see notePages).
	pages map[string]string
}

func startTestbedRun(_ context.Context, o *Options, prog *progress) (t *testbedRun, err error) {
	tb := o.Testbed
	if len(tb.Hosts) < o.Nodes {
		return nil, fmt.Errorf("the testbed has %d hosts, the run needs %d", len(tb.Hosts), o.Nodes)
	}
	if tb.Binary == "" {
		return nil, errors.New("no hoplite binary for the testbed nodes")
	}
	logDir := tb.LogDir
	if logDir == "" {
		if logDir, err = os.MkdirTemp("", "hoplite-bench-"); err != nil {
			return nil, err
		}
	} else if err := os.MkdirAll(logDir, 0o755); err != nil {
		return nil, err
	}
	driverLog, err := os.Create(filepath.Join(logDir, "driver.log"))
	if err != nil {
		return nil, err
	}
	t = &testbedRun{o: o, tb: tb, prog: prog, logDir: logDir}
	port, err := freePort(tb.Bridge)
	if err != nil {
		return nil, fmt.Errorf("driver address on the bridge %s: %w", tb.Bridge, err)
	}
	if t.system, err = startDriver(driverRemote(tb.Bridge, port), driverLog); err != nil {
		return nil, fmt.Errorf("start the driver on %s:%d: %w", tb.Bridge, port, err)
	}
	where := fmt.Sprintf("driver %s:%d", tb.Bridge, port)
	if o.TLS {
		if t.tlsSystem, t.certs, err = startTLSDriver(tb, logDir, driverLog); err != nil {
			t.system.Shutdown()
			return nil, err
		}
		where += fmt.Sprintf(", over TLS %s (certificates in %s)", t.tlsSystem.Address(), filepath.Dir(t.certs.CA))
	}
	prog.logf("testbed: %d hosts, %s, logs in %s", o.Nodes, where, logDir)
	return t, nil
}

// driverRemote is the remote configuration of the driver's plain actor
// system: the members' own (cluster.RemoteConfig). Proto.Actor's default
// preallocates a million-slot queue for every peer the driver writes to,
// 16 MiB each: 256 MiB for the two 8-host clusters of a 1 KiB comparison,
// which the driver's collector then marked in the middle of the
// repetitions (one cycle took 1.3 s of CPU on the 2 CPUs the members
// share).
func driverRemote(host string, port int) *remote.Config {
	return cluster.RemoteConfig(host, port, nil, nil)
}

// startDriver starts an actor system with remote rc, logging to log.
func startDriver(rc *remote.Config, log io.Writer) (system *actor.ActorSystem, err error) {
	system = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.NewTextHandler(log, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}))
	defer func() {
		if p := recover(); p != nil { // Proto.Actor panics on a port in use
			system.Shutdown()
			system, err = nil, fmt.Errorf("%v", p)
		}
	}()
	remote.NewRemote(system, rc).Start()
	return system, nil
}

// tlsHosts are the SANs of a testbed run's member certificate: every
// host, and the bridge address the driver serves on (the nodes dial it
// back with its IP as the TLS server name).
func tlsHosts(tb *Testbed) []string {
	return append(slices.Clone(tb.Hosts), tb.Bridge)
}

// startTLSDriver makes the run's certificates in logDir/tls (one CA, one
// member certificate for every host and the bridge, which the driver
// presents too) and starts the driver's actor system for the nodes of
// ours-tls: remote over mutual TLS (cluster.RemoteConfig) on the bridge.
func startTLSDriver(tb *Testbed, logDir string, log io.Writer) (*actor.ActorSystem, certs.Files, error) {
	files, err := certs.Generate(filepath.Join(logDir, "tls"), tlsHosts(tb))
	if err != nil {
		return nil, certs.Files{}, err
	}
	cfg, err := cluster.TLSConfig(files.Cert, files.Key, files.CA)
	if err != nil {
		return nil, certs.Files{}, err
	}
	port, err := freePort(tb.Bridge)
	if err != nil {
		return nil, certs.Files{}, fmt.Errorf("TLS driver address on the bridge %s: %w", tb.Bridge, err)
	}
	l := logrus.New()
	l.SetOutput(log)
	l.SetLevel(logrus.WarnLevel)
	system, err := startDriver(cluster.RemoteConfig(tb.Bridge, port, cfg, l), log)
	if err != nil {
		return nil, certs.Files{}, fmt.Errorf("start the TLS driver on %s:%d: %w", tb.Bridge, port, err)
	}
	return system, files, nil
}

func (t *testbedRun) close() {
	t.system.Shutdown()
	if t.tlsSystem != nil {
		t.tlsSystem.Shutdown()
	}
}

// systemFor is the driver's actor system for s's nodes.
func (t *testbedRun) systemFor(s system) *actor.ActorSystem {
	if s.tls {
		return t.tlsSystem
	}
	return t.system
}

func freePort(host string) (int, error) {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// nodeProc is one `hoplite node` in a namespace.
type nodeProc struct {
	host    int
	cmd     *exec.Cmd
	bind    string
	logPath string
	exited  chan struct{}
	started chan string // the start line, once
	killed  bool
}

var startLine = regexp.MustCompile(`^hoplite node (\S+) address=(\S+) data=(\S+) manage=(\d+) members=(\d+)(?: timer-slack=\S+)?$`)

// nodeSet is the testbed's hoplite cluster for one system: the backend.
type nodeSet struct {
	t      *testbedRun
	sys    *actor.ActorSystem // the driver's, for these nodes (TLS or not)
	procs  []*nodeProc
	manage int // every node's manage port (on its host's address)
	mu     sync.Mutex
}

// open starts the system's cluster (openOnce), again while host 0, the
// caller of the benchmark's Reduces, hosts no directory shard.
func (t *testbedRun) open(ctx context.Context, s system) (backend, error) {
	for try := 1; ; try++ {
		ns, err := t.openOnce(ctx, s)
		if err != nil {
			return nil, err
		}
		if s.anyTarget || t.o.Scenario == "broadcast" {
			return ns, nil
		}
		// The benchmark's Reduces start on host 0 with a target whose
		// shard, and so whose coordinator, is there (TargetID). With many
		// members a member may host none of the shards (64 over 48: about
		// one start in four), and every repetition would fail; the next
		// start places the shards over new incarnations. A member
		// places its shards only once its handshakes are over, after
		// it counts its members (it holds every shard until then), so
		// the probe waits for that first. Any other answer is the
		// measurement's to report, as before.
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		_, err = ns.TargetID(pctx, "placement-probe")
		for errors.Is(err, errPlacementUnsettled) && pctx.Err() == nil {
			time.Sleep(100 * time.Millisecond)
			_, err = ns.TargetID(pctx, "placement-probe")
		}
		cancel()
		if !errors.Is(err, errNoLocalShard) {
			return ns, nil
		}
		if try == maxPlacementTries {
			t.prog.logf("testbed: host 0 hosts none of the directory shards after %d starts; its Reduces will fail", try)
			return ns, nil
		}
		ns.Close()
		t.prog.logf("testbed: host 0 hosts none of the directory shards; starting the %d nodes again (%d of %d)", t.o.Nodes, try+1, maxPlacementTries)
	}
}

// maxPlacementTries bounds how many times open starts a cluster whose
// host 0 hosts no directory shard.
const maxPlacementTries = 4

// errNoLocalShard is TargetID's error when host 0 hosts no directory
// shard.
var errNoLocalShard = errors.New("host 0 hosts no directory shard")

// errPlacementUnsettled is TargetID's error while host 0 still holds
// every shard, as a member does until its first placement: its members
// seen are not yet its shards' owners.
var errPlacementUnsettled = errors.New("host 0's shard placement is not settled")

// openOnce starts one node per host (with the system's experiments, such
// as naive or a forced reduce degree, and the bench agent: every member,
// since the coordinator of a Reduce runs wherever its target's shard is;
// -pprof for ours under --profile; -tls-cert, -tls-key and -tls-ca for
// ours-tls) and waits until every agent sees all N members.
func (t *testbedRun) openOnce(ctx context.Context, s system) (*nodeSet, error) {
	t.gen++
	gen := t.gen % 400
	n := t.o.Nodes
	bindPort, managePort := 20000+gen*2, 30000+gen*2
	var seeds []string
	for h := 0; h < n; h++ {
		seeds = append(seeds, net.JoinHostPort(t.tb.Hosts[h], strconv.Itoa(managePort)))
	}
	if s.tls && t.tlsSystem == nil {
		return nil, errors.New("ours-tls without the driver's TLS actor system (Options.TLS)")
	}
	ns := &nodeSet{t: t, sys: t.systemFor(s), manage: managePort}
	for h := 0; h < n; h++ {
		bind := net.JoinHostPort(t.tb.Hosts[h], strconv.Itoa(bindPort))
		p, err := t.startNode(h, bind, t.nodeArgs(h, s, bind, managePort, seeds), s.name)
		if err != nil {
			ns.Close()
			return nil, err
		}
		ns.procs = append(ns.procs, p)
	}
	deadline := time.Now().Add(60 * time.Second)
	for _, p := range ns.procs {
		select {
		case <-p.started:
		case <-p.exited:
			ns.Close()
			return nil, fmt.Errorf("host %d's node exited before it joined:\n%s", p.host, tailFile(p.logPath, 20))
		case <-time.After(time.Until(deadline)):
			ns.Close()
			return nil, fmt.Errorf("host %d's node did not join within 60s:\n%s", p.host, tailFile(p.logPath, 20))
		case <-ctx.Done():
			ns.Close()
			return nil, ctx.Err()
		}
	}
	// Every member must see every other before the first Put: the
	// directory shards are placed over the members a node sees.
	for h := range ns.procs {
		for {
			res, err := ns.sys.Root.RequestFuture(ns.agent(h), &messages.BenchHello{}, 2*time.Second).Result()
			if r, ok := res.(*messages.BenchHelloReply); ok && err == nil && int(r.GetMembers()) == n {
				break
			}
			if time.Now().After(deadline) {
				ns.Close()
				return nil, fmt.Errorf("host %d's node does not see all %d members within 60s (last: %v %v); its log:\n%s",
					h, n, res, err, tailFile(ns.procs[h].logPath, 20))
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	t.notePages(s.name, ns.procs[0].logPath)
	return ns, nil
}

// pagesLine finds a node's "object buffers: ..." line (internal/member/warmup.go)
// in its JSON log.
var pagesLine = regexp.MustCompile(`"msg":"object buffers: ([^"]*)"`)

// notePages records, once per system, the pages its nodes chose for
// their large buffers: the choice is the machine's (a member measures
// it at its warm-up), so a report says which its figures ran on. A
// node logs it before its start line, which open waited for.
func (t *testbedRun) notePages(sys, logPath string) {
	if _, ok := t.pages[sys]; ok {
		return
	}
	b, err := os.ReadFile(logPath)
	if err != nil {
		return
	}
	if m := pagesLine.FindSubmatch(b); m != nil {
		if t.pages == nil {
			t.pages = map[string]string{}
		}
		t.pages[sys] = string(m[1])
	}
}

// pagesNotes are the report's notes on the pages each system's nodes
// chose, in system order.
func (t *testbedRun) pagesNotes(systems []system) []string {
	var out []string
	for _, s := range systems {
		if p, ok := t.pages[s.name]; ok {
			out = append(out, fmt.Sprintf("%s: object buffers on %s, host 0's node", s.name, p))
		}
	}
	return out
}

// NodeProcsGo in Options.NodeProcs leaves every testbed node at Go's
// default GOMAXPROCS.
const NodeProcsGo = -1

// nodeProcs is the GOMAXPROCS of each testbed node, 0 for Go's default.
//
// The testbed's N hosts share this machine's CPUs, but a Go process
// sizes its scheduler by the machine: eight members on 2 vCPUs each ran
// as if both were theirs. At their share (GOMAXPROCS 1) the same
// operations took as long or less with less CPU each (--peers go-procs
// measures both in one run; docs/benchmarks.md). A member on a host of
// its own has its cores; one of N on a shared machine, its share of them.
func (o *Options) nodeProcs() int {
	switch {
	case o.NodeProcs == NodeProcsGo:
		return 0
	case o.NodeProcs > 0:
		return o.NodeProcs
	}
	return max(1, runtime.NumCPU()/max(o.Nodes, 1))
}

// procsNote says in a testbed report how many CPUs each node's Go
// scheduler used.
func (o *Options) procsNote() string {
	p := o.nodeProcs()
	if p == 0 {
		return fmt.Sprintf("testbed nodes at Go's default GOMAXPROCS (%d, every CPU of the machine)", runtime.NumCPU())
	}
	note := fmt.Sprintf("testbed nodes at GOMAXPROCS %d", p)
	if o.NodeProcs == 0 {
		note += fmt.Sprintf(" (their share of this machine's %d CPUs)", runtime.NumCPU())
	}
	if slices.Contains(o.Peers, "go-procs") {
		note += "; " + SysGoProcs + " at Go's default"
	}
	note += "; timer slack: hoplite node's default"
	if slices.Contains(o.Peers, "kernel-slack") {
		note += ", " + SysKernelSlack + " the kernel's"
	}
	return note
}

// nodeArgs is `ip`'s command line for host h's node of system s.
func (t *testbedRun) nodeArgs(h int, s system, bind string, managePort int, seeds []string) []string {
	args := []string{"netns", "exec", t.tb.Namespaces[h]}
	var env []string
	if p := t.o.nodeProcs(); p > 0 && !s.goProcs {
		env = append(env, "GOMAXPROCS="+strconv.Itoa(p))
	}
	if s.lazyFree {
		env = append(env, "GODEBUG=madvdontneed=0")
	}
	if len(env) > 0 {
		args = append(append(args, "env"), env...)
	}
	args = append(args, t.tb.Binary, "node", "-bind", bind)
	if !s.tls {
		// `hoplite node` refuses plaintext on 198.18.x.x, which is not
		// loopback; but those addresses exist only on this machine, in the
		// testbed's network namespaces and on its bridge (198.18.0.0/15 is
		// the benchmarking range, not routed), and the systems compared run
		// without TLS (the ours-tls column prices TLS).
		args = append(args, "-insecure")
	}
	args = append(args, "-manage-port", strconv.Itoa(managePort), "-seeds", strings.Join(seeds, ","), "-log-format", "json",
		"-capacity", strconv.FormatInt(t.o.capacity(), 10), "-chunk-size", chunkArg(t.o.ChunkSize),
		"-link-rate", strconv.FormatFloat(t.o.Bandwidth.BitsPerSecond, 'f', -1, 64)+"bit",
		// The shaper's burst as bench/testbed sets it: 4 ms at the
		// rate, at least 128 KiB.
		"-link-burst", strconv.FormatInt(max(int64(t.o.Bandwidth.BitsPerSecond/8*0.004), 128<<10), 10))
	exp := s.exp
	exp.BenchAgent = true
	args = append(args, "-"+experiments.Flag, exp.String())
	if s.kernelSlack {
		args = append(args, "-timer-slack", "0")
	}
	if s.pages != "" {
		args = append(args, "-pages", s.pages)
	}
	if t.o.Log != nil {
		// --log-level: the nodes log at it too, into --log-dir.
		args = append(args, "-log-level", t.o.LogLevel.String())
	}
	if s.tls {
		args = append(args, "-tls-cert", t.certs.Cert, "-tls-key", t.certs.Key, "-tls-ca", t.certs.CA)
	}
	if t.o.Profile != "" && s.name == SysOurs {
		args = append(args, "-pprof")
	}
	return args
}

func (t *testbedRun) startNode(h int, bind string, args []string, sysName string) (*nodeProc, error) {
	logPath := filepath.Join(t.logDir, fmt.Sprintf("node-%d-gen%d-%s.log", h, t.gen, sysName))
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command("ip", args...)
	cmd.Stderr = logFile
	out, err := cmd.StdoutPipe()
	if err != nil {
		logFile.Close()
		return nil, err
	}
	// Its own process group: a Ctrl-C of the driver is not the node's,
	// the driver stops it (and the testbed script kills what is left).
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return nil, fmt.Errorf("start host %d's node: %w", h, err)
	}
	p := &nodeProc{host: h, cmd: cmd, bind: bind, logPath: logPath, exited: make(chan struct{}), started: make(chan string, 1)}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			fmt.Fprintln(logFile, sc.Text())
			if startLine.MatchString(sc.Text()) {
				select {
				case p.started <- sc.Text():
				default:
				}
			}
		}
		_ = cmd.Wait()
		logFile.Close()
		close(p.exited)
	}()
	return p, nil
}

func tailFile(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return "  " + strings.Join(lines[max(0, len(lines)-n):], "\n  ") + "\n  (" + path + ")"
}

// store is host h's store node, as its member's hello names it.
func (ns *nodeSet) store(ctx context.Context, h int) (*actor.PID, error) {
	r, err := cluster.Hello(ctx, ns.root(), ns.procs[h].bind)
	if err != nil {
		return nil, err
	}
	return r.GetStore().PID(), nil
}

func (ns *nodeSet) agent(h int) *actor.PID {
	return actor.NewPID(ns.procs[h].bind, AgentName)
}

func (ns *nodeSet) root() *actor.RootContext { return ns.sys.Root }

// pprofURL is host's manage port, where a node started with -pprof
// serves /debug/pprof: its host's address, as the node listens there.
func (ns *nodeSet) pprofURL(host int) string {
	return "http://" + net.JoinHostPort(ns.t.tb.Hosts[host], strconv.Itoa(ns.manage))
}

// agentErr turns an agent's reply into an error naming the host.
func agentErr(h int, what string, e *messages.Error) error {
	if err := messages.ErrOrNil(e); err != nil {
		return fmt.Errorf("%s on host %d: %w", what, h, err)
	}
	return nil
}

func (ns *nodeSet) Prepare(ctx context.Context, host int, d DataSpec) error {
	res, err := actorutil.Request(ctx, ns.root(), ns.agent(host), &messages.BenchPrepare{Data: d.proto()})
	if err != nil {
		return fmt.Errorf("prepare %s on host %d: %w", d.ID, host, err)
	}
	r, ok := res.(*messages.BenchPrepareReply)
	if !ok {
		return fmt.Errorf("prepare on host %d: unexpected reply %T", host, res)
	}
	return agentErr(host, "prepare "+d.ID, r.GetError())
}

func (ns *nodeSet) Put(ctx context.Context, host int, id string, at time.Time) (time.Time, error) {
	msg := &messages.BenchPut{ObjectId: id, TimeoutMs: actorutil.TimeoutMs(ctx)}
	if !at.IsZero() {
		msg.AtUnixNano = at.UnixNano()
	}
	res, err := actorutil.Request(ctx, ns.root(), ns.agent(host), msg)
	if err != nil {
		return time.Time{}, fmt.Errorf("put %s on host %d: %w", id, host, err)
	}
	r, ok := res.(*messages.BenchPutReply)
	if !ok {
		return time.Time{}, fmt.Errorf("put on host %d: unexpected reply %T", host, res)
	}
	return time.Unix(0, r.GetStartedUnixNano()), agentErr(host, "put "+id, r.GetError())
}

func (ns *nodeSet) Fetch(ctx context.Context, host int, id string, at time.Time) (timing, error) {
	msg := &messages.BenchFetch{ObjectId: id, TimeoutMs: actorutil.TimeoutMs(ctx)}
	if !at.IsZero() {
		msg.AtUnixNano = at.UnixNano()
	}
	res, err := actorutil.Request(ctx, ns.root(), ns.agent(host), msg)
	if err != nil {
		return timing{}, fmt.Errorf("get %s on host %d: %w", id, host, err)
	}
	r, ok := res.(*messages.BenchFetchReply)
	if !ok {
		return timing{}, fmt.Errorf("get on host %d: unexpected reply %T", host, res)
	}
	return timing{time.Unix(0, r.GetStartedUnixNano()), time.Unix(0, r.GetDoneUnixNano())}, agentErr(host, "get "+id, r.GetError())
}

func (ns *nodeSet) Reduce(ctx context.Context, host int, target string, sources []string, num int, all bool, at time.Time) (*messages.ReduceReply, timing, error) {
	msg := &messages.BenchReduce{TargetId: target, SourceIds: sources, NumObjects: int32(num), AllReduce: all, TimeoutMs: actorutil.TimeoutMs(ctx)}
	if !at.IsZero() {
		msg.AtUnixNano = at.UnixNano()
	}
	res, err := actorutil.Request(ctx, ns.root(), ns.agent(host), msg)
	if err != nil {
		return nil, timing{}, fmt.Errorf("reduce %s on host %d: %w", target, host, err)
	}
	r, ok := res.(*messages.BenchReduceReply)
	if !ok {
		return nil, timing{}, fmt.Errorf("reduce on host %d: unexpected reply %T", host, res)
	}
	s := timing{time.Unix(0, r.GetStartedUnixNano()), time.Unix(0, r.GetDoneUnixNano())}
	if err := messages.ErrOrNil(r.GetError()); err != nil {
		return r.GetReply(), s, err
	}
	return r.GetReply(), s, nil
}

func (ns *nodeSet) Verify(ctx context.Context, host int, id string, srcs []DataSpec) error {
	msg := &messages.BenchVerify{ObjectId: id, TimeoutMs: actorutil.TimeoutMs(ctx)}
	for _, s := range srcs {
		msg.Sources = append(msg.Sources, s.proto())
	}
	res, err := actorutil.Request(ctx, ns.root(), ns.agent(host), msg)
	if err != nil {
		return fmt.Errorf("verify %s on host %d: %w", id, host, err)
	}
	r, ok := res.(*messages.BenchVerifyReply)
	if !ok {
		return fmt.Errorf("verify on host %d: unexpected reply %T", host, res)
	}
	return agentErr(host, "verify "+id, r.GetError())
}

func (ns *nodeSet) Delete(ctx context.Context, ids []string) {
	for h, p := range ns.procs {
		if ns.alive(p) {
			store, err := ns.store(ctx, h)
			if err != nil {
				return
			}
			c := storenode.NewClient(ns.root(), store, 10*time.Second)
			for _, id := range ids {
				_ = c.Delete(ctx, id)
			}
			return
		}
	}
}

func (ns *nodeSet) alive(p *nodeProc) bool {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	return !p.killed
}

func (ns *nodeSet) RoundTrips(ctx context.Context, from int, to []int, at time.Time, dataPlane bool) (timing, error) {
	msg := &messages.BenchRoundTrips{TimeoutMs: actorutil.TimeoutMs(ctx), DataPlane: dataPlane}
	for _, h := range to {
		msg.Addresses = append(msg.Addresses, ns.procs[h].bind)
	}
	if !at.IsZero() {
		msg.AtUnixNano = at.UnixNano()
	}
	res, err := actorutil.Request(ctx, ns.root(), ns.agent(from), msg)
	if err != nil {
		return timing{}, fmt.Errorf("round trips from host %d: %w", from, err)
	}
	r, ok := res.(*messages.BenchRoundTripsReply)
	if !ok {
		return timing{}, fmt.Errorf("round trips from host %d: unexpected reply %T", from, res)
	}
	return timing{time.Unix(0, r.GetStartedUnixNano()), time.Unix(0, r.GetDoneUnixNano())}, agentErr(from, "round trips", r.GetError())
}

// CPU sums the node processes' own accounting, asked of their agents.
func (ns *nodeSet) CPU(ctx context.Context) (time.Duration, error) {
	var mu sync.Mutex
	var total time.Duration
	var live []int
	for h, p := range ns.procs {
		if ns.alive(p) {
			live = append(live, h)
		}
	}
	err := each(live, func(h int) error {
		res, err := actorutil.Request(ctx, ns.root(), ns.agent(h), &messages.BenchCPU{})
		if err != nil {
			return fmt.Errorf("cpu of host %d: %w", h, err)
		}
		r, ok := res.(*messages.BenchCPUReply)
		if !ok {
			return fmt.Errorf("cpu of host %d: unexpected reply %T", h, res)
		}
		mu.Lock()
		total += time.Duration(r.GetCpuNs())
		mu.Unlock()
		return nil
	})
	return total, err
}

// Kill SIGKILLs host's node process (`ip netns exec` execs the binary:
// the process is the node itself).
func (ns *nodeSet) Kill(host int) error {
	p := ns.procs[host]
	ns.mu.Lock()
	p.killed = true
	ns.mu.Unlock()
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return err
	}
	select {
	case <-p.exited:
		return nil
	case <-time.After(10 * time.Second):
		return fmt.Errorf("host %d's node did not exit 10s after SIGKILL", host)
	}
}

func (ns *nodeSet) TargetID(ctx context.Context, prefix string) (string, error) {
	res, err := actorutil.Request(ctx, ns.root(), ns.agent(0), &messages.BenchTargetID{Prefix: prefix})
	if err != nil {
		return "", fmt.Errorf("target id on host 0: %w", err)
	}
	r, ok := res.(*messages.BenchTargetIDReply)
	if !ok {
		return "", fmt.Errorf("target id: unexpected reply %T", res)
	}
	switch r.GetError().GetCode() {
	case messages.ErrorCode_NOT_FOUND:
		return "", fmt.Errorf("%w: %w", errNoLocalShard, agentErr(0, "target id", r.GetError()))
	case messages.ErrorCode_UNAVAILABLE:
		return "", fmt.Errorf("%w: %w", errPlacementUnsettled, agentErr(0, "target id", r.GetError()))
	}
	return r.GetObjectId(), agentErr(0, "target id", r.GetError())
}

// Close kills every node: the cluster is thrown away, nothing in it
// needs a graceful leave.
func (ns *nodeSet) Close() {
	for _, p := range ns.procs {
		ns.mu.Lock()
		p.killed = true
		ns.mu.Unlock()
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
	}
	for _, p := range ns.procs {
		select {
		case <-p.exited:
		case <-time.After(10 * time.Second):
		}
	}
}

// chunkArg is hoplite node's -chunk-size for ChunkSize (0: auto).
func chunkArg(n int) string {
	if n == 0 {
		return "auto"
	}
	return strconv.Itoa(n)
}
