package member

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/eventstream"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/remote"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/events"
	"github.com/hoplite-go/hoplite/internal/actors/barrieractor"
	"github.com/hoplite-go/hoplite/internal/actors/shardactor"
	"github.com/hoplite-go/hoplite/internal/barrier/participant"
	"github.com/hoplite-go/hoplite/internal/experiments"
	"github.com/hoplite-go/hoplite/internal/membername"
	"github.com/hoplite-go/hoplite/internal/netmodel/estimator"
	"github.com/hoplite-go/hoplite/internal/testhooks"
	"github.com/hoplite-go/hoplite/internal/transport"
	"github.com/hoplite-go/hoplite/messages"
)

// Config configures an embedded cluster. Its exported fields are
// cluster.Config's, which documents them for the users who set them (the
// facade copies them over, and its test checks that each one arrives);
// zero fields take the defaults. The unexported ones are this module's
// own.
type Config struct {
	Nodes, Shards                int
	Capacity                     int64
	ChunkSize                    int
	InlineLimit                  int64
	LinkBandwidth                float64
	DefaultTimeout, StallTimeout time.Duration
	Log                          *logrus.Logger
	Logger                       *slog.Logger
	UI                           string
	// LocateDeputies is every member's MemberConfig.LocateDeputies.
	LocateDeputies int

	// exp are the experiments (internal/experiments) every member runs
	// with.
	exp experiments.Set
	// hooks are the fault-injection points (internal/testhooks) of
	// every member.
	hooks testhooks.Set
}

// convergeTimeout bounds how long StartLocal, Kill and Restart wait for
// the members to agree on the membership and the shard placement.
const convergeTimeout = 20 * time.Second

// Local is an embedded cluster: N members of the same runtime that
// `hoplite node` runs, in one process. Each member has its own actor
// system on a loopback port (control messages cross Proto.Actor remote,
// as between processes); only two things differ from a cluster of
// processes: members find each other through an in-process membership
// service, and object bytes move on the in-memory data plane (with its
// emulated links).
type Local struct {
	cfg        Config
	app        *actor.ActorSystem // the application's actor system: System()
	membership *membership
	transport  *transport.Memory
	estimator  *estimator.Estimator
	log        *logrus.Entry
	protoLog   slog.Handler // where Proto.Actor's records go
	// name is the cluster's name, its own among the embedded clusters of
	// every process (their members are named alike, node-0, node-1, …):
	// a member's handshake that reaches a member of another one, through
	// a loopback port that cluster's member held, is not taken.
	name string

	// ops serializes Kill, Restart and Stop: each waits for the cluster
	// to settle, holding ops but not mu, so that calls on the live
	// members (Client, BarrierHosts, ...) go on meanwhile.
	ops     sync.Mutex
	mu      sync.Mutex // guards what Kill and Restart change
	members []*Member  // node i's current incarnation
	subs    []*eventstream.Subscription
	alive   []bool
	starts  []int // how often each node was started (names incarnations)
	stopped bool
	ui      *localUI // the live view's server (Config.UI)

	evMu      sync.Mutex
	delivered map[string]map[incarnation]bool // member -> failed incarnations it delivered
	announced map[incarnation]bool            // failed incarnations announced on app
}

// incarnation names one member incarnation, as events.NodeFailed does:
// its id and its actor system's address.
type incarnation struct{ id, address string }

// StartLocal starts an embedded cluster and returns once every member
// has joined, every member sees all of them and the directory shards run
// where the placement puts them.
func StartLocal(cfg Config) (*Local, error) {
	if cfg.Nodes < 1 {
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "a cluster needs at least one node, got %d", cfg.Nodes)
	}
	if cfg.Shards <= 0 {
		cfg.Shards = cfg.Nodes
	}
	if cfg.Capacity <= 0 {
		cfg.Capacity = 1 << 30
	}
	if cfg.DefaultTimeout <= 0 {
		cfg.DefaultTimeout = 30 * time.Second
	}
	log, protoLog, err := loggers(cfg.Log, cfg.Logger)
	if err != nil {
		return nil, err
	}
	cfg.Log = log
	if cfg.InlineLimit == 0 {
		cfg.InlineLimit = 64 << 10
	}
	// One process, one network: every member shares the measurements.
	// Until transfers are measured, B is the emulated link if there is one.
	bandwidth := 1.25e9
	if cfg.LinkBandwidth > 0 {
		bandwidth = cfg.LinkBandwidth
	}
	l := &Local{cfg: cfg, membership: newMembership(), transport: transport.NewMemory(cfg.LinkBandwidth),
		estimator: estimator.New(100*time.Microsecond, bandwidth), log: logrus.NewEntry(cfg.Log), protoLog: protoLog,
		delivered: map[string]map[incarnation]bool{}, announced: map[incarnation]bool{}}
	var nonce [8]byte
	_, _ = rand.Read(nonce[:])
	l.name = "hoplite-embedded-" + hex.EncodeToString(nonce[:])
	app, err := startAppSystem(protoLog)
	if err != nil {
		return nil, err
	}
	l.app = app
	l.members = make([]*Member, cfg.Nodes)
	l.subs = make([]*eventstream.Subscription, cfg.Nodes)
	l.alive = make([]bool, cfg.Nodes)
	l.starts = make([]int, cfg.Nodes)

	l.ops.Lock()
	defer l.ops.Unlock()
	errs := make([]error, cfg.Nodes)
	var wg sync.WaitGroup
	for i := range cfg.Nodes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = l.startMember(i)
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			l.stop()
			return nil, err
		}
	}
	if err := l.converge(); err != nil {
		l.stop()
		return nil, err
	}
	if cfg.UI != "" {
		ui, err := serveUI(cfg.UI, l.liveMembers)
		if err != nil {
			l.stop()
			return nil, err
		}
		l.mu.Lock()
		l.ui = ui
		l.mu.Unlock()
	}
	cfg.Log.WithFields(logrus.Fields{"nodes": cfg.Nodes, "shards": cfg.Shards}).Info("embedded cluster started")
	return l, nil
}

// startAppSystem starts the application's actor system: not a member,
// but reachable by them (remote on a loopback port), so that actors
// spawned in it can talk to every member's store node.
func startAppSystem(log slog.Handler) (sys *actor.ActorSystem, err error) {
	sys = NewActorSystem(appSystemOptions(log)...)
	r := remote.NewRemote(sys, remoteConfig("127.0.0.1", 0))
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("start the application's actor system: %v", p)
		}
	}()
	r.Start()
	return sys, nil
}

// memberName is node i's member id in its k-th incarnation: "node-i",
// then "node-i#k", the incarnation after a '#' as in a process's
// "<bind>#<nonce>" (docs/operations.md, "How members are named").
func memberName(i, k int) string {
	if k == 0 {
		return fmt.Sprintf("node-%d", i)
	}
	return fmt.Sprintf("node-%d#%d", i, k)
}

// startMember starts node i's next incarnation. Callers hold l.ops.
func (l *Local) startMember(i int) error {
	cfg := l.cfg
	var m *Member
	// A port this process never used; another socket (an outgoing
	// connection's ephemeral port) may take it before the member binds
	// it, so a few tries, each a new incarnation (an id is never reused).
	for try := 0; ; try++ {
		id := memberName(i, l.starts[i])
		l.starts[i]++
		port, err := freshLoopbackPort()
		if err != nil {
			return fmt.Errorf("start %s: %w", id, err)
		}
		mc := MemberConfig{Bind: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), ClusterName: l.name, Shards: cfg.Shards, Capacity: cfg.Capacity, ChunkSize: cfg.ChunkSize,
			InlineLimit: cfg.InlineLimit, DefaultTimeout: cfg.DefaultTimeout, StallTimeout: cfg.StallTimeout, LocateDeputies: cfg.LocateDeputies,
			exp: cfg.exp, hooks: cfg.hooks, Log: cfg.Log, protoLog: l.protoLog,
			embedded: &embedding{id: id, membership: l.membership, memory: l.transport, estimator: l.estimator, link: cfg.LinkBandwidth}}
		m, err = Join(context.Background(), mc)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EADDRINUSE) || try == 4 {
			return fmt.Errorf("start %s: %w", id, err)
		}
	}
	l.evMu.Lock()
	l.delivered[m.id] = map[incarnation]bool{}
	l.evMu.Unlock()
	id := m.id
	sub := m.system.EventStream.Subscribe(func(e any) { l.forward(id, e) })
	l.mu.Lock()
	l.members[i], l.subs[i], l.alive[i] = m, sub, true
	l.mu.Unlock()
	return nil
}

// forward republishes a member's domain events and supervisor events on
// the application's EventStream. Every member publishes NodeFailed once
// for each failure it delivers; the application sees it once per failed
// incarnation (member id and address), from the first member that
// delivered it: a failure of another incarnation of a name is another
// failure, not a repeat.
func (l *Local) forward(from string, e any) {
	switch e := e.(type) {
	case *events.NodeFailed:
		who := incarnation{e.Node, e.Address}
		l.evMu.Lock()
		if d := l.delivered[from]; d != nil {
			d[who] = true
		}
		first := !l.announced[who]
		l.announced[who] = true
		l.evMu.Unlock()
		if first {
			l.app.EventStream.Publish(e)
		}
	case *events.SenderSwitched, *events.TreeNodeReplaced, *events.AncestorsInvalidated,
		*events.ShardRebuilt, *events.ReduceDone, *events.AllReduceReplanned, *actor.SupervisorEvent,
		*barrieractor.DeliveryFailed, *barrieractor.TookOver:
		l.app.EventStream.Publish(e)
	}
}

// liveMembers lists the members that run.
func (l *Local) liveMembers() []*Member {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []*Member
	for i, m := range l.members {
		if l.alive[i] && m != nil {
			out = append(out, m)
		}
	}
	return out
}

// converge waits until every live member sees exactly the live members,
// they agree on the placement of every shard, and each runs the shards
// placed on it, rebuilt from every store node's republish. Callers hold
// l.ops.
func (l *Local) converge() error {
	live := l.liveMembers()
	want := make([]string, 0, len(live))
	for _, m := range live {
		want = append(want, m.id)
	}
	slices.Sort(want)
	end := time.Now().Add(convergeTimeout)
	var why string
	for {
		why = ""
		var owners []string
		for _, m := range live {
			res, err := m.system.Root.RequestFuture(m.membersPID.Load(), placementQuery{}, time.Second).Result()
			p, ok := res.(placement)
			switch {
			case err != nil || !ok:
				why = fmt.Sprintf("%s does not answer: %v", m.id, err)
			case !slices.Equal(p.live, want):
				why = fmt.Sprintf("%s sees %v, want %v", m.id, p.live, want)
				for _, id := range want {
					if !slices.Contains(p.live, id) {
						why += fmt.Sprintf("; %s: %s", id, cmp.Or(p.peers[id], "unknown"))
					}
				}
			case owners != nil && !slices.Equal(p.owners, owners):
				why = fmt.Sprintf("%s places the shards elsewhere", m.id)
			case !p.ownRunning:
				why = fmt.Sprintf("%s does not run all its shards yet", m.id)
			default:
				why = rebuilding(m, p.shards)
			}
			if why != "" {
				break
			}
			owners = p.owners
		}
		if why == "" {
			return nil
		}
		if time.Now().After(end) {
			return messages.Errorf(messages.ErrorCode_UNAVAILABLE, "the members did not converge within %v: %s", convergeTimeout, why)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// rebuilding says which of m's shards still waits for store nodes to
// republish ("" if none). A shard asks every store node when it starts,
// and their answers are publications: until they are in, a member's copy
// can reach the directory a second time, after the caller's own Put or
// Get (TestPutThenRemoteGetCostsTwoControlRoundTrips saw an inline Get's
// member publish its copy), and a shard cannot tell a last copy.
func rebuilding(m *Member, shards []*actor.PID) string {
	for _, pid := range shards {
		res, err := m.system.Root.RequestFuture(pid, shardactor.RebuildQuery{}, time.Second).Result()
		st, ok := res.(shardactor.RebuildStatus)
		switch {
		case err != nil || !ok:
			return fmt.Sprintf("shard %s does not answer: %v", membername.Of(m.id, pid.GetId()), err)
		case st.Pending > 0:
			return fmt.Sprintf("shard %s waits for %d store nodes to republish", membername.Of(m.id, pid.GetId()), st.Pending)
		}
	}
	return ""
}

// Kill fails node i the way SIGKILL fails a process: nobody can reach its
// actors or its data any more, its membership entry goes, and its actors
// stop without telling anyone. Nobody announces the failure: the other
// members detect it through their own failure path (the membership's
// topology, broken remote endpoints and data connections, confirmed and
// spread over the binomial graph). Kill returns once every live member
// has delivered the failure (events.NodeFailed was published) and the
// directory shards node i hosted run on the survivors.
func (l *Local) Kill(i int) error {
	l.ops.Lock()
	defer l.ops.Unlock()
	l.mu.Lock()
	if i < 0 || i >= len(l.alive) || !l.alive[i] {
		l.mu.Unlock()
		return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "node %d is not running", i)
	}
	m := l.members[i]
	l.alive[i] = false
	sub := l.subs[i]
	l.mu.Unlock()
	m.system.EventStream.Unsubscribe(sub)
	l.log.WithField("node", m.id).Warn("node killed (fault injection)")
	failed := incarnation{m.id, m.Address()}
	m.crash(messages.Errorf(messages.ErrorCode_UNAVAILABLE, "%s failed", m.id))
	if err := l.waitDelivered(failed); err != nil {
		return err
	}
	return l.converge()
}

// waitDelivered waits until every live member delivered the failure of
// id. Callers hold l.ops.
func (l *Local) waitDelivered(id incarnation) error {
	end := time.Now().Add(convergeTimeout)
	for {
		var missing []string
		live := l.liveMembers()
		l.evMu.Lock()
		for _, m := range live {
			if !l.delivered[m.id][id] {
				missing = append(missing, m.id)
			}
		}
		l.evMu.Unlock()
		if len(missing) == 0 {
			return nil
		}
		if time.Now().After(end) {
			return messages.Errorf(messages.ErrorCode_UNAVAILABLE, "%v did not learn of the failure of %s (at %s) within %v", missing, id.id, id.address, convergeTimeout)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// Restart starts a new incarnation of a killed node (member id node-i#k),
// empty; it joins as a process would, and takes its share of the shards.
func (l *Local) Restart(i int) error {
	l.ops.Lock()
	defer l.ops.Unlock()
	l.mu.Lock()
	down := i >= 0 && i < len(l.alive) && !l.alive[i] && !l.stopped
	l.mu.Unlock()
	if !down {
		return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "node %d is not down", i)
	}
	if err := l.startMember(i); err != nil {
		return err
	}
	l.log.WithField("node", l.Member(i).id).Info("node restarted, empty")
	return l.converge()
}

// Alive reports whether node i is running.
func (l *Local) Alive(i int) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return i >= 0 && i < len(l.alive) && l.alive[i]
}

// UIAddr is where the live view is served (Config.UI), "" if it is not.
func (l *Local) UIAddr() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.ui == nil {
		return ""
	}
	return l.ui.addr
}

// Nodes is the number of nodes (alive or not).
func (l *Local) Nodes() int { return len(l.alive) }

// System is the application's actor system: application actors are
// spawned in it, and its EventStream carries every member's domain
// events (events.NodeFailed once per failed member) and Proto.Actor's
// supervisor events.
func (l *Local) System() *actor.ActorSystem { return l.app }

// Member is node i's current incarnation.
func (l *Local) Member(i int) *Member {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.members[i]
}

// StoreNode is node i's store node: application actors send it Put, Get
// and Delete messages.
func (l *Local) StoreNode(i int) *actor.PID { return freshPID(l.Member(i).StoreNode()) }

// freshPID copies a PID without its cached process: a PID caches the
// process it resolved to in the actor system that used it first, and
// the members of an embedded cluster share one address space, so a PID
// handed from one actor system to another must not carry that cache
// (a message would take the first system's route).
func freshPID(pid *actor.PID) *actor.PID {
	if pid == nil {
		return nil
	}
	return actor.NewPID(pid.GetAddress(), pid.GetId())
}

// IndexOf is the index of the node whose current incarnation is member
// id (barrier.Barrier.Replicas names members), or -1.
func (l *Local) IndexOf(id string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, m := range l.members {
		if m != nil && m.id == id {
			return i
		}
	}
	return -1
}

// Barriers is node i's barrier host (the managers of package barrier).
func (l *Local) Barriers(i int) *actor.PID {
	return l.Member(i).barrierHost()
}

// Node is node i's reference as it appears in directory records.
func (l *Local) Node(i int) *messages.NodeRef { return l.Member(i).Node() }

// Store is node i's local store (for inspection in tests and tools).
func (l *Local) Store(i int) *objstore.Store { return l.Member(i).store }

// Shard is directory shard j where it runs now (as the first live member
// places it).
func (l *Local) Shard(j int) *actor.PID {
	live := l.liveMembers()
	if len(live) == 0 {
		return nil
	}
	return freshPID((*live[0].table.Load())[j])
}

// NodeOf is the index of the node whose actor system is at address, or
// -1.
func (l *Local) NodeOf(address string) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, m := range l.members {
		if m != nil && l.alive[i] && m.Address() == address {
			return i
		}
	}
	return -1
}

// Stop stops every member and the application's actor system, together:
// no member takes another's stop for a failure or a leave, so none
// spreads a failure notice, moves or rebuilds a shard, or logs any of it.
// Calling it again does nothing.
func (l *Local) Stop() {
	l.ops.Lock()
	defer l.ops.Unlock()
	l.stop()
}

// stop stops every member. Callers hold l.ops.
func (l *Local) stop() {
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return // Stop is idempotent: protoactor's Shutdown is not
	}
	l.stopped = true
	if l.ui != nil {
		l.ui.close()
	}
	var running []*Member
	for i, m := range l.members {
		if m == nil || !l.alive[i] {
			continue
		}
		l.alive[i] = false
		if l.subs[i] != nil {
			m.system.EventStream.Unsubscribe(l.subs[i])
		}
		running = append(running, m)
	}
	l.mu.Unlock()
	// First every member stops reacting to the others' departures: the
	// cluster stops, nobody fails or leaves, so nobody spreads a failure
	// notice or moves a shard. Then all at once.
	for _, m := range running {
		m.quiesce()
	}
	var wg sync.WaitGroup
	for _, m := range running {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m.crash(messages.Errorf(messages.ErrorCode_UNAVAILABLE, "%s stopped", m.id))
		}()
	}
	wg.Wait()
	if l.app != nil {
		safely(func() { remote.GetRemote(l.app).Shutdown(false) })
		l.app.Shutdown()
	}
}

// usedPorts are the loopback ports members of this process have bound,
// and when. A port is not given to another member for portQuarantine:
// the survivors of a killed member still send to its address for a
// while, and Proto.Actor delivers those late messages to whatever member
// binds the port next (of another embedded cluster, or a new
// incarnation). Its actors are named by its own incarnation, so none
// handles them (they go to the dead letters), and failure notices are
// checked by address; the quarantine keeps even that traffic, and the
// remote endpoints it opens and terminates, away from a live member.
// Never reusing a port at all ran out
// of them: a soak of 1000 chaos seeds in one process binds more than the
// kernel's 28,000 ephemeral ports, and its seeds from about the 550th on
// failed to start. Bounded by the port range.
var usedPorts = struct {
	sync.Mutex
	m map[int]time.Time
}{m: map[int]time.Time{}}

// portQuarantine is how long a port stays another member's: much longer
// than survivors keep sending to a member that failed (they detect it
// within seconds, and a test's cluster lives seconds to a minute), much
// shorter than the time a soak takes to go through the port range.
const portQuarantine = time.Minute

// loopbackPortFree says whether port, bound by no member of this process or
// last handed out more than portQuarantine before now, may be handed out.
func loopbackPortFree(used map[int]time.Time, port int, now time.Time) bool {
	at, ok := used[port]
	return !ok || now.Sub(at) > portQuarantine
}

// freshLoopbackPort returns a free 127.0.0.1 port no member of this
// process had in the last portQuarantine.
func freshLoopbackPort() (int, error) {
	usedPorts.Lock()
	defer usedPorts.Unlock()
	var held []net.Listener // keep reused ports bound so the kernel offers others
	defer func() {
		for _, ln := range held {
			ln.Close()
		}
	}()
	for range 64 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, fmt.Errorf("find a loopback port: %w", err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		if loopbackPortFree(usedPorts.m, port, time.Now()) {
			ln.Close()
			usedPorts.m[port] = time.Now()
			return port, nil
		}
		held = append(held, ln)
	}
	return 0, fmt.Errorf("find a loopback port: 64 tries gave only ports other members had in the last %v", portQuarantine)
}

// The experiments' and the fault injection's ways into the
// configurations: only code of this module (bench, tests, `hoplite node
// -experiments` and its -test-* flags) reaches the unexported fields.
func init() {
	experiments.Register(func(cfg any) *experiments.Set {
		switch c := cfg.(type) {
		case *MemberConfig:
			return &c.exp
		case *Config:
			return &c.exp
		}
		return nil
	})
	testhooks.Register(func(cfg any) *testhooks.Set {
		switch c := cfg.(type) {
		case *MemberConfig:
			return &c.hooks
		case *Config:
			return &c.hooks
		}
		return nil
	})
}

// ParticipantProps is a barrier handle's participant actor
// (barrier.Cluster).
func (l *Local) ParticipantProps(cfg participant.Config) *actor.Props {
	return barrieractor.NewParticipantProps(cfg)
}

// LiveBarrierHosts lists the barrier hosts of the live members (what
// barrier.Cluster's BarrierHosts answers).
func (l *Local) LiveBarrierHosts() []BarrierHost {
	var out []BarrierHost
	for _, m := range l.liveMembers() {
		out = append(out, BarrierHost{Member: m.id, PID: m.barrierHost()})
	}
	return out
}
