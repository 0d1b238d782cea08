package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/bench"
	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/internal/bufalloc"
	"github.com/hoplite-go/hoplite/internal/experiments"
	"github.com/hoplite-go/hoplite/internal/testhooks"
	"github.com/hoplite-go/hoplite/internal/timerslack"
	"github.com/hoplite-go/hoplite/internal/transport"
	"github.com/hoplite-go/hoplite/messages"
)

const nodeUsage = `usage: hoplite node --bind HOST:PORT --seeds HOST:PORT,... [flags]

Runs one member of a multi-process cluster: its store node, the directory
shards placed on it, their reduce coordinators and its failure broadcaster.
Membership is Proto.Actor's cluster with a provider. automanaged (the
default, for a fixed list of hosts): every member serves /_health on its
manage port (default: bind port + 1000) and polls the others'; --seeds
lists every member's HOST:MANAGE-PORT (one member's is enough: members
tell each other the seeds they know). etcd (for hosts that come and go):
--provider etcd --provider-address HOST:PORT; no seeds.
SIGTERM or SIGINT leaves the cluster gracefully.

Plaintext stays on this machine: a --bind or --data-bind host that is not
loopback (127.0.0.0/8, ::1, localhost) needs mutual TLS (--tls-cert,
--tls-key, --tls-ca; hoplite certs makes test ones), and an etcd
--provider-address that is not loopback needs --etcd-ca (with
--etcd-cert, --etcd-key for client certificate auth), or --insecure,
which accepts plaintext and warns (docs/security.md).

flags:
`

// nodeFlags are the flags of `hoplite node` (and of the bench peer).
type nodeFlags struct {
	bind, seeds, dataBind, provider, providerAddr, clusterName string
	managePort, shards                                         int
	capacity, chunk, linkRate, linkBurst                       string
	refresh, joinTimeout, chunkDelay, healthTimeout            time.Duration
	reduceChunkDelay, stallTimeout, timerSlack, probeDelay     time.Duration
	healthMisses, locateDeputies                               int
	logFormat, logLevel                                        string
	pages, warmMemory                                          string
	tlsCert, tlsKey, tlsCA                                     string
	etcdCert, etcdKey, etcdCA                                  string
	protocolVersion                                            uint
	pprof, insecure                                            bool
	trace                                                      traceFlags
	// exp are the benchmarks' experiments, from the hidden -experiments
	// flag (internal/experiments).
	exp experiments.Set
}

// hiddenNodeFlags are the flags `hoplite node -h` does not list: they are
// for tests and benchmarks, not for an operator.
var hiddenNodeFlags = []string{"protocol-version", "test-chunk-delay", "test-reduce-chunk-delay", "test-probe-delay", experiments.Flag}

// experimentsValue is the -experiments flag: a list experiments.Parse
// reads.
type experimentsValue struct{ s *experiments.Set }

func (v experimentsValue) String() string {
	if v.s == nil {
		return ""
	}
	return v.s.String()
}

func (v experimentsValue) Set(list string) error {
	s, err := experiments.Parse(list)
	if err != nil {
		return err
	}
	*v.s = s
	return nil
}

func (f *nodeFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.bind, "bind", "127.0.0.1:7000", "this member's actor system address HOST:PORT (Proto.Actor remote)")
	fs.StringVar(&f.seeds, "seeds", "", "comma-separated automanaged endpoints HOST:MANAGE-PORT of the members (this one's is added)")
	fs.StringVar(&f.dataBind, "data-bind", "", "data plane address HOST:PORT (default: the bind host, a free port)")
	fs.IntVar(&f.managePort, "manage-port", 0, "HTTP port of /metrics, /live/, -pprof's /debug/pprof and the automanaged /_health, on the bind host (default: bind port + 1000)")
	fs.StringVar(&f.capacity, "capacity", "1GiB", "store capacity: bytes, or with a KiB/MiB/GiB suffix")
	fs.StringVar(&f.chunk, "chunk-size", "auto", "transfer chunk size, or auto: about 5 ms of the measured bandwidth")
	fs.StringVar(&f.linkRate, "link-rate", "", "this host's network link, e.g. 10gbit or 400mbit (default: not known); paces sliced AllReduces at its TCP payload rate")
	fs.StringVar(&f.linkBurst, "link-burst", "", "bytes the link passes at once after it idled, if a token-bucket shaper sets it (a tc tbf burst, e.g. 200000 or 128KiB; needs -link-rate; default: none): the cost model then prices a pipeline's hops by what the burst does not pass")
	fs.IntVar(&f.shards, "shards", 64, "directory shards of the whole cluster (equal on every member)")
	fs.StringVar(&f.provider, "provider", cluster.ProviderAutomanaged, "membership provider: automanaged (a fixed list of hosts) or etcd (hosts that come and go)")
	fs.StringVar(&f.providerAddr, "provider-address", "", "etcd server client endpoint HOST:PORT (default 127.0.0.1:2379)")
	fs.StringVar(&f.clusterName, "cluster", "hoplite", "cluster name (members of other clusters are ignored)")
	fs.DurationVar(&f.refresh, "refresh", 200*time.Millisecond, "how often the automanaged provider polls the seeds")
	fs.BoolVar(&f.pprof, "pprof", false, "serve Go's profiles at /debug/pprof on the manage port (next to /metrics), with mutex and block profiling on")
	fs.DurationVar(&f.healthTimeout, "health-timeout", 2*time.Second, "automanaged: how long a health check of a member may take")
	fs.IntVar(&f.healthMisses, "health-misses", 3, "automanaged: health checks a member must miss in a row before it is dropped (a refused connection drops it at once)")
	fs.IntVar(&f.locateDeputies, "locate-deputies", 0, "groups of Locate deputies the members form, which send a hot small object's Locates to its directory shard in batches: 0, 16 from 512 members on and none below; -1, none")
	fs.DurationVar(&f.stallTimeout, "stall-timeout", 10*time.Second, "a receiver gives up a stream that makes no progress for this long and asks the directory for another sender")
	fs.DurationVar(&f.timerSlack, "timer-slack", defaultTimerSlack, "Linux: the process's timer slack (set, then the node executes itself again to give it to every thread); 0 leaves the kernel's (see internal/timerslack)")
	fs.DurationVar(&f.joinTimeout, "join-timeout", 30*time.Second, "give up joining after this long (also bounds the check of the provider's server)")
	fs.StringVar(&f.trace.endpoint, "trace-otlp", "", "send OpenTelemetry spans of Puts, Gets, Locates, transfers and Reduces to this OTLP/gRPC collector HOST:PORT (default: tracing off)")
	fs.BoolVar(&f.trace.insecure, "trace-otlp-insecure", false, "-trace-otlp: plaintext to the collector (default TLS with the system's roots)")
	fs.Float64Var(&f.trace.sample, "trace-sample", 1, "-trace-otlp: the fraction of traces that start on this member to record (a caller's decision is kept)")
	fs.StringVar(&f.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&f.logLevel, "log-level", "info", "log level: debug, info, warn, error")
	fs.UintVar(&f.protocolVersion, "protocol-version", 0, "testing only: speak this member protocol version instead of the current one")
	fs.StringVar(&f.pages, "pages", "auto", "pages behind object buffers of 4 MiB or more: auto (the warm-up measures which of 4 KiB and transparent huge pages costs this machine less to fault in), small or huge")
	fs.StringVar(&f.warmMemory, "warm-memory", "128MiB", "memory for object buffers of 4 MiB or more: faulted in at the warm-up and used again whenever the buffers cut from it are freed, and as much again of other freed ones' kept for the next (0: none)")
	fs.StringVar(&f.tlsCert, "tls-cert", "", "mutual TLS on every port of the member (not etcd's: -etcd-*): this member's certificate (PEM; with -tls-key and -tls-ca; see hoplite certs)")
	fs.StringVar(&f.tlsKey, "tls-key", "", "mutual TLS: the key of -tls-cert (PEM)")
	fs.StringVar(&f.tlsCA, "tls-ca", "", "mutual TLS: the cluster's CA (PEM); only peers with a certificate it signed are served")
	fs.StringVar(&f.etcdCert, "etcd-cert", "", "etcd provider over TLS: the client certificate etcd requires (PEM; with -etcd-key)")
	fs.StringVar(&f.etcdKey, "etcd-key", "", "etcd provider over TLS: the key of -etcd-cert (PEM)")
	fs.StringVar(&f.etcdCA, "etcd-ca", "", "etcd provider over TLS: etcd's CA (PEM), which verifies the etcd server (default with -etcd-cert: the system's roots)")
	fs.BoolVar(&f.insecure, "insecure", false, "allow plaintext beyond this machine: a -bind or -data-bind host that is not loopback without -tls-*, an etcd -provider-address that is not loopback without -etcd-* (anyone who reaches the ports controls the member; see docs/security.md)")
	fs.DurationVar(&f.chunkDelay, "test-chunk-delay", 0, "fault injection: sleep this long before storing each fetched chunk")
	fs.DurationVar(&f.reduceChunkDelay, "test-reduce-chunk-delay", 0, "fault injection: sleep this long before each chunk a reduce task combines or gathers")
	fs.Var(experimentsValue{&f.exp}, experiments.Flag, "benchmarks and tests: a comma-separated list of experiments (internal/experiments.Parse), e.g. naive,reduce-degree=2")
	fs.DurationVar(&f.probeDelay, "test-probe-delay", 0, "fault injection: wait this long before probing a suspected member (or spreading the failure of one the health checks dropped), so that this member learns of a failure from the others' notices")
}

func (f *nodeFlags) logger(stderr io.Writer) (*logrus.Logger, error) {
	log := logrus.New()
	log.SetOutput(stderr)
	switch f.logFormat {
	case "text":
		log.SetFormatter(&logrus.TextFormatter{FullTimestamp: true, TimestampFormat: time.RFC3339Nano, DisableColors: true})
	case "json":
		log.SetFormatter(&logrus.JSONFormatter{TimestampFormat: time.RFC3339Nano})
	default:
		return nil, usageError{fmt.Sprintf("--log-format %q: want text or json", f.logFormat)}
	}
	level, err := parseLogLevel(f.logLevel)
	if err != nil {
		return nil, err
	}
	log.SetLevel(level)
	return log, nil
}

func (f *nodeFlags) config(log *logrus.Logger) (cluster.MemberConfig, error) {
	if f.locateDeputies < -1 || f.locateDeputies == 1 {
		return cluster.MemberConfig{}, fmt.Errorf("-locate-deputies %d: want -1 (none), 0 (by the cluster's size) or 2 and more", f.locateDeputies)
	}
	if f.stallTimeout <= 0 {
		return cluster.MemberConfig{}, fmt.Errorf("-stall-timeout %v: want a positive duration", f.stallTimeout)
	}
	if f.timerSlack < 0 || f.timerSlack > maxTimerSlack {
		return cluster.MemberConfig{}, fmt.Errorf("-timer-slack %v: want 0 (the kernel's) up to %v", f.timerSlack, maxTimerSlack)
	}
	if _, _, err := bufalloc.ParsePages(f.pages); err != nil {
		return cluster.MemberConfig{}, fmt.Errorf("-%w", err)
	}
	capacity, err := parseSize(f.capacity)
	if err != nil {
		return cluster.MemberConfig{}, fmt.Errorf("-capacity: %w", err)
	}
	var chunk int64
	if f.chunk != "auto" {
		chunk, err = parseSize(f.chunk)
	}
	if err != nil || chunk < 0 || chunk > 64<<20 || (chunk == 0 && f.chunk != "auto") {
		return cluster.MemberConfig{}, fmt.Errorf("-chunk-size %q: want 1 byte .. 64MiB, or auto", f.chunk)
	}
	warmMemory := int64(-1) // "0": none (MemberConfig's 0 is the default)
	if f.warmMemory != "0" {
		if warmMemory, err = parseSize(f.warmMemory); err != nil {
			return cluster.MemberConfig{}, fmt.Errorf("-warm-memory: %w (or 0 for none)", err)
		}
	}
	var linkRate float64
	if f.linkRate != "" {
		bw, err := bench.ParseBandwidth(f.linkRate)
		if err != nil {
			return cluster.MemberConfig{}, fmt.Errorf("-link-rate: %w", err)
		}
		linkRate = bw.BitsPerSecond
	}
	var linkBurst int64
	if f.linkBurst != "" {
		var err error
		if linkBurst, err = parseSize(f.linkBurst); err != nil {
			return cluster.MemberConfig{}, fmt.Errorf("-link-burst: %w", err)
		}
		if linkRate == 0 {
			return cluster.MemberConfig{}, usageError{"-link-burst needs -link-rate: a burst is bytes above a rate"}
		}
	}
	var seeds []string
	for _, s := range strings.Split(f.seeds, ",") {
		if s = strings.TrimSpace(s); s != "" {
			seeds = append(seeds, s)
		}
	}
	cfg := cluster.MemberConfig{Bind: f.bind, ManagePort: f.managePort, Seeds: seeds, DataBind: f.dataBind,
		Provider: f.provider, ProviderAddress: f.providerAddr, ClusterName: f.clusterName, Shards: f.shards,
		Capacity: capacity, ChunkSize: int(chunk), RefreshInterval: f.refresh, JoinTimeout: f.joinTimeout,
		HealthTimeout: f.healthTimeout, HealthMisses: f.healthMisses, Pprof: f.pprof, StallTimeout: f.stallTimeout, LocateDeputies: f.locateDeputies,
		WarmMemory: warmMemory, LinkRate: linkRate, LinkBurst: linkBurst, Log: log,
		TLSCert: f.tlsCert, TLSKey: f.tlsKey, TLSCA: f.tlsCA,
		EtcdCert: f.etcdCert, EtcdKey: f.etcdKey, EtcdCA: f.etcdCA}
	*experiments.In(&cfg) = f.exp
	hooks := testhooks.In(&cfg)
	hooks.ProtocolVersion, hooks.ProbeDelay = uint32(f.protocolVersion), f.probeDelay
	// The store node's hooks stay nil unless asked for: it then pays
	// nothing per chunk.
	if d := f.chunkDelay; d > 0 {
		hooks.Store.BeforeFetchChunk = func(string, string, int64) { time.Sleep(d) }
	}
	if d := f.reduceChunkDelay; d > 0 {
		// Stretches a Reduce or AllReduce (loopback runs them in
		// milliseconds) so that a test's SIGKILL lands inside it.
		hooks.Store.BeforeReduceChunk = func(string, string, int64) { time.Sleep(d) }
	}
	return cfg, nil
}

func nodeCommand(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("node", flag.ContinueOnError)
	fs.SetOutput(flagOutput(stderr, "node"))
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), nodeUsage)
		printFlags(fs, hiddenNodeFlags...)
	}
	var f nodeFlags
	f.register(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Sprintf("unexpected arguments %q", fs.Args())}
	}
	log, err := f.logger(stderr)
	if err != nil {
		return err
	}
	cfg, err := f.config(log)
	if err != nil {
		return usageError{err.Error()} // every config error is a flag's value
	}
	if p, auto, _ := bufalloc.ParsePages(f.pages); !auto {
		bufalloc.SetPages(p) // config checked it; auto is the warm-up's
	}
	// Before anything starts: it may execute the program again.
	if err := ensureTimerSlack(f.timerSlack); err != nil {
		log.WithError(err).Warn("timer slack not set: the Go runtime's sysmon wakes more often")
	}
	// After the timer slack's execution of the program again, or both
	// processes would warn.
	if err := f.checkPlaintext(log); err != nil {
		return err
	}
	if f.pprof {
		// The process's own rates, set by the binary rather than the
		// library: without them /debug/pprof/mutex and /block are empty.
		// One contention event in 100 and blocking of 10 µs or more cost
		// little beside the remote sends they sample.
		runtime.SetMutexProfileFraction(100)
		runtime.SetBlockProfileRate(10_000)
	}
	if f.tlsCert != "" && f.tlsKey != "" && f.tlsCA != "" {
		// Files that cannot be read or do not match are not a bad
		// command line (exit 1); what Join refuses below is.
		if _, err := cluster.TLSConfig(f.tlsCert, f.tlsKey, f.tlsCA); err != nil {
			return err
		}
	}
	stopTracing, err := f.trace.start(f.bind, log)
	if err != nil {
		return err
	}
	defer stopTracing()
	for first := true; ; first = false {
		m, err := cluster.Join(ctx, cfg)
		if first && errors.Is(err, messages.ErrInvalidArgument) {
			// The member refused its configuration before starting
			// anything: a flag's value (--bind, --manage-port, --seeds,
			// a partial set of TLS flags).
			return usageError{err.Error()}
		}
		if err != nil {
			return err
		}
		err = runMember(ctx, m, cfg, f, log, stdout)
		if !errors.Is(err, cluster.ErrExpelled) {
			return err
		}
		// The others declared this member failed while it was alive (it
		// was paused or cut off too long): that incarnation is over, its
		// objects with it, as after a restart. Rejoin as a new one.
		log.WithError(err).WithField("member", m.ID()).Warn("expelled while alive: rejoining as a new incarnation")
	}
}

// runMember serves as member m until the process is told to stop (a
// graceful leave) or the member stops by itself (its error).
func runMember(ctx context.Context, m *cluster.Member, cfg cluster.MemberConfig, f nodeFlags, log *logrus.Logger, stdout io.Writer) error {
	if f.exp.BenchAgent {
		if _, err := bench.StartAgent(m); err != nil {
			m.Stop()
			return fmt.Errorf("the bench agent: %w", err)
		}
	}
	fmt.Fprintf(stdout, "hoplite node %s address=%s data=%s manage=%d members=%d timer-slack=%s\n",
		m.ID(), m.Address(), transport.HostPort(m.DataAddress()), managePort(cfg), len(m.Members()), timerSlackNow())
	select {
	case <-ctx.Done():
		log.WithField("member", m.ID()).Info("signal: leaving the cluster")
		lctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		lost, err := m.Leave(lctx)
		fmt.Fprintf(stdout, "hoplite node %s left the cluster; %d objects lost\n", m.ID(), len(lost))
		return err
	case <-m.Done():
		if err := m.Err(); err != nil {
			return err
		}
		return errors.New("member stopped")
	}
}

// checkPlaintext refuses a member that would talk plaintext beyond this
// machine unless -insecure says so, and then warns: without TLS anyone who
// reaches a member's ports can send its actors what a member may, corrupt
// its directory shards and read its objects (docs/security.md). The rule covers what
// the member listens on (-bind, which the manage port shares, and
// -data-bind) and the etcd server it registers in.
func (f *nodeFlags) checkPlaintext(log logrus.FieldLogger) error {
	var exposed []string
	// Any TLS flag means TLS: a partial set is Join's to refuse, with a
	// message about the missing flag.
	if f.tlsCert == "" && f.tlsKey == "" && f.tlsCA == "" {
		for _, a := range []struct{ flag, addr string }{{"--bind", f.bind}, {"--data-bind", f.dataBind}} {
			if a.addr != "" && !loopbackAddr(a.addr) {
				exposed = append(exposed, a.flag+" "+a.addr)
			}
		}
	}
	etcdAddr := f.providerAddr
	if etcdAddr == "" {
		etcdAddr = "127.0.0.1:2379"
	}
	etcdPlain := f.provider == cluster.ProviderEtcd && f.etcdCert == "" && f.etcdKey == "" && f.etcdCA == "" && !loopbackAddr(etcdAddr)
	if etcdPlain {
		exposed = append(exposed, "--provider-address "+etcdAddr)
	}
	if len(exposed) == 0 {
		return nil
	}
	if f.insecure {
		var what []string
		if len(exposed) > 1 || !etcdPlain {
			what = append(what, "any host that reaches this member's ports can send its actors any message a member may send, "+
				"make its directory shards drop or invent copies, read every object it holds and post it seeds")
		}
		if etcdPlain {
			what = append(what, "anyone on the way to etcd can read and rewrite the membership")
		}
		log.WithField("plaintext", strings.Join(exposed, ", ")).Warn("--insecure: plaintext beyond this machine: " +
			strings.Join(what, "; ") + "; use --tls-cert, --tls-key and --tls-ca (and --etcd-* for etcd) on any network not wholly trusted")
		return nil
	}
	var why, fix []string
	if len(exposed) > 1 || !etcdPlain {
		why = append(why, "anyone who reaches the member's ports could make its directory shards drop or invent copies and read its objects")
		fix = append(fix, "run every member with mutual TLS: --tls-cert, --tls-key and --tls-ca (`hoplite certs` makes a test CA and certificate)")
	}
	if etcdPlain {
		why = append(why, "anyone on the way to etcd could read and rewrite the membership")
		fix = append(fix, "reach etcd over TLS: --etcd-ca (etcd's CA), with --etcd-cert and --etcd-key if etcd requires a client certificate")
	}
	return usageError{fmt.Sprintf("refusing plaintext beyond this machine (%s: not loopback): %s; %s; or pass --insecure to accept plaintext on a network you trust",
		strings.Join(exposed, ", "), strings.Join(why, ", and "), strings.Join(fix, ", and "))}
}

// loopbackAddr reports whether addr's host is loopbackHost. An address
// that does not parse is not judged here (true): the member's
// configuration refuses it with a clearer error.
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	return err != nil || loopbackHost(host)
}

// loopbackHost reports whether host is on this machine only: an IP in
// 127.0.0.0/8 or ::1, or the name localhost. A wildcard (0.0.0.0, ::)
// listens on every interface, and any other name may resolve to anything:
// neither is.
func loopbackHost(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// defaultTimerSlack is `hoplite node -timer-slack`'s default, and
// maxTimerSlack its bound: the slack delays every timed sleep of the
// process (timers, deadlines, the pacer's slots) by up to this much.
const (
	defaultTimerSlack = time.Millisecond
	maxTimerSlack     = 10 * time.Millisecond
)

// ensureTimerSlack is timerslack.Ensure in the hoplite binary (main sets
// it); nothing in tests that run nodeCommand in their own process, which
// it would execute again.
var ensureTimerSlack = func(time.Duration) error { return nil }

// timerSlackNow is the process's timer slack for the start line, or "?"
// where it cannot be read.
func timerSlackNow() string {
	d, err := timerslack.Current()
	if err != nil {
		return "?"
	}
	return d.String()
}

func managePort(cfg cluster.MemberConfig) int {
	if cfg.ManagePort != 0 {
		return cfg.ManagePort
	}
	_, p, _ := strings.Cut(cfg.Bind, ":")
	for strings.Contains(p, ":") { // an IPv6 literal: the port is last
		_, p, _ = strings.Cut(p, ":")
	}
	n, _ := strconv.Atoi(strings.TrimSuffix(p, "]"))
	return n + 1000
}

// parseSize is the one size syntax of every command (bench.ParseSize).
func parseSize(s string) (int64, error) { return bench.ParseSize(s) }

// parseLogLevel reads --log-level in our words.
func parseLogLevel(s string) (logrus.Level, error) {
	switch s {
	case "debug", "info", "warn", "error":
		return logrus.ParseLevel(s)
	}
	return 0, usageError{fmt.Sprintf("--log-level %q: want debug, info, warn or error", s)}
}
