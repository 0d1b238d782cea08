package member

import (
	"context"
	"math"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/bufalloc"
)

// A ready member is a warm one. What a member's first operations would
// otherwise pay, it does when it joins and whenever its peers change,
// in the background, bounded in time and in what it holds:
//
//   - a data-plane connection to each peer (up to maxWarmPeers of them,
//     the nearest in member-id order beyond that): one bare control
//     round trip (ControlPing), whose connection the transport then
//     keeps in its pool. A Get's Locate and its stream, and a reduce's
//     streams, find it there instead of dialing. The round trips are
//     also control-latency samples: L is calibrated before the first
//     Reduce plans with it.
//   - the chunk size: a member whose operator stated its link
//     (MemberConfig.LinkRate) takes that rate as its bandwidth until it
//     measures one (Estimator.ObservePeer), so its first transfers are
//     cut to about 5 ms of the link (256 KiB at 400 Mbit/s) instead of
//     the unmeasured default of 1 MiB.
//   - the protobuf encoders and decoders of the messages a member
//     exchanges (codecs.go), built once per process before the first
//     operation needs them.
//   - the actors' pooled workers (actorutil.WarmWorkers): a few parked
//     with their stacks grown, kept however long the member is idle.
//   - the pages of large object buffers (bufalloc.ChoosePages): the
//     first touch of fresh memory is measured once per process with
//     4 KiB pages and with transparent huge pages, and the cheaper one
//     backs every buffer of 4 MiB or more. On a VM whose MMU is
//     paravirtualized, a receiver's fresh 32 MiB buffer faulted in
//     4 KiB pages cost 100 ms of CPU and with huge pages 9 ms; on
//     another VM huge pages cost twice 4 KiB ones. The measurement
//     costs a few to some tens of milliseconds at join.
//   - the memory of the large object buffers (bufalloc.Reserve,
//     MemberConfig.WarmMemory, 128 MiB by default, once per process):
//     faulted in now and kept for them, so that the first operations'
//     receive copies do not fault in and zero fresh memory page by page
//     (on the AMD EPYC testbed VM, 62 % of the members' CPU in a new
//     cluster's first three 32 MiB broadcasts); once the buffers cut
//     from it are unreachable, it serves the next ones. As much again of the
//     memory of large buffers that nothing references any more is kept
//     for the next ones (bufalloc.Keep): the runtime would give it back
//     to the kernel within seconds, and the next operation after a
//     pause faulted it in afresh.
//   - every warmRefresh it pings the peers again, so that their pooled
//     connections outlive the transport's idle limit while the
//     application does other work between operations.
//
// Join waits for the first round (at most warmJoinWait) before it
// returns, and WaitMembers for a round over the peers it counted (at most
// warmJoinWait more): a member that reports ready has its connections
// in place. Nothing here is needed for correctness; a ping that fails
// is tried again at the next change or refresh. The warm-up's cost and
// effect are measured by `hoplite bench --fresh --peers cold`
// (docs/benchmarks.md).

const (
	// maxWarmPeers bounds the peers a member keeps a warm connection to.
	maxWarmPeers = 32
	// warmParallel bounds the round trips in flight at once.
	warmParallel = 8
	// warmTimeout bounds one round trip.
	warmTimeout = 2 * time.Second
	// warmJoinWait bounds how long Join and WaitMembers wait for the
	// warm-up.
	warmJoinWait = 3 * time.Second
	// DefaultWarmMemory is MemberConfig.WarmMemory's default: what one
	// AllReduce of 8 x 32 MiB makes per member (its source, sixteen
	// slices of 4 MiB, the result), the largest working set of the
	// project's benchmarks. With 64 MiB a new cluster's first AllReduce
	// beside Gloo was 1.51 times the rest, with 128 MiB 1.17
	// (docs/benchmarks.md, "The reserve, whole again").
	DefaultWarmMemory = 128 << 20
	// maxWarmMemory bounds MemberConfig.WarmMemory.
	maxWarmMemory = 1 << 40
	// warmRefresh is how often the peers are pinged again: under half of
	// the transport's default pool idle limit (IdleTimeout/2, 45 s).
	warmRefresh = 20 * time.Second
)

func newWarmer(m *Member, disable bool) *warmer {
	return &warmer{m: m, disable: disable, kick: make(chan struct{}, 1), warm: map[string]time.Time{}}
}

// peersChanged tells the warmer that the member's reachable peers
// changed (the members actor calls it; it never blocks).
func (w *warmer) peersChanged() {
	if w == nil || w.disable {
		return
	}
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// start takes the stated link rate as the bandwidth, builds the message
// codecs, warms the peers known now (waiting at most warmJoinWait, or
// ctx) and keeps them warm in the background until quit closes.
func (w *warmer) start(ctx context.Context, quit <-chan struct{}) {
	if w == nil || w.disable {
		return
	}
	if p := w.m.pace(); p > 0 {
		if _, _, _, n := w.m.estimator.Estimate(); n == 0 {
			w.m.estimator.ObservePeer(p)
		}
	}
	warmCodecs()
	w.choosePages()
	w.reserve()
	// After the reserve, whose allocation is the last collection a new
	// member runs for a while: a collection shrinks a parked worker's
	// stack again.
	wctx, cancel := context.WithTimeout(ctx, warmJoinWait)
	actorutil.WarmWorkers(wctx)
	cancel()
	wctx, cancel = context.WithTimeout(ctx, warmJoinWait)
	w.round(wctx)
	cancel()
	go w.run(quit)
}

// run warms the peers whenever they change, and again every warmRefresh.
func (w *warmer) run(quit <-chan struct{}) {
	t := time.NewTicker(warmRefresh)
	defer t.Stop()
	for {
		select {
		case <-quit:
			return
		case <-w.kick:
		case <-t.C:
			w.mu.Lock()
			clear(w.warm) // ping every target again
			w.mu.Unlock()
		}
		ctx, cancel := context.WithTimeout(context.Background(), warmTimeout+time.Second)
		go func() {
			select {
			case <-quit:
				cancel()
			case <-ctx.Done():
			}
		}()
		w.round(ctx)
		cancel()
	}
}

// targets are the data addresses to keep warm: every reachable peer's,
// or, beyond maxWarmPeers, the nearest after this member in id order
// (every member warms a different window of the ring; streams between
// members far apart dial on first use).
func (w *warmer) targets() []string {
	idx := w.m.peers.Load()
	if idx == nil {
		return nil
	}
	type peer struct{ id, data string }
	var ps []peer
	for data, id := range idx.byData {
		ps = append(ps, peer{id, data})
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].id < ps[j].id })
	if len(ps) > maxWarmPeers {
		at := sort.Search(len(ps), func(i int) bool { return ps[i].id > w.m.id })
		ps = append(ps[at:], ps[:at]...)[:maxWarmPeers]
	}
	out := make([]string, 0, len(ps))
	for _, p := range ps {
		out = append(out, p.data)
	}
	return out
}

// round pings every target not warm yet, warmParallel at a time, and
// records the ones that answered; each answer's round trip is a latency
// sample (half of it, one way).
func (w *warmer) round(ctx context.Context) {
	targets := w.targets()
	w.mu.Lock()
	for a := range w.warm { // departed peers' entries go
		if !slices.Contains(targets, a) {
			delete(w.warm, a)
		}
	}
	var todo []string
	for _, a := range targets {
		if _, ok := w.warm[a]; !ok {
			todo = append(todo, a)
		}
	}
	w.mu.Unlock()
	sem := make(chan struct{}, warmParallel)
	var wg sync.WaitGroup
	for _, addr := range todo {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			pctx, cancel := context.WithTimeout(ctx, warmTimeout)
			defer cancel()
			start := time.Now()
			if err := w.m.PingData(pctx, addr); err != nil {
				return
			}
			rtt := time.Since(start)
			w.m.estimator.ObserveLatency(rtt / 2)
			w.mu.Lock()
			w.warm[addr] = time.Now()
			w.mu.Unlock()
		})
	}
	wg.Wait()
}

// waitWarm warms the targets not warm yet and waits for their round
// trips, for at most warmJoinWait or ctx (the warm-up is best effort: it
// never fails a wait). WaitMembers calls it once its n members are live.
func (w *warmer) waitWarm(ctx context.Context) {
	if w == nil || w.disable {
		return
	}
	wctx, cancel := context.WithTimeout(ctx, warmJoinWait)
	defer cancel()
	w.round(wctx)
}

// warmPeers are the data addresses this member holds warm (tests).
func (w *warmer) warmPeers() []string {
	if w == nil {
		return nil
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for a := range w.warm {
		out = append(out, a)
	}
	slices.Sort(out)
	return out
}

var pagesLogged sync.Once

// reserve faults in the memory of the process's large buffers (once per
// process: the first member to warm up does it for all), which serves
// them again whenever the ones cut from it are unreachable.
func (w *warmer) reserve() {
	n := w.m.cfg.WarmMemory
	if n <= 0 {
		return
	}
	r := bufalloc.Reserve(int(min(n, int64(math.MaxInt))))
	bufalloc.Keep(int(min(n, int64(math.MaxInt))))
	reserveLogged.Do(func() {
		w.m.log.WithFields(map[string]any{"bytes": r.Bytes, "took": r.Took.Round(time.Millisecond).String(), "pages": r.Pages.String()}).
			Info("object buffers: memory for the first large ones faulted in")
	})
}

var reserveLogged sync.Once

// choosePages makes the process's page choice (bufalloc.ChoosePages)
// and logs it, once per process: members of one embedded cluster share
// their heap.
func (w *warmer) choosePages() {
	c := bufalloc.ChoosePages()
	pagesLogged.Do(func() { w.m.log.Infof("object buffers: %s", c) })
}
