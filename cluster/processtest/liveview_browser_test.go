package processtest

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/barrier"
	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/internal/livetest"
	"github.com/hoplite-go/hoplite/messages"
)

// TestLiveViewInABrowser: four `hoplite node` processes and the live view
// of the first, open in headless Chromium. A 16 MiB broadcast loses a
// relaying receiver to SIGKILL mid-transfer, and a Reduce loses a source's
// member; a Reduce then runs until its knee (max_objects), and a throttled
// barrier and a semaphore hold participants. The page shows every stream
// the directory records with its endpoints (in the tree and in the
// timeline), the failover stream and the failed one it replaced, copies
// part way, the reduce tree's positions as the Reduce placed them, part
// way and then done, its repair, the knee, the barriers' counts and
// replicas, every member's measured L (and B where it received), both
// killed members failed, and how each survivor learnt of each failure.
// Each member is the primary of a barrier nobody talks to: once a killed
// member's failure is known, its barrier shows the replica failed, not
// primary, and a take-over pending (or a survivor acting), and the
// directory shards the failure re-homed are one line of the events list
// naming the failed member, each new host and its shards.
func TestLiveViewInABrowser(t *testing.T) {
	bin := hopliteBinary(t)
	browser := livetest.Browser(t)
	slots, seeds := memberSlots(t, 4)
	var nodes []*nodeProc
	for i := range 4 {
		nodes = append(nodes, startNode(t, bin, slots[i], seeds, "-test-chunk-delay", "8ms", "-test-reduce-chunk-delay", "30ms"))
	}
	for _, n := range nodes {
		n.waitStarted(t, 60*time.Second)
	}
	c := newTestClient(t)
	view := c.converge(t, nodes...)
	_, manage, _ := net.SplitHostPort(nodes[0].slot.manage)
	p := livetest.Open(t, browser, "http://127.0.0.1:"+manage+"/live/")
	p.Wait("four members up", func(d livetest.DOM) bool {
		up := 0
		for _, m := range d.Members {
			if m.Health == "up" {
				up++
			}
		}
		return d.Conn == "open" && up == 4
	})

	// ---- barriers: a throttled one (3 enter, the fire lets one through
	// and holds two for the next batch, an hour away) and a semaphore of
	// one (one holds it, one waits), each replicated on 3 members.
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.address)
	}
	bc := cluster.NewBarrierClient(c.system, addrs...)
	bctx, bcancel := context.WithCancel(context.Background())
	defer bcancel()
	newBarrier := func(name string, opts ...barrier.Option) *barrier.Barrier {
		ctx, cancel := context.WithTimeout(bctx, 30*time.Second)
		defer cancel()
		b, err := barrier.New(ctx, bc, name, append(opts, barrier.Replicas(3))...)
		if err != nil {
			t.Fatalf("barrier %s: %v", name, err)
		}
		return b
	}
	throttled := newBarrier("lv-throttled", barrier.Max(3), barrier.Throttle(1, time.Hour))
	sem := newBarrier("lv-sem", barrier.Max(3), barrier.Semaphore(1))
	// A quiet barrier per member, its primary there.
	var hosts []barrier.MemberHost
	for _, n := range nodes {
		hosts = append(hosts, barrier.MemberHost{Member: n.id})
	}
	quiet := map[string]*barrier.Barrier{} // by its primary's member
	for k := 0; len(quiet) < len(nodes); k++ {
		name := fmt.Sprintf("lv-quiet-%d", k)
		if first := barrier.Placement(name, hosts)[0].Member; quiet[first] == nil {
			quiet[first] = newBarrier(name, barrier.Max(2))
		}
	}
	for b, labels := range map[*barrier.Barrier][]string{throttled: {"t1", "t2", "t3"}, sem: {"s1", "s2"}} {
		for _, l := range labels {
			go func() { _, _ = b.Enter(bctx, l) }()
		}
	}
	replicaRows := func(b *barrier.Barrier) []livetest.Replica {
		var out []livetest.Replica
		for i, m := range b.Replicas() {
			out = append(out, livetest.Replica{Member: m, Primary: i == 0})
		}
		return out
	}
	d := p.Wait("the barriers' counts and replicas", func(d livetest.DOM) bool {
		var tb, sb *livetest.Barrier
		for i, b := range d.Barriers {
			switch b.Name {
			case "lv-throttled":
				tb = &d.Barriers[i]
			case "lv-sem":
				sb = &d.Barriers[i]
			}
		}
		for primary, q := range quiet {
			if b := barrierRow(d, q.Name()); b == nil || b.Acting != primary || b.Pending || !slices.Equal(b.Replicas, replicaRows(q)) {
				return false
			}
		}
		return tb != nil && sb != nil && tb.Kind == "throttled" && tb.Entered == 3 && tb.Passed == 1 && tb.Throttled == 2 &&
			slices.Equal(tb.Replicas, replicaRows(throttled)) && sb.Kind == "semaphore" && sb.Holders == 1 && sb.Limit == 1 &&
			sb.Queued == 1 && slices.Equal(sb.Replicas, replicaRows(sem))
	})
	// deadPrimaryShown: once dead's failure is known, its quiet barrier
	// and every other show its replicas failed and not primary, none
	// acting there, and its quiet barrier awaits a take-over (or a
	// survivor acts).
	deadPrimaryShown := func(d livetest.DOM, dead *nodeProc) bool {
		for _, b := range d.Barriers {
			if b.Acting == dead.id {
				return false
			}
			for _, r := range b.Replicas {
				if r.Member == dead.id && (r.Primary || !r.Down) {
					return false
				}
			}
		}
		q := barrierRow(d, quiet[dead.id].Name())
		return q != nil && (q.Pending || slices.ContainsFunc(q.Replicas, func(r livetest.Replica) bool { return r.Member == q.Acting && !r.Down }))
	}
	// rebuildsShown: dead's shards' rebuilds are one line of the events
	// list, naming each new host's (moved lists the shards placement
	// moves: dead's, to the survivors).
	rebuildsShown := func(d livetest.DOM, dead *nodeProc, moved map[string]int) bool {
		lines := 0
		for _, r := range d.Rebuilds {
			if !slices.Contains(r.Failed, dead.id) {
				continue
			}
			lines++
			got, total := map[string]int{}, 0
			for _, h := range r.Hosts {
				if len(h.Shards) != h.Count {
					return false
				}
				got[h.Host] = h.Count
				total += h.Count
			}
			if !maps.Equal(got, moved) || r.Count != total || !slices.Equal(r.Failed, []string{dead.id}) {
				return false
			}
		}
		return lines == 1
	}
	// movedShards counts the shards dead's failure re-homes, by new host.
	movedShards := func(live []*nodeProc, dead *nodeProc) map[string]int {
		var before, after []string
		for _, n := range live {
			before = append(before, n.id)
			if n != dead {
				after = append(after, n.id)
			}
		}
		slices.Sort(before)
		slices.Sort(after)
		was, is := cluster.ShardOwners(before, testShards), cluster.ShardOwners(after, testShards)
		out := map[string]int{}
		for j := range was {
			if was[j] == dead.id {
				out[is[j]]++
			}
		}
		return out
	}

	// ---- broadcast: node 0 creates (it hosts the object's shard and the
	// page); the others Get; a receiver relaying to another is killed.
	data := randomBytes(11, 16<<20)
	id := idOwnedBy(t, view, nodes[0].id, "live-bcast")
	putRetry(t, c.of(nodes[0]), id, data)
	type result struct {
		n   *nodeProc
		err error
	}
	results := make(chan result, 3)
	for _, n := range nodes[1:] {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			got, err := c.of(n).Get(ctx, id)
			if err == nil && !bytes.Equal(got, data) {
				err = fmt.Errorf("%s got other bytes", n.id)
			}
			results <- result{n, err}
		}()
	}
	victim := waitRelay(t, c, nodes, id)
	if err := victim.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-victim.exited
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
	moved := movedShards(nodes, victim)
	p.Wait("the victim's barrier replicas failed and its shards' rebuilds as one line", func(d livetest.DOM) bool {
		return deadPrimaryShown(d, victim) && rebuildsShown(d, victim, moved)
	})
	// What the directory recorded of the broadcast: its streams.
	ictx, icancel := context.WithTimeout(context.Background(), 10*time.Second)
	info, err := c.of(nodes[0]).Info(ictx, id, false)
	icancel()
	if err != nil {
		t.Fatal(err)
	}
	type edge struct{ from, to string }
	var streams []edge
	for _, tr := range info.GetTransfers() {
		if tr.GetReceiver() != victim.id { // the victim's own news died with it
			streams = append(streams, edge{tr.GetSender(), tr.GetReceiver()})
		}
	}
	if len(streams) < 2 {
		t.Fatalf("the directory recorded %d streams to the survivors: %v", len(streams), info.GetTransfers())
	}
	var switched livetest.Switch
	d = p.Wait("the broadcast's streams in the tree and the timeline, the failover and the victim failed", func(d livetest.DOM) bool {
		shown, bars := map[edge]bool{}, map[edge]bool{}
		for _, e := range d.Edges {
			if e.Object == id {
				shown[edge{e.From, e.To}] = true
			}
		}
		for _, b := range d.Bars {
			if b.Object == id {
				bars[edge{b.From, b.To}] = true
			}
		}
		for _, s := range streams {
			if !shown[s] || !bars[s] || !slices.Contains(d.Lanes, s.to) {
				return false
			}
		}
		i := slices.IndexFunc(d.Switches, func(s livetest.Switch) bool {
			return s.Object == id && s.From == victim.id && s.To != victim.id
		})
		if i < 0 {
			return false
		}
		switched = d.Switches[i]
		// The stream the receiver lost is drawn failed, the one it
		// resumed from is the failover.
		lost := slices.Contains(d.Edges, livetest.Edge{Object: id, From: victim.id, To: switched.Receiver, State: "failed"})
		failover := slices.ContainsFunc(d.Edges, func(e livetest.Edge) bool {
			return e.Object == id && e.Failover && e.From == switched.To && e.To == switched.Receiver
		})
		return lost && failover && health(d, victim.id) == "failed"
	})
	for _, e := range d.Edges {
		if e.Object == id && (e.From == e.To || e.From == "" || e.To == "") {
			t.Fatalf("an edge with wrong endpoints: %+v", e)
		}
	}
	seen, err := p.Seen()
	if err != nil {
		t.Fatal(err)
	}
	partial := false
	for k, pct := range seen.Partial {
		partial = partial || strings.HasPrefix(k, id+"|") && pct > 0 && pct < 100
	}
	if !partial {
		t.Fatalf("the objects panel never showed a copy of %s part way: %v", id, seen.Partial)
	}

	// ---- Reduce 4 of 6 on the caller (node 0); three sources exist, one
	// on victim2, placed in the tree before victim2 dies; then the rest.
	a, victim2 := survivors[1], survivors[2]
	moved2 := movedShards(survivors, victim2)
	target := idOwnedBy(t, view, nodes[0].id, "live-sum")
	const elems = 1 << 20
	put := func(n *nodeProc, k int) {
		putRetry(t, c.of(n), fmt.Sprintf("lsrc-%d", k), randomBytes(uint64(200+k), 4*elems))
	}
	var sources []string
	for k := range 6 {
		sources = append(sources, fmt.Sprintf("lsrc-%d", k))
	}
	put(a, 0)
	put(victim2, 1)
	put(nodes[0], 2)
	type reduced struct {
		r   *messages.ReduceReply
		err error
	}
	done := make(chan reduced, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		r, err := c.of(nodes[0]).Reduce(ctx, target, sources, 4, messages.ReduceOp_SUM, messages.DType_INT32)
		done <- reduced{r, err}
	}()
	isTarget := func(reduce string) bool { return strings.HasPrefix(reduce, target+"#") }
	p.Wait("the reduce tree with lsrc-1 placed on its member", func(d livetest.DOM) bool {
		return slices.ContainsFunc(d.Positions, func(x livetest.Position) bool {
			return isTarget(x.Reduce) && x.Object == "lsrc-1" && x.Node == victim2.id
		})
	})
	if err := victim2.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-victim2.exited
	put(nodes[0], 3)
	put(a, 4)
	put(a, 5)
	r := <-done
	if r.err != nil {
		t.Fatalf("reduce with a member killed: %v", r.err)
	}
	plan := r.r.GetPlan().GetPositions()
	d = p.Wait("the reduce tree as answered, its repair, and victim2 failed", func(d livetest.DOM) bool {
		got := map[int]string{}
		for _, x := range d.Positions {
			if isTarget(x.Reduce) && x.State == "done" && x.Progress == 100 {
				got[x.Position] = x.Object + "@" + x.Node
			}
		}
		if len(got) != len(plan) {
			return false
		}
		for _, x := range plan {
			if got[int(x.GetPosition())] != x.GetObjectId()+"@"+x.GetNodeId() {
				return false
			}
		}
		repaired := slices.ContainsFunc(d.Repairs, func(x livetest.Repair) bool {
			return isTarget(x.Reduce) && x.Failed == "lsrc-1"
		})
		return repaired && health(d, victim2.id) == "failed" && health(d, victim.id) == "failed" &&
			deadPrimaryShown(d, victim) && deadPrimaryShown(d, victim2) && rebuildsShown(d, victim2, moved2)
	})
	marked := 0
	for _, x := range d.Positions {
		if isTarget(x.Reduce) && x.Repaired {
			marked++
		}
	}
	if marked == 0 {
		t.Fatal("no reduce position is marked repaired")
	}
	if seen, err = p.Seen(); err != nil {
		t.Fatal(err)
	}
	partWay := false
	for k := range seen.Progress {
		partWay = partWay || isTarget(k)
	}
	if !partWay {
		t.Fatalf("the reduce tree never showed a position part way: %v", seen.Progress)
	}

	// ---- a Reduce until its knee: max_objects fixes it at 2 of 3.
	knee := idOwnedBy(t, view, nodes[0].id, "live-knee")
	kctx, kcancel := context.WithTimeout(context.Background(), 60*time.Second)
	kr, err := c.of(nodes[0]).ReduceUntilKnee(kctx, knee, []string{"lsrc-0", "lsrc-2", "lsrc-3"}, &messages.ReduceKnee{MaxObjects: 2},
		messages.ReduceOp_SUM, messages.DType_INT32)
	kcancel()
	if err != nil || kr.GetCompletedBy() != "max_objects" {
		t.Fatalf("reduce until the knee: %v (completed by %q)", err, kr.GetCompletedBy())
	}
	d = p.Wait("the knee of the second Reduce, and its tree done", func(d livetest.DOM) bool {
		done := 0
		for _, x := range d.Positions {
			if strings.HasPrefix(x.Reduce, knee+"#") && x.State == "done" {
				done++
			}
		}
		return done == 2 && slices.ContainsFunc(d.Reduces, func(x livetest.Reduce) bool {
			return strings.HasPrefix(x.ID, knee+"#") && x.Knee == "max_objects" && x.Num == 2
		})
	})

	// ---- members: every member alive shows its L, and B shows where it
	// was measured (a receiver whose stream ran whole); each survivor noticed both
	// failures, each notice as it came: from a shard of its own, or from
	// the failure broadcast (its origin a member, its forwarder one too,
	// or none when the member raised it).
	ids := map[string]bool{}
	for _, n := range nodes {
		ids[n.id] = true
	}
	if !slices.ContainsFunc(d.Members, func(m livetest.Member) bool { return m.Bandwidth > 0 }) {
		t.Errorf("no member shows a measured B after a 16 MiB broadcast: %+v", d.Members)
	}
	for _, n := range without(survivors, victim2) {
		m := member(t, d, n.id)
		if m.Health != "up" || m.LatencyNs <= 0 {
			t.Errorf("member %s shows %+v: want up, with its L", n.id, m)
		}
		for _, dead := range []*nodeProc{victim, victim2} {
			i := slices.IndexFunc(m.Failures, func(f livetest.Failure) bool { return f.Node == dead.id })
			if i < 0 {
				t.Errorf("%s shows no notice of %s's failure: %+v", n.id, dead.id, m.Failures)
				continue
			}
			switch f := m.Failures[i]; f.Via {
			case "shard":
				if !strings.Contains(f.DetectedBy, "shard") {
					t.Errorf("%s: a shard's notice names no shard: %+v", n.id, f)
				}
			case "revoke":
				if !ids[f.Origin] || f.Forwarder != "" && !ids[f.Forwarder] {
					t.Errorf("%s: a failure broadcast's notice names no member as its origin or forwarder: %+v", n.id, f)
				}
			default:
				t.Errorf("%s: a notice that came neither way: %+v", n.id, f)
			}
		}
	}
	// A replica on a killed member is marked failed.
	for _, b := range d.Barriers {
		for _, r := range b.Replicas {
			if (r.Member == victim.id || r.Member == victim2.id) && !r.Down {
				t.Errorf("barrier %s's replica on the killed %s is not marked failed: %+v", b.Name, r.Member, b.Replicas)
			}
		}
	}
	p.Screenshot("live-view.png", os.Getenv("HOPLITE_LIVEVIEW_SCREENSHOT"))
}

// barrierRow is barrier name's row, nil if the page shows none.
func barrierRow(d livetest.DOM, name string) *livetest.Barrier {
	for i := range d.Barriers {
		if d.Barriers[i].Name == name {
			return &d.Barriers[i]
		}
	}
	return nil
}

// health is the page's word for member id's health.
func health(d livetest.DOM, id string) string {
	for _, m := range d.Members {
		if m.ID == id {
			return m.Health
		}
	}
	return ""
}

// member is member id's row.
func member(t *testing.T, d livetest.DOM, id string) livetest.Member {
	t.Helper()
	for _, m := range d.Members {
		if m.ID == id {
			return m
		}
	}
	t.Fatalf("the page shows no member %s: %+v", id, d.Members)
	return livetest.Member{}
}
