package processtest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/cpuload"

	"github.com/hoplite-go/hoplite/barrier"
	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/history"
	"github.com/hoplite-go/hoplite/messages"
)

// Process chaos: the production runtime under SIGKILL and SIGSTOP.
//
// Every seed starts processChaosN `hoplite node` processes (8: the
// binomial graph of the failure broadcast is not complete, so notices
// must be forwarded) and runs three rounds, a broadcast, a Reduce and a
// replicated partial barrier, and one more of a kind drawn from the seed,
// in an order drawn from the seed. Three of the four rounds SIGKILL a
// random member at a random moment while the operation runs (in half
// the broadcasts the object's creator), and half the broadcasts pause
// another member (SIGSTOP, up to 2 s); before the
// third round the first victim restarts (a new incarnation at the same
// address) and Gets every broadcast object so far. The seed fixes the schedule (order,
// victims, delays, sizes); the moments the kills land at still depend on
// the machine.
//
// The oracle:
//   - broadcast: the round's calls and faults are a history checked by
//     internal/history (process_chaos_history_test.go): exact bytes,
//     LOST only once every member known to hold a copy died, TIMEOUT or
//     UNAVAILABLE only where a kill or pause touched the call; once the
//     failure settled every live member reads the object, exactly unless
//     every copy died with the creator;
//   - Reduce: it succeeds with num distinct sources and a target that is
//     exactly their reduction on every survivor, or fails UNAVAILABLE
//     because its caller's member or its coordinator's member (the
//     target's shard) was the victim, and then a retry succeeds, exact;
//   - barrier: every participant passes exactly once, whichever replica's
//     member died;
//   - every member alive at a kill publishes the failure exactly once
//     (its revoke delivery's "member failed" or its shard's "node failed").
//
// How many notices came through a relay (origin ≠ sender) is logged, not
// asserted: most survivors detect a SIGKILL themselves, and on a fast
// machine all of them may. TestProcessFailureNoticeRelayed makes the
// relays carry a notice.
//
// Default: seeds 1 and 2. HOPLITE_PROCESS_CHAOS_SEEDS=n runs seeds 1..n;
// HOPLITE_PROCESS_CHAOS_SEED=s runs seed s alone.

const processChaosN = 8

func processChaosSeeds(t *testing.T) []uint64 {
	if s := os.Getenv("HOPLITE_PROCESS_CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("HOPLITE_PROCESS_CHAOS_SEED=%q: %v", s, err)
		}
		return []uint64{v}
	}
	n := 2
	if s := os.Getenv("HOPLITE_PROCESS_CHAOS_SEEDS"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil || v < 1 {
			t.Fatalf("HOPLITE_PROCESS_CHAOS_SEEDS=%q: want a positive count", s)
		}
		n = v
	}
	var out []uint64
	for s := 1; s <= n; s++ {
		out = append(out, uint64(s))
	}
	return out
}

func TestProcessChaos(t *testing.T) {
	cpuload.FromEnv(t) // HOPLITE_CHAOS_LOAD=N: N CPU-bound processes beside the cluster
	// Mostly waiting on other processes: it runs beside the other such tests.
	t.Parallel()
	bin := hopliteBinary(t)
	forwarded := 0
	for _, seed := range processChaosSeeds(t) {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			forwarded += runProcessChaos(t, bin, seed)
		})
	}
	t.Logf("notices delivered through a relay: %d", forwarded)
}

// processChaos is one seed's cluster and what happened to it.
type processChaos struct {
	t     *testing.T
	rng   *rand.Rand
	bin   string
	seed  uint64
	c     *testClient
	slots []memberSlot
	seeds []string
	live  []*nodeProc // members alive now
	// kills lists each victim with the members alive when it died.
	kills []processKill
	// objects are the broadcast objects, by id.
	objects map[string][]byte
}

type processKill struct {
	victim    *nodeProc
	witnesses []*nodeProc
}

func runProcessChaos(t *testing.T, bin string, seed uint64) int {
	pc := &processChaos{t: t, rng: rand.New(rand.NewPCG(seed, 0x9c4a05)), bin: bin, seed: seed, c: newTestClient(t),
		objects: map[string][]byte{}}
	pc.slots, pc.seeds = memberSlots(t, processChaosN)
	for i := range processChaosN {
		pc.live = append(pc.live, startNode(t, bin, pc.slots[i], pc.seeds, "-test-chunk-delay", "2ms"))
	}
	for _, n := range pc.live {
		n.waitStarted(t, 60*time.Second)
	}
	pc.c.converge(t, pc.live...)

	kinds := []func(round int, kill bool){pc.broadcast, pc.reduce, pc.barrier}
	rounds := append(slices.Clone(kinds), kinds[pc.rng.IntN(len(kinds))])
	pc.rng.Shuffle(len(rounds), func(i, j int) { rounds[i], rounds[j] = rounds[j], rounds[i] })
	quiet := pc.rng.IntN(len(rounds)) // the round without a kill
	for r, round := range rounds {
		if r == 2 {
			pc.restartFirstVictim()
		}
		round(r, r != quiet)
		if t.Failed() {
			return 0
		}
	}
	return pc.checkNotices()
}

// pick returns a random live member not in except.
func (pc *processChaos) pick(except ...*nodeProc) *nodeProc {
	var c []*nodeProc
	for _, n := range pc.live {
		if !slices.Contains(except, n) {
			c = append(c, n)
		}
	}
	return c[pc.rng.IntN(len(c))]
}

// view is the members' current view (they converged).
func (pc *processChaos) view() []string { return pc.c.converge(pc.t, pc.live...) }

// shardOwner is the member hosting id's directory shard in view.
func shardOwner(view []string, id string) string {
	return cluster.ShardOwners(view, testShards)[directory.ShardIndex(id, testShards)]
}

// killAfter SIGKILLs victim after d and records the kill (in rec's
// history too, if set); the returned channel closes once the process is
// gone.
func (pc *processChaos) killAfter(victim *nodeProc, d time.Duration, rec *processHistory) <-chan struct{} {
	witnesses := without(pc.live, victim)
	pc.kills = append(pc.kills, processKill{victim: victim, witnesses: witnesses})
	pc.live = witnesses
	done := make(chan struct{})
	go func() {
		defer close(done)
		time.Sleep(d)
		begin := time.Now()
		_ = victim.cmd.Process.Signal(syscall.SIGKILL)
		<-victim.exited
		if rec != nil {
			rec.fault(history.Kill, victim, begin, time.Now())
		}
	}()
	return done
}

// settle waits until every witness of the last kill published it and the
// survivors' views agree again.
func (pc *processChaos) settle() []string {
	t := pc.t
	t.Helper()
	k := pc.kills[len(pc.kills)-1]
	end := time.Now().Add(20 * time.Second)
	for _, w := range k.witnesses {
		for len(failurePublished(w, k.victim.id)) == 0 {
			if time.Now().After(end) {
				t.Fatalf("seed %d: member %s never published the failure of %s", pc.seed, w.id, k.victim.id)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return pc.view()
}

// failurePublished are p's publications of id's failure: its revoke
// delivery logs "member failed", or, when one of its directory shards saw
// the store terminate first, the shard logs "node failed" (one FailureLog
// per member makes these one NodeFailed event between them).
func failurePublished(p *nodeProc, id string) []logEntry {
	var out []logEntry
	for _, e := range p.logs() {
		if e.str("msg") == "member failed" && e.str("failed") == id || e.str("msg") == "node failed" && e.str("node") == id {
			out = append(out, e)
		}
	}
	return out
}

// restartFirstVictim starts a new incarnation in the first victim's slot.
func (pc *processChaos) restartFirstVictim() {
	if len(pc.kills) == 0 {
		return
	}
	v := pc.kills[0].victim
	n := startNode(pc.t, pc.bin, v.slot, pc.seeds, "-test-chunk-delay", "2ms")
	n.waitStarted(pc.t, 60*time.Second)
	pc.live = append(pc.live, n)
	pc.view()
	for id, data := range pc.objects {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		got, err := pc.c.of(n).Get(ctx, id)
		cancel()
		if err != nil || !bytes.Equal(got, data) {
			pc.t.Fatalf("seed %d: restarted member %s: get %s: %d bytes, %v", pc.seed, n.id, id, len(got), err)
		}
	}
	pc.t.Logf("seed %d: restarted %s as %s", pc.seed, v.id, n.id)
}

// broadcast: a creator Puts an object, four to six members Get it at
// once (a broadcast tree forms), maybe a member dies mid-transfer (half
// the time the creator itself) and maybe another pauses (SIGSTOP) for up
// to 2 s. The round's calls and faults are a history that
// internal/history checks: a Get is exact; LOST only once every member
// known to hold a copy died; TIMEOUT or UNAVAILABLE only where a fault
// touched it. Once the failure settled every live member reads the
// object, exactly unless every copy died.
func (pc *processChaos) broadcast(round int, kill bool) {
	t := pc.t
	view := pc.view()
	creator := pc.pick()
	id := fmt.Sprintf("bcast-%d-%d", pc.seed, round)
	data := randomBytes(pc.seed*100+uint64(round), 2<<20+pc.rng.IntN(4<<20))
	rec := &processHistory{}
	known := slices.Clone(pc.live)
	host := rec.byID(shardOwner(view, id), known)
	begin := time.Now()
	putRetry(t, pc.c.of(creator), id, data)
	rec.call("put "+id+" on "+creator.id, history.Put, creator, id, host, data, begin, time.Now(), begin.Add(20*time.Second), nil)
	receivers := slices.Clone(pc.live)
	receivers = slices.DeleteFunc(receivers, func(n *nodeProc) bool { return n == creator })
	pc.rng.Shuffle(len(receivers), func(i, j int) { receivers[i], receivers[j] = receivers[j], receivers[i] })
	receivers = receivers[:min(len(receivers), 4+pc.rng.IntN(3))]

	var victim, paused *nodeProc
	var killed, resumed <-chan struct{}
	if kill {
		victim = pc.pick(creator)
		if pc.rng.IntN(2) == 0 {
			victim = creator
		}
		killed = pc.killAfter(victim, time.Duration(pc.rng.IntN(120))*time.Millisecond, rec)
	}
	if pc.rng.IntN(2) == 0 {
		paused = pc.pick() // not the victim: it left pc.live
		resumed = pc.pauseAfter(paused, time.Duration(pc.rng.IntN(300))*time.Millisecond,
			500*time.Millisecond+time.Duration(pc.rng.IntN(1500))*time.Millisecond, rec)
	}
	var wg sync.WaitGroup
	for _, n := range receivers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			begin := time.Now()
			deadline, _ := ctx.Deadline()
			got, err := pc.c.of(n).Get(ctx, id)
			rec.call("get "+id+" on "+n.id, history.Get, n, id, host, got, begin, time.Now(), deadline, err)
		}()
	}
	wg.Wait()
	if kill {
		<-killed
		pc.settle()
	}
	if resumed != nil {
		<-resumed
	}
	// Every live member reads it once the faults are over.
	exact := true
	for _, n := range pc.live {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		begin := time.Now()
		deadline, _ := ctx.Deadline()
		got, err := pc.c.of(n).Get(ctx, id)
		cancel()
		rec.call("final get "+id+" on "+n.id, history.Get, n, id, host, got, begin, time.Now(), deadline, err)
		exact = exact && err == nil
	}
	if bad := rec.check(); len(bad) > 0 {
		t.Fatalf("seed %d: broadcast of %s from %s (victim %v, paused %v):\n%s", pc.seed, id, creator.id, nodeID(victim), nodeID(paused), strings.Join(bad, "\n"))
	}
	if exact {
		pc.objects[id] = data // every live member holds it now: it outlives the later kills
	}
	t.Logf("seed %d round %d: broadcast of %d bytes from %s to %d members, victim %v, paused %v, every live member read it: %v",
		pc.seed, round, len(data), creator.id, len(receivers), nodeID(victim), nodeID(paused), exact)
}

// reduce: an int64 SUM of 4 of 5 sources on distinct members, two of
// them Put after the Reduce started, and maybe a random member dies.
func (pc *processChaos) reduce(round int, kill bool) {
	t := pc.t
	view := pc.view()
	const m, num, elems = 5, 4, 128 << 10
	holders := slices.Clone(pc.live)
	pc.rng.Shuffle(len(holders), func(i, j int) { holders[i], holders[j] = holders[j], holders[i] })
	holders = holders[:m]
	var sources []string
	data := map[string][]byte{}
	for k := range m {
		sid := fmt.Sprintf("src-%d-%d-%d", pc.seed, round, k)
		sources = append(sources, sid)
		data[sid] = randomBytes(pc.seed*1000+uint64(round*10+k), 8*elems)
	}
	for k := range 3 {
		putRetry(t, pc.c.of(holders[k]), sources[k], data[sources[k]])
	}
	caller := pc.pick()
	target := fmt.Sprintf("sum-%d-%d", pc.seed, round)
	var victim *nodeProc
	var killed <-chan struct{}
	if kill {
		victim = pc.pick()
		killed = pc.killAfter(victim, time.Duration(pc.rng.IntN(300))*time.Millisecond, nil)
	}
	lateDelay := time.Duration(pc.rng.IntN(200)) * time.Millisecond
	type reduced struct {
		r   *messages.ReduceReply
		err error
	}
	out := make(chan reduced, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		defer cancel()
		r, err := pc.c.of(caller).Reduce(ctx, target, sources, num, messages.ReduceOp_SUM, messages.DType_INT64)
		out <- reduced{r, err}
	}()
	// The late sources: a Put on the victim may die with it.
	time.Sleep(lateDelay)
	var wg sync.WaitGroup
	for k := 3; k < m; k++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if err := pc.c.of(holders[k]).Put(ctx, sources[k], data[sources[k]]); err != nil && holders[k] != victim {
				t.Errorf("seed %d: put %s on %s (victim %v): %v", pc.seed, sources[k], holders[k].id, nodeID(victim), err)
			}
		}()
	}
	wg.Wait()
	res := <-out
	if kill {
		<-killed
		view = pc.settle()
	}
	// The placement the Reduce started under: the victim's shards were
	// its own until it died.
	before := view
	if victim != nil {
		before = pc.viewBefore(view, victim)
	}
	shardHost := shardOwner(before, target)
	retry := func(why string, err error) {
		t.Logf("seed %d: reduce %s: %s: %v; retrying", pc.seed, target, why, err)
		caller = pc.pick()
		target += "-retry"
		ctx, cancel := context.WithTimeout(context.Background(), 40*time.Second)
		defer cancel()
		res.r, res.err = pc.c.of(caller).Reduce(ctx, target, sources, num, messages.ReduceOp_SUM, messages.DType_INT64)
		if res.err != nil {
			t.Fatalf("seed %d: retried reduce %s by %s: %v", pc.seed, target, caller.id, res.err)
		}
	}
	if res.err != nil {
		if victim == nil || !errors.Is(res.err, messages.ErrUnavailable) || victim != caller && shardHost != victim.id {
			t.Fatalf("seed %d: reduce %s by %s (victim %v, target shard on %s): %v", pc.seed, target, caller.id, nodeID(victim), shardHost, res.err)
		}
		retry("its caller's or coordinator's member was killed", res.err)
	}
	for attempt := 0; ; attempt++ {
		ids := res.r.GetReducedIds()
		if len(ids) != num || len(slices.Compact(slices.Sorted(slices.Values(ids)))) != num {
			t.Fatalf("seed %d: reduce %s reduced %v, want %d distinct sources", pc.seed, target, ids, num)
		}
		want := make([]byte, 8*elems)
		for _, sid := range ids {
			b, ok := data[sid]
			if !ok {
				t.Fatalf("seed %d: reduce %s reduced %s, not a source", pc.seed, target, sid)
			}
			for k := range elems {
				s := binary.LittleEndian.Uint64(want[8*k:]) + binary.LittleEndian.Uint64(b[8*k:])
				binary.LittleEndian.PutUint64(want[8*k:], s)
			}
		}
		err := pc.getAll(target, want)
		if err == nil {
			t.Logf("seed %d round %d: reduce by %s of %v, victim %v", pc.seed, round, caller.id, ids, nodeID(victim))
			return
		}
		// The target has one copy: if the kill landed after the Reduce
		// returned and took that copy, it is LOST, or, when the same member
		// hosted the target's shard, forgotten (a Get waits for its
		// deadline; README, Limits).
		lost := victim != nil && errors.Is(err, messages.ErrLost) && strings.Contains(err.Error(), victim.id)
		forgotten := victim != nil && errors.Is(err, messages.ErrTimeout) && shardHost == victim.id
		if attempt > 0 || !lost && !forgotten {
			t.Fatalf("seed %d: reduce %s by %s (victim %v, target shard on %s): %v", pc.seed, target, caller.id, nodeID(victim), shardHost, err)
		}
		retry("its target's only copy died with the victim", err)
	}
}

// getAll Gets id on every live member and compares the bytes.
func (pc *processChaos) getAll(id string, want []byte) error {
	for _, n := range pc.live {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		got, err := pc.c.of(n).Get(ctx, id)
		cancel()
		if err != nil {
			return fmt.Errorf("get %s at %s: %w", id, n.id, err)
		}
		if !bytes.Equal(got, want) {
			return fmt.Errorf("get %s at %s: %d bytes that differ from the %d expected", id, n.id, len(got), len(want))
		}
	}
	return nil
}

// viewBefore is view with the victim still in it (the placement the
// operation started under).
func (pc *processChaos) viewBefore(view []string, victim *nodeProc) []string {
	v := append(slices.Clone(view), victim.id)
	slices.Sort(v)
	return v
}

// barrier: a partial barrier with three replicas; five participants enter
// at random moments from outside the cluster while maybe a member dies,
// half the time one of the barrier's replicas' members.
func (pc *processChaos) barrier(round int, kill bool) {
	t := pc.t
	pc.view()
	var addrs []string
	byID := map[string]*nodeProc{}
	for _, n := range pc.live {
		addrs = append(addrs, n.address)
		byID[n.id] = n
	}
	bc := cluster.NewBarrierClient(pc.c.system, addrs...)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	name := fmt.Sprintf("chaos-%d-%d", pc.seed, round)
	const participants = 5
	b, err := barrier.New(ctx, bc, name, barrier.Max(participants), barrier.Replicas(3),
		barrier.TakeoverAfter(300*time.Millisecond))
	if err != nil {
		t.Fatalf("seed %d: barrier %s: %v", pc.seed, name, err)
	}
	defer b.Stop()
	replicas := b.Replicas()
	var victim *nodeProc
	var killed <-chan struct{}
	if kill {
		if pc.rng.IntN(2) == 0 {
			victim = byID[replicas[pc.rng.IntN(len(replicas))]]
		}
		if victim == nil {
			victim = pc.pick()
		}
		killed = pc.killAfter(victim, time.Duration(pc.rng.IntN(400))*time.Millisecond, nil)
	}
	errs := make(chan error, participants)
	for k := range participants {
		delay := time.Duration(pc.rng.IntN(400)) * time.Millisecond
		label := fmt.Sprintf("p%d", k)
		go func() {
			time.Sleep(delay)
			_, err := b.Enter(ctx, label)
			if err != nil {
				err = fmt.Errorf("%s: %w", label, err)
			}
			errs <- err
		}()
	}
	for range participants {
		if err := <-errs; err != nil {
			t.Fatalf("seed %d: barrier %s (replicas %v, victim %v): enter %v", pc.seed, name, replicas, nodeID(victim), err)
		}
	}
	s, err := b.Status(ctx)
	if err != nil {
		t.Fatalf("seed %d: barrier %s status: %v", pc.seed, name, err)
	}
	seen := map[string]bool{}
	for _, p := range s.Passed {
		if seen[p.Label] {
			t.Fatalf("seed %d: barrier %s: %s passed twice: %+v", pc.seed, name, p.Label, s.Passed)
		}
		seen[p.Label] = true
	}
	if !s.Fired || len(seen) != participants {
		t.Fatalf("seed %d: barrier %s: status %+v, want fired with %d passed", pc.seed, name, s, participants)
	}
	if kill {
		<-killed
		pc.settle()
	}
	t.Logf("seed %d round %d: barrier with replicas %v (primary now %s, epoch %d), victim %v", pc.seed, round, replicas, s.Primary, s.Epoch, nodeID(victim))
}

// checkNotices: every member alive at a kill published that failure
// exactly once; returns how many notices came through a forwarder.
func (pc *processChaos) checkNotices() int {
	forwarded := 0
	for _, k := range pc.kills {
		for _, w := range k.witnesses {
			lines := failurePublished(w, k.victim.id)
			if len(lines) != 1 {
				pc.t.Fatalf("seed %d: %s published the failure of %s %d times, want once", pc.seed, w.id, k.victim.id, len(lines))
			}
			// from is "" where the notice originated here.
			for _, e := range noticesDelivered(w, k.victim.id) {
				if e.str("from") != "" && e.str("origin") != e.str("from") {
					forwarded++
				}
			}
		}
	}
	return forwarded
}

func nodeID(n *nodeProc) string {
	if n == nil {
		return "none"
	}
	return n.id
}
