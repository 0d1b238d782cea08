package processtest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/remote"

	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/storenode"
)

// The multi-process tests: `hoplite node` processes on 127.0.0.1, built
// from this module into t.TempDir(), on random free ports. The test drives
// them through a small client: a plain Proto.Actor remote actor system in
// the test process (not a member) that sends the application messages to
// the members' store nodes and reads the members' handshake for their
// views. The members' JSON logs say what they detected and when.

var (
	buildOnce sync.Once
	buildBin  string
	buildErr  error
)

// hopliteBinary builds cmd/hoplite once per test binary run.
func hopliteBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "hoplite-bin-")
		if err != nil {
			buildErr = err
			return
		}
		buildBin = filepath.Join(dir, "hoplite")
		cmd := exec.Command("go", "build", "-o", buildBin, "github.com/hoplite-go/hoplite/cmd/hoplite")
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return buildBin
}

func TestMain(m *testing.M) {
	code := m.Run()
	if buildBin != "" {
		os.RemoveAll(filepath.Dir(buildBin))
	}
	os.Exit(code)
}

// nodeProc is one `hoplite node` process.
type nodeProc struct {
	slot    memberSlot
	cmd     *exec.Cmd
	stdout  *syncBuffer
	stderr  *syncBuffer
	id      string // member id, from its start line
	address string
	slack   string // its timer slack, from its start line
	exited  chan struct{}
	exitErr error
}

var startLine = regexp.MustCompile(`^hoplite node (\S+) address=(\S+) data=(\S+) manage=(\d+) members=(\d+)(?: timer-slack=(\S+))?$`)

// startNode starts a member process; wait says whether to wait for its
// start line.
func startNode(t testing.TB, bin string, slot memberSlot, seeds []string, extra ...string) *nodeProc {
	t.Helper()
	return startNodeIn(t, nil, bin, slot, seeds, extra...)
}

// startNodeIn is startNode with the process started through wrap (for
// example `ip netns exec NS`, which execs the member in place: the
// process is the member's, for its signals and its /proc figures).
func startNodeIn(t testing.TB, wrap []string, bin string, slot memberSlot, seeds []string, extra ...string) *nodeProc {
	t.Helper()
	_, manage, _ := net.SplitHostPort(slot.manage)
	args := append([]string{"node", "-bind", slot.bind, "-manage-port", manage, "-seeds", strings.Join(seeds, ","),
		"-log-format", "json", "-chunk-size", "256KiB", "-refresh", "100ms", "-capacity", "256MiB"}, extra...)
	return startProc(t, slot, append(append(slices.Clone(wrap), bin), args...))
}

// startProc starts argv as the process of slot, collecting its output,
// and kills it when the test ends (saving its log with
// HOPLITE_TEST_LOGDIR, showing its tail if the test failed).
func startProc(t testing.TB, slot memberSlot, argv []string) *nodeProc {
	t.Helper()
	p := &nodeProc{slot: slot, stdout: &syncBuffer{}, stderr: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Stdout, p.cmd.Stderr = p.stdout, p.stderr
	dieWithTest(p.cmd)
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		p.exitErr = p.cmd.Wait()
		close(p.exited)
	}()
	t.Cleanup(func() {
		p.kill()
		if dir := os.Getenv("HOPLITE_TEST_LOGDIR"); dir != "" { // debugging: every member's full log
			name := strings.NewReplacer(":", "_", "#", "_").Replace(p.slot.bind + "-" + p.id)
			_ = os.WriteFile(filepath.Join(dir, name+".log"), []byte(p.stderr.String()), 0o644)
		}
		if t.Failed() {
			t.Logf("process %s (%s) stdout:\n%s\nstderr (last 40 lines):\n%s", slot.bind, p.id, p.stdout.String(), tail(p.stderr.String(), 40))
		}
	})
	return p
}

func (p *nodeProc) kill() {
	_ = p.cmd.Process.Kill()
	<-p.exited
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// waitStarted waits for the process's start line.
func (p *nodeProc) waitStarted(t testing.TB, d time.Duration) {
	t.Helper()
	end := time.Now().Add(d)
	for {
		for _, line := range strings.Split(p.stdout.String(), "\n") {
			if m := startLine.FindStringSubmatch(line); m != nil {
				p.id, p.address, p.slack = m[1], m[2], m[6]
				return
			}
		}
		select {
		case <-p.exited:
			t.Fatalf("node %s exited: %v\n%s", p.slot.bind, p.exitErr, tail(p.stderr.String(), 30))
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(end) {
			t.Fatalf("node %s did not start within %v\n%s", p.slot.bind, d, tail(p.stderr.String(), 30))
		}
	}
}

// store is the process's store node (its incarnation's).
func (p *nodeProc) store() *actor.PID { return cluster.ProcessStore(p.id, p.address) }

// logEntry is one JSON log line of a member.
type logEntry map[string]any

func (p *nodeProc) logs() []logEntry {
	var out []logEntry
	sc := bufio.NewScanner(strings.NewReader(p.stderr.String()))
	sc.Buffer(make([]byte, 1<<20), 1<<22)
	for sc.Scan() {
		var e logEntry
		if json.Unmarshal(sc.Bytes(), &e) == nil {
			out = append(out, e)
		}
	}
	return out
}

func (e logEntry) str(k string) string { s, _ := e[k].(string); return s }

func (e logEntry) time() time.Time {
	t, _ := time.Parse(time.RFC3339Nano, e.str("time"))
	return t
}

// failureSeen returns when this member published NodeFailed about id:
// its revoke delivery logs "member failed", a directory shard that saw
// the store terminate first logs "node failed".
func (p *nodeProc) failureSeen(id string) (time.Time, bool) {
	var first time.Time
	for _, e := range p.logs() {
		if e.str("msg") == "member failed" && e.str("failed") == id || e.str("msg") == "node failed" && e.str("node") == id {
			if t := e.time(); first.IsZero() || t.Before(first) {
				first = t
			}
		}
	}
	return first, !first.IsZero()
}

// testClient is the small client: a Proto.Actor remote actor system.
type testClient struct {
	system *actor.ActorSystem
}

var (
	clientOnce sync.Once
	client     *testClient
	clientErr  error
)

// newTestClient returns the test binary's one client. One: every
// Proto.Actor Remote.Start writes grpc's global logger, which the gRPC
// goroutines of a remote started earlier read (a data race inside the
// libraries under -race).
func newTestClient(t testing.TB) *testClient {
	t.Helper()
	clientOnce.Do(func() {
		port := freePorts(t, 1)[0]
		system := actor.NewActorSystem(actor.WithLoggerFactory(quietSlog))
		r := remote.NewRemote(system, cluster.RemoteConfig("127.0.0.1", port, nil, nil))
		defer func() {
			if p := recover(); p != nil {
				clientErr = fmt.Errorf("start the test client: %v", p)
			}
		}()
		r.Start()
		client = &testClient{system: system}
	})
	if clientErr != nil {
		t.Fatal(clientErr)
	}
	return client
}

func (c *testClient) of(p *nodeProc) *storenode.Client {
	return storenode.NewClient(c.system.Root, p.store(), 20*time.Second)
}

// view asks a member for its live members.
func (c *testClient) view(p *nodeProc) ([]string, error) {
	res, err := c.system.Root.RequestFuture(cluster.HelloPID(p.address),
		&messages.MemberHello{ProtocolVersion: cluster.ProtocolVersion, Shards: testShards}, 2*time.Second).Result()
	if err != nil {
		return nil, err
	}
	r, ok := res.(*messages.MemberHelloReply)
	if !ok {
		return nil, fmt.Errorf("reply %T", res)
	}
	return r.GetView(), nil
}

// converge waits until every node reports the same view of exactly them.
func (c *testClient) converge(t testing.TB, nodes ...*nodeProc) []string {
	t.Helper()
	var want []string
	for _, n := range nodes {
		want = append(want, n.id)
	}
	slices.Sort(want)
	end := time.Now().Add(30 * time.Second)
	for {
		ok := true
		var last []string
		for _, n := range nodes {
			v, err := c.view(n)
			if err != nil || !slices.Equal(v, want) {
				ok, last = false, v
				break
			}
		}
		if ok {
			return want
		}
		if time.Now().After(end) {
			t.Fatalf("views did not converge on %v (last seen %v)", want, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// testShards is the shard count of the test clusters (the default).
const testShards = 64

// idOwnedBy returns an object id with prefix whose directory shard the
// member owner hosts in view.
func idOwnedBy(t testing.TB, view []string, owner, prefix string) string {
	t.Helper()
	owners := cluster.ShardOwners(view, testShards)
	for i := 0; i < 1<<16; i++ {
		id := fmt.Sprintf("%s-%d", prefix, i)
		if owners[directory.ShardIndex(id, testShards)] == owner {
			return id
		}
	}
	t.Fatalf("%s hosts no shard in %v", owner, view)
	return ""
}

func putRetry(t testing.TB, cl *storenode.Client, id string, data []byte) {
	t.Helper()
	end := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := cl.Put(ctx, id, data)
		cancel()
		if err == nil {
			return
		}
		// A Put racing a shard move fails UNAVAILABLE: the caller retries.
		if !errors.Is(err, messages.ErrUnavailable) || time.Now().After(end) {
			t.Fatalf("put %s: %v", id, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func getExact(t *testing.T, cl *storenode.Client, id string, want []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	got, err := cl.Get(ctx, id)
	if err != nil {
		t.Fatalf("get %s: %v", id, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("get %s: %d bytes, not the %d that were put", id, len(got), len(want))
	}
}

// TestProcessCluster: four `hoplite node` processes. A broadcast and a
// Reduce, byte-exact; one member SIGKILLed mid-broadcast (a relay of the
// broadcast tree) and one mid-reduce (a source in the tree); results stay
// exact, the survivors publish the failure (how soon is
// BenchmarkProcessFailureDetection's figure), and the killed members
// restart, rejoin and Get.
func TestProcessCluster(t *testing.T) {
	bin := hopliteBinary(t)
	slots, seeds := memberSlots(t, 5) // slot 4 stays free for TestProcessBadVersion's kind of visitor
	var nodes []*nodeProc
	for i := 0; i < 4; i++ {
		nodes = append(nodes, startNode(t, bin, slots[i], seeds, "-test-chunk-delay", "4ms"))
	}
	for _, n := range nodes {
		n.waitStarted(t, 60*time.Second)
	}
	c := newTestClient(t)
	view := c.converge(t, nodes...)

	// ---- broadcast: node 0 creates, nodes 1..3 Get; node 0 hosts the
	// object's shard (it is never killed).
	data := randomBytes(7, 4<<20+321)
	id := idOwnedBy(t, view, nodes[0].id, "bcast")
	putRetry(t, c.of(nodes[0]), id, data)
	for _, n := range nodes[1:] {
		getExact(t, c.of(n), id, data)
	}

	// ---- a member killed mid-broadcast: the first receiver that relays to
	// another receiver while both are still receiving.
	id2 := idOwnedBy(t, view, nodes[0].id, "bcast-kill")
	putRetry(t, c.of(nodes[0]), id2, data)
	type result struct {
		n   *nodeProc
		err error
	}
	results := make(chan result, 3)
	for _, n := range nodes[1:] {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			got, err := c.of(n).Get(ctx, id2)
			if err == nil && !bytes.Equal(got, data) {
				err = fmt.Errorf("%s got other bytes", n.id)
			}
			results <- result{n, err}
		}()
	}
	victim := waitRelay(t, c, nodes, id2)
	killed := time.Now()
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-victim.exited
	// The receivers that survive complete, byte-exact (the victim's own
	// Get dies with it: nobody answers it).
	for pending := 2; pending > 0; {
		r := <-results
		if r.n == victim {
			continue
		}
		if r.err != nil {
			t.Fatalf("broadcast with a member killed: %s: %v", r.n.id, r.err)
		}
		pending--
	}
	survivors := without(nodes, victim)
	for _, n := range survivors {
		getExact(t, c.of(n), id2, data)
	}
	checkDetected(t, survivors, victim, killed)

	// ---- the killed member restarts (a new incarnation at the same
	// address), rejoins, and Gets both objects.
	restarted := startNode(t, bin, victim.slot, seeds, "-test-chunk-delay", "4ms")
	restarted.waitStarted(t, 60*time.Second)
	nodes = replace(nodes, victim, restarted)
	view = c.converge(t, nodes...)
	getExact(t, c.of(restarted), id, data)
	getExact(t, c.of(restarted), id2, data)

	// ---- Reduce, byte-exact, with a source's member killed mid-reduce.
	// The Reduce (4 of 6 int32 sources) starts when three sources exist,
	// one of them on the victim; the victim dies while the tree waits for
	// its fourth source; then the others appear.
	caller := nodes[0]
	victim = nodes[3]
	target := idOwnedBy(t, view, caller.id, "sum")
	const elems = 256 << 10
	srcData := map[string][]byte{}
	var sources []string
	put := func(n *nodeProc, k int) {
		sid := fmt.Sprintf("src-%d", k)
		b := randomBytes(uint64(100+k), 4*elems)
		srcData[sid] = b
		putRetry(t, c.of(n), sid, b)
	}
	for k := 0; k < 6; k++ {
		sources = append(sources, fmt.Sprintf("src-%d", k))
	}
	put(nodes[1], 0)
	put(victim, 1)
	put(nodes[2], 2)
	// An object only the victim holds, in a shard that survives it (a
	// shard that moves with its member forgets what only that member held).
	victimOnly := idOwnedBy(t, view, caller.id, "victim-only")
	putRetry(t, c.of(victim), victimOnly, randomBytes(77, 1<<20+3))
	reduced := make(chan *messages.ReduceReply, 1)
	reduceErr := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		defer cancel()
		r, err := c.of(caller).Reduce(ctx, target, sources, 4, messages.ReduceOp_SUM, messages.DType_INT32)
		reduced <- r
		reduceErr <- err
	}()
	waitReducing(t)
	killed = time.Now()
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-victim.exited
	survivors = without(nodes, victim)
	put(nodes[0], 3)
	put(nodes[1], 4)
	put(nodes[2], 5)
	r := <-reduced
	if err := <-reduceErr; err != nil {
		t.Fatalf("reduce with a member killed: %v", err)
	}
	if slices.Contains(r.GetReducedIds(), "src-1") || len(r.GetReducedIds()) != 4 {
		t.Fatalf("reduced %v: want 4 sources, not the killed member's src-1", r.GetReducedIds())
	}
	want := make([]byte, 4*elems)
	for _, sid := range r.GetReducedIds() {
		b := srcData[sid]
		for k := 0; k < elems; k++ {
			binary.LittleEndian.PutUint32(want[4*k:], binary.LittleEndian.Uint32(want[4*k:])+binary.LittleEndian.Uint32(b[4*k:]))
		}
	}
	for _, n := range survivors {
		getExact(t, c.of(n), target, want)
	}
	checkDetected(t, survivors, victim, killed)
	// The object whose only copy died with the victim is LOST at once, not
	// waited for until the deadline.
	lctx, lcancel := context.WithTimeout(context.Background(), 10*time.Second)
	_, err := c.of(nodes[1]).Get(lctx, victimOnly)
	lcancel()
	if !errors.Is(err, messages.ErrLost) {
		t.Fatalf("Get of an object whose only copy was on the killed member: %v, want LOST", err)
	}
	// The coordinator (under the target's shard, on the caller) repaired
	// the tree: the victim's source had a position in it.
	logged(t, caller, "reduce participant failed; repairing the tree", map[string]string{"node": victim.id})

	restarted = startNode(t, bin, victim.slot, seeds)
	restarted.waitStarted(t, 60*time.Second)
	nodes = replace(nodes, victim, restarted)
	c.converge(t, nodes...)
	getExact(t, c.of(restarted), target, want)
	getExact(t, c.of(restarted), id, data)
}

// waitRelay waits until a receiver of id serves another receiver while it
// is itself still receiving, and returns it (or, if no relay shows up, a
// receiver that is still receiving).
func waitRelay(t *testing.T, c *testClient, nodes []*nodeProc, id string) *nodeProc {
	t.Helper()
	byID := map[string]*nodeProc{}
	for _, n := range nodes {
		byID[n.id] = n
	}
	end := time.Now().Add(10 * time.Second)
	for time.Now().Before(end) {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		info, err := c.of(nodes[0]).Info(ctx, id, false)
		cancel()
		if err == nil {
			receiving := map[string]bool{}
			for _, tr := range info.GetTransfers() {
				if tr.GetEndSeq() == 0 {
					receiving[tr.GetReceiver()] = true
				}
			}
			for _, tr := range info.GetTransfers() {
				if tr.GetEndSeq() == 0 && receiving[tr.GetSender()] && byID[tr.GetSender()] != nil {
					return byID[tr.GetSender()]
				}
			}
		}
		time.Sleep(2 * time.Millisecond)
	}
	t.Fatalf("no receiver of %s relayed to another while receiving", id)
	return nil
}

// waitReducing gives the Reduce time to start: its coordinator places the
// sources that exist in the tree within milliseconds on loopback (there is
// no side-effect-free probe of a reservation); the repair log checked
// after the kill shows the victim's source was in the tree.
func waitReducing(t *testing.T) {
	t.Helper()
	time.Sleep(300 * time.Millisecond)
}

// logged waits until a member logged a line with msg (and the fields).
func logged(t *testing.T, p *nodeProc, msg string, fields map[string]string) {
	t.Helper()
	end := time.Now().Add(10 * time.Second)
	for {
		for _, e := range p.logs() {
			if e.str("msg") != msg {
				continue
			}
			ok := true
			for k, v := range fields {
				ok = ok && e.str(k) == v
			}
			if ok {
				return
			}
		}
		if time.Now().After(end) {
			t.Fatalf("%s never logged %q %v", p.id, msg, fields)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkDetected: every survivor published the failure (the peers
// transferring with it see their data connection fail at once; the others
// hear of it from the notice).
func checkDetected(t *testing.T, survivors []*nodeProc, victim *nodeProc, killed time.Time) {
	t.Helper()
	first, seen := firstDetection(t, survivors, victim, killed)
	// How soon is BenchmarkProcessFailureDetection's figure: on a busy
	// machine it grows with the scheduling delay, so a bound here would
	// test the machine.
	t.Logf("failure of %s published by %v (first %v after the SIGKILL)", victim.id, seen, first.Round(time.Microsecond))
}

// firstDetection waits until every survivor published victim's failure
// and returns the earliest, measured from killed, and what each saw.
func firstDetection(t testing.TB, survivors []*nodeProc, victim *nodeProc, killed time.Time) (time.Duration, []string) {
	t.Helper()
	end := time.Now().Add(10 * time.Second)
	var first time.Duration = -1
	var seen []string
	for _, n := range survivors {
		for {
			at, ok := n.failureSeen(victim.id)
			if ok {
				d := at.Sub(killed)
				seen = append(seen, fmt.Sprintf("%s after %v", n.id, d.Round(time.Microsecond)))
				if first < 0 || d < first {
					first = d
				}
				break
			}
			if time.Now().After(end) {
				t.Fatalf("member %s never published the failure of %s (seen: %v)", n.id, victim.id, seen)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return first, seen
}

func without(nodes []*nodeProc, x *nodeProc) []*nodeProc {
	var out []*nodeProc
	for _, n := range nodes {
		if n != x {
			out = append(out, n)
		}
	}
	return out
}

func replace(nodes []*nodeProc, old, nu *nodeProc) []*nodeProc {
	out := slices.Clone(nodes)
	for i, n := range out {
		if n == old {
			out[i] = nu
		}
	}
	return out
}

// TestProcessBadInput: a member that speaks another protocol version is
// refused with a clear error and the cluster logs and ignores it; ports
// in use, an unreachable provider and a removed one are clear errors,
// not crashes.
func TestProcessBadInput(t *testing.T) {
	bin := hopliteBinary(t)
	slots, seeds := memberSlots(t, 3)
	a := startNode(t, bin, slots[0], seeds)
	b := startNode(t, bin, slots[1], seeds)
	a.waitStarted(t, 60*time.Second)
	b.waitStarted(t, 60*time.Second)

	bad := startNode(t, bin, slots[2], seeds, "-protocol-version", "99")
	exitOf := func(p *nodeProc) string {
		select {
		case <-p.exited:
		case <-time.After(60 * time.Second):
			t.Fatalf("%s did not exit", p.slot.bind)
		}
		if p.exitErr == nil {
			t.Fatalf("%s exited 0", p.slot.bind)
		}
		return p.stderr.String()
	}
	out := exitOf(bad)
	if !strings.Contains(out, "incompatible with the cluster") || !strings.Contains(out, "protocol version 99") ||
		strings.Contains(out, "panic") {
		t.Fatalf("version mismatch: %s", tail(out, 10))
	}
	// The cluster logs it: which member records the newcomer's
	// handshake before it exits depends on the timing (under load one
	// of the two has answered it without logging it).
	end := time.Now().Add(10 * time.Second)
	for !strings.Contains(a.stderr.String(), "incompatible member") && !strings.Contains(b.stderr.String(), "incompatible member") {
		if time.Now().After(end) {
			t.Fatal("the cluster did not log the incompatible member")
		}
		time.Sleep(20 * time.Millisecond)
	}
	c := newTestClient(t)
	c.converge(t, a, b)

	// The member's own port, its manage port, an unreachable consul.
	busy := startNode(t, bin, memberSlot{bind: slots[0].bind, manage: slots[2].manage}, seeds)
	if out := exitOf(busy); !strings.Contains(out, "is not available") || !strings.Contains(out, "address already in use") || strings.Contains(out, "panic") {
		t.Fatalf("bind port in use: %s", tail(out, 5))
	}
	busy = startNode(t, bin, memberSlot{bind: slots[2].bind, manage: slots[1].manage}, seeds)
	if out := exitOf(busy); !strings.Contains(out, "automanaged port") || !strings.Contains(out, "address already in use") {
		t.Fatalf("manage port in use: %s", tail(out, 5))
	}
	// An etcd server nobody listens for; the consul provider, removed.
	free := "127.0.0.1:" + strconv.Itoa(freePorts(t, 1)[0])
	noEtcd := startNode(t, bin, slots[2], seeds, "-provider", "etcd", "-provider-address", free, "-join-timeout", "2s")
	if out := exitOf(noEtcd); !strings.Contains(out, "etcd server at "+free+": unreachable") || strings.Contains(out, "panic") {
		t.Fatalf("etcd unreachable: %s", tail(out, 5))
	}
	consul := startNode(t, bin, slots[2], seeds, "-provider", "consul")
	if out := exitOf(consul); !strings.Contains(out, `membership provider "consul" is not supported`) {
		t.Fatalf("consul: %s", tail(out, 5))
	}
}

// TestProcessGracefulLeave: SIGTERM makes a member leave gracefully: it
// exits 0; the object only it held is reported lost (in its log, and to
// the directory, so a Get of it fails at once with LOST instead of
// waiting for its deadline); an object another member also holds stays
// available; the others see it leave.
func TestProcessGracefulLeave(t *testing.T) {
	bin := hopliteBinary(t)
	slots, seeds := memberSlots(t, 3)
	var nodes []*nodeProc
	for _, s := range slots {
		nodes = append(nodes, startNode(t, bin, s, seeds))
	}
	for _, n := range nodes {
		n.waitStarted(t, 60*time.Second)
	}
	c := newTestClient(t)
	c.converge(t, nodes...)
	leaver, a, b := nodes[0], nodes[1], nodes[2]
	only := randomBytes(11, 1<<20+5)
	shared := randomBytes(12, 1<<20+7)
	putRetry(t, c.of(leaver), "only", only)
	putRetry(t, c.of(leaver), "shared", shared)
	getExact(t, c.of(a), "shared", shared)
	// a's copy counts once its shard has recorded it complete: the Get
	// returns before a's FetchDone reaches the shard, and a leave in
	// between would count "shared" as lost too.
	end := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		info, err := c.of(b).Info(ctx, "shared", false)
		cancel()
		complete := 0
		for _, l := range info.GetLocations() {
			if l.GetState() == messages.LocationState_COMPLETE {
				complete++
			}
		}
		if err == nil && complete >= 2 {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("the directory never listed two complete copies of shared: %v, %v", info, err)
		}
		time.Sleep(20 * time.Millisecond)
	}

	if err := leaver.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-leaver.exited:
	case <-time.After(30 * time.Second):
		t.Fatal("the member did not exit after SIGTERM")
	}
	if leaver.exitErr != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", leaver.exitErr, tail(leaver.stderr.String(), 20))
	}
	if !strings.Contains(leaver.stdout.String(), "left the cluster; 1 objects lost") {
		t.Fatalf("stdout: %s", leaver.stdout.String())
	}
	logged(t, leaver, "object lost: this member held its only copy", map[string]string{"object": "only"})

	// Fail fast: well before its deadline the Get fails with LOST; one
	// that waited for the object would end in TIMEOUT instead.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, err := c.of(b).Get(ctx, "only")
	cancel()
	if !errors.Is(err, messages.ErrLost) {
		t.Fatalf("Get of the lost object: %v, want LOST before the deadline", err)
	}
	getExact(t, c.of(b), "shared", shared)
	c.converge(t, a, b)
	for _, n := range []*nodeProc{a, b} {
		logged(t, n, "member leaving: moving its shards", map[string]string{"leaving": leaver.id})
		// A leave, not a failure: once the others saw it go, none of
		// them spread a failure notice, published its failure or
		// rebuilt a shard it held.
		logged(t, n, "member left the cluster", map[string]string{"left": leaver.id})
		for _, e := range n.logs() {
			switch e.str("msg") {
			case "member unreachable: spreading a failure notice", "member left the topology: spreading a failure notice",
				"member failed", "node failed", "directory shard rebuilt from the store nodes":
				t.Errorf("%s logged %q after a graceful leave: %v", n.id, e.str("msg"), e)
			}
		}
	}
}

// quietSlog discards a test client's Proto.Actor logs.
func quietSlog(*actor.ActorSystem) *slog.Logger {
	return slog.New(slog.NewTextHandler(io.Discard, nil))
}
