package processtest

import (
	"bytes"
	"context"
	"fmt"
	"github.com/hoplite-go/hoplite/internal/cpuload"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Pauses are not failures. A process stopped with SIGSTOP keeps its
// sockets: connections to it are accepted by the kernel and wait. The
// members must not expel it for a pause their health checks tolerate, and
// one they do expel must come back by itself as a new incarnation.

// incarnations are the member ids a process announced, in order (a member
// that was expelled while alive rejoins as a new one and says so again).
func (p *nodeProc) incarnations() []string {
	var ids []string
	for _, line := range strings.Split(p.stdout.String(), "\n") {
		if m := startLine.FindStringSubmatch(line); m != nil {
			ids = append(ids, m[1])
		}
	}
	return ids
}

// convergeAddrs waits until every node reports the same view with exactly
// one member at each node's address (whatever its incarnation), and
// updates the nodes' ids from it.
func (c *testClient) convergeAddrs(t *testing.T, d time.Duration, nodes ...*nodeProc) []string {
	t.Helper()
	var want []string
	for _, n := range nodes {
		want = append(want, n.address)
	}
	slices.Sort(want)
	end := time.Now().Add(d)
	var last []string
	var lastErr error
	for {
		var first []string
		ok := true
		for _, n := range nodes {
			v, err := c.view(n)
			if err != nil {
				ok, lastErr = false, fmt.Errorf("%s: %w", n.address, err)
				break
			}
			last = v
			var addrs []string
			for _, id := range v {
				a, _, _ := strings.Cut(id, "#")
				addrs = append(addrs, a)
			}
			slices.Sort(addrs)
			if !slices.Equal(addrs, want) || first != nil && !slices.Equal(v, first) {
				ok = false
				break
			}
			first = v
		}
		if ok {
			for _, n := range nodes {
				for _, id := range first {
					if strings.HasPrefix(id, n.address+"#") {
						n.id = id
					}
				}
			}
			return first
		}
		if time.Now().After(end) {
			t.Fatalf("views did not converge on one member at each of %v within %v (last seen %v, %v)", want, d, last, lastErr)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestProcessPauseChaos: 8 `hoplite node` processes under a load of
// broadcasts; members are paused (SIGSTOP, then SIGCONT) for 1–4 s, some
// at once, and one is SIGKILLed meanwhile. Every broadcast Get by a
// member that was not killed returns the exact bytes, the kill is
// detected by every survivor, no paused member is expelled (the health
// checks tolerate these pauses: 3 misses of 2 s), and every paused member
// serves afterwards.
func TestProcessPauseChaos(t *testing.T) {
	cpuload.FromEnv(t) // HOPLITE_CHAOS_LOAD=N: N CPU-bound processes beside the cluster
	bin := hopliteBinary(t)
	const n = 8
	rng := rand.New(rand.NewPCG(11, 0x9a05e))
	slots, seeds := memberSlots(t, n)
	var nodes []*nodeProc
	for i := range n {
		nodes = append(nodes, startNode(t, bin, slots[i], seeds, "-test-chunk-delay", "1ms"))
	}
	for _, p := range nodes {
		p.waitStarted(t, 60*time.Second)
	}
	c := newTestClient(t)
	c.converge(t, nodes...)
	victim := nodes[rng.IntN(n)]
	var paused []*nodeProc
	for _, p := range nodes {
		if p != victim && len(paused) < 4 {
			paused = append(paused, p)
		}
	}
	rng.Shuffle(len(paused), func(i, j int) { paused[i], paused[j] = paused[j], paused[i] })

	// The load: rounds of one Put and four concurrent Gets until the
	// faults are over.
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	var gets int
	var killedAt time.Time
	wg.Add(1)
	go func() {
		defer wg.Done()
		lrng := rand.New(rand.NewPCG(12, 0x10ad))
		for round := 0; ; round++ {
			select {
			case <-stop:
				return
			default:
			}
			mu.Lock()
			gone := !killedAt.IsZero()
			mu.Unlock()
			alive := slices.Clone(nodes)
			if gone {
				alive = without(alive, victim)
			}
			creator := alive[lrng.IntN(len(alive))]
			id := fmt.Sprintf("load-%d", round)
			data := randomBytes(uint64(round), 1<<20+lrng.IntN(2<<20))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err := c.of(creator).Put(ctx, id, data)
			cancel()
			if err != nil {
				if creator != victim {
					mu.Lock()
					failures = append(failures, fmt.Sprintf("put %s on %s: %v", id, creator.id, err))
					mu.Unlock()
				}
				continue
			}
			receivers := without(alive, creator)
			lrng.Shuffle(len(receivers), func(i, j int) { receivers[i], receivers[j] = receivers[j], receivers[i] })
			var rw sync.WaitGroup
			for _, r := range receivers[:4] {
				rw.Add(1)
				go func() {
					defer rw.Done()
					ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
					defer cancel()
					got, err := c.of(r).Get(ctx, id)
					mu.Lock()
					defer mu.Unlock()
					gets++
					switch {
					case r == victim || creator == victim:
						// Its Get died with it, or the only copy did.
					case err != nil:
						failures = append(failures, fmt.Sprintf("get %s at %s: %v", id, r.id, err))
					case !bytes.Equal(got, data):
						failures = append(failures, fmt.Sprintf("get %s at %s: other bytes", id, r.id))
					}
				}()
			}
			rw.Wait()
			ctx, cancel = context.WithTimeout(context.Background(), 30*time.Second)
			_ = c.of(creator).Delete(ctx, id) // memory stays bounded; a miss is harmless
			cancel()
		}
	}()

	// The faults: four pauses of 1–4 s (two overlapping), one kill.
	pause := func(p *nodeProc, d time.Duration) {
		if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Error(err)
			return
		}
		time.Sleep(d)
		if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Error(err)
		}
	}
	length := func() time.Duration { return time.Second + time.Duration(rng.IntN(3000))*time.Millisecond }
	time.Sleep(500 * time.Millisecond)
	var pw sync.WaitGroup
	for i, p := range paused {
		d := length()
		pw.Add(1)
		go func() {
			defer pw.Done()
			pause(p, d)
		}()
		if i%2 == 1 {
			pw.Wait()
		} else {
			time.Sleep(time.Duration(rng.IntN(500)) * time.Millisecond)
		}
		if i == 1 {
			mu.Lock()
			killedAt = time.Now()
			mu.Unlock()
			victim.kill()
		}
	}
	pw.Wait()
	time.Sleep(time.Second)
	close(stop)
	wg.Wait()

	survivors := without(nodes, victim)
	for _, f := range failures {
		t.Error(f)
	}
	checkDetectedBy(t, survivors, victim)
	// Nobody was expelled: every survivor is still its first incarnation,
	// in every view.
	view := c.convergeAddrs(t, 30*time.Second, survivors...)
	for _, p := range survivors {
		if inc := p.incarnations(); len(inc) != 1 {
			t.Errorf("member at %s was expelled while paused: incarnations %v", p.address, inc)
		}
		if !slices.Contains(view, p.incarnations()[0]) {
			t.Errorf("member %s is not in the view %v", p.incarnations()[0], view)
		}
	}
	// Every paused member serves: a Put on it, a Get of it elsewhere.
	for i, p := range paused {
		id := fmt.Sprintf("after-pause-%d", i)
		data := randomBytes(uint64(1000+i), 512<<10)
		putRetry(t, c.of(p), id, data)
		getExact(t, c.of(survivors[(slices.Index(survivors, p)+1)%len(survivors)]), id, data)
	}
	t.Logf("%d broadcast Gets under 4 pauses and a kill", gets)
}

// checkDetectedBy: every survivor published the victim's failure once.
func checkDetectedBy(t *testing.T, survivors []*nodeProc, victim *nodeProc) {
	t.Helper()
	end := time.Now().Add(20 * time.Second)
	for _, p := range survivors {
		for {
			n := len(failurePublished(p, victim.id))
			if n == 1 {
				break
			}
			if n > 1 || time.Now().After(end) {
				t.Fatalf("%s published the failure of %s %d times, want once", p.id, victim.id, n)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// TestProcessExpelledRejoins: a member paused longer than the health
// checks tolerate (here 2 misses of 1 s) is dropped and declared failed
// by the others; once it runs again it is told, and rejoins by itself as
// a new incarnation at the same address, without a restart, and serves.
func TestProcessExpelledRejoins(t *testing.T) {
	bin := hopliteBinary(t)
	slots, seeds := memberSlots(t, 4)
	var nodes []*nodeProc
	for i := range 4 {
		nodes = append(nodes, startNode(t, bin, slots[i], seeds, "-health-timeout", "1s", "-health-misses", "2"))
	}
	for _, p := range nodes {
		p.waitStarted(t, 60*time.Second)
	}
	c := newTestClient(t)
	c.converge(t, nodes...)
	p := nodes[1]
	old := p.id
	others := without(nodes, p)
	if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	// The others drop it and spread its failure while it is stopped.
	end := time.Now().Add(20 * time.Second)
	for _, o := range others {
		for len(failurePublished(o, old)) == 0 {
			if time.Now().After(end) {
				_ = p.cmd.Process.Signal(syscall.SIGCONT)
				t.Fatalf("%s never declared the paused %s failed", o.id, old)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	// The member that originated the notice says why, at info: the
	// provider's signal and its evidence.
	var evidence string
	for _, o := range others {
		for _, e := range o.logs() {
			if e.str("msg") == "member left the topology: spreading a failure notice" && e.str("member") == old &&
				e.str("signal") == "provider topology" && e.str("level") == "info" {
				evidence = e.str("evidence")
			}
		}
	}
	if !strings.Contains(evidence, "consecutive failed health checks") {
		t.Fatalf("no member logged the expulsion of %s with the health checks as evidence (evidence %q)", old, evidence)
	}
	if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	view := c.convergeAddrs(t, 30*time.Second, nodes...)
	inc := p.incarnations()
	if len(inc) != 2 || inc[0] != old || p.id != inc[1] || !slices.Contains(view, inc[1]) {
		t.Fatalf("incarnations %v, view %v: want %s then one new incarnation, in the view", inc, view, old)
	}
	select {
	case <-p.exited:
		t.Fatalf("the expelled member's process exited: %v", p.exitErr)
	default:
	}
	logged(t, p, "expelled while alive: rejoining as a new incarnation", map[string]string{"member": old})
	data := randomBytes(5, 1<<20)
	putRetry(t, c.of(p), "rejoined", data)
	getExact(t, c.of(nodes[0]), "rejoined", data)
	getExact(t, c.of(nodes[2]), "rejoined", data)
}
