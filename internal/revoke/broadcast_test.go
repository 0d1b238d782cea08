package revoke

import (
	"fmt"
	"math/bits"
	"math/rand"
	"slices"
	"testing"

	"github.com/hoplite-go/hoplite/messages"
)

// checkWave runs one broadcast from origin with the members in dead failed
// from the start and checks delivery, forward-once and message bounds.
func checkWave(t *testing.T, members []string, ovs map[string]*Overlay, dead []string, origin string, rng *rand.Rand, ctx string) *sim {
	t.Helper()
	s := newSim(t, ovs, rng)
	for _, d := range dead {
		s.dead[d] = true
	}
	nt := Notice{Origin: origin, Subject: "failed", Epoch: 7}
	s.originate(origin, nt)
	s.run()
	s.checkAllDelivered(members, nt.ID(), ctx)
	for _, d := range dead {
		if s.delivered[d] != nil {
			t.Fatalf("%s: dead member %q delivered", ctx, d)
		}
	}
	n, deg := len(members), wantDegree(len(members))
	if s.msgs > n*deg {
		t.Fatalf("%s: %d messages > n·degree = %d", ctx, s.msgs, n*deg)
	}
	// Tighter: the origin sends D, everybody else D-1 (not to the sender).
	if n >= 2 && s.msgs > deg+(n-1)*(deg-1) {
		t.Fatalf("%s: %d messages > D+(n-1)(D-1) = %d", ctx, s.msgs, deg+(n-1)*(deg-1))
	}
	for m, c := range s.sentBy {
		if c > deg {
			t.Fatalf("%s: %q sent %d > degree %d", ctx, m, c, deg)
		}
	}
	return s
}

// TestExhaustiveFailureSets: for n ≤ 12, every failure set of size ≤ D-1
// and every live origin: all live members deliver exactly once. For
// 13 ≤ n ≤ 16, every failure set with one origin (the lowest live rank)
// and random message order.
func TestExhaustiveFailureSets(t *testing.T) {
	sets, waves := 0, 0
	for n := 1; n <= 16; n++ {
		members := names(n, "m")
		ovs := overlaysFor(t, members)
		deg := wantDegree(n)
		rng := rand.New(rand.NewSource(int64(n)))
		for mask := uint32(0); mask < 1<<n; mask++ {
			if n >= 2 && bits.OnesCount32(mask) > deg-1 || n == 1 && mask != 0 {
				continue
			}
			var dead, live []string
			for i, m := range members {
				if mask&(1<<i) != 0 {
					dead = append(dead, m)
				} else {
					live = append(live, m)
				}
			}
			sets++
			origins := live
			var order *rand.Rand
			if n > 12 {
				origins, order = live[:1], rng
			}
			for _, origin := range origins {
				waves++
				checkWave(t, members, ovs, dead, origin, order, fmt.Sprintf("n=%d dead=%v origin=%s", n, dead, origin))
			}
		}
		if n == 12 {
			t.Logf("exhaustive n=1..12 (every live origin): %d failure sets, %d waves", sets, waves)
		}
	}
	t.Logf("exhaustive n=1..16: %d failure sets, %d waves", sets, waves)
}

// TestDFailuresCanIsolate: D-1 is the best bound, since failing the D
// neighbours of a member cuts it off.
func TestDFailuresCanIsolate(t *testing.T) {
	for _, n := range []int{3, 5, 8, 12, 100} {
		members := names(n, "m")
		ovs := overlaysFor(t, members)
		victim := members[n/2]
		dead := ovs[victim].Neighbors()
		s := newSim(t, ovs, nil)
		for _, d := range dead {
			s.dead[d] = true
		}
		var origin string
		for _, m := range members {
			if m != victim && !s.dead[m] {
				origin = m
				break
			}
		}
		if origin == "" {
			continue // complete graph: nobody else is left
		}
		s.originate(origin, Notice{Subject: "x"})
		s.run()
		if s.delivered[victim] != nil {
			t.Fatalf("n=%d: isolated member delivered", n)
		}
	}
}

// TestRandomFailureSets: n up to 1024, seeded random failure sets of size
// ≤ D-1 (uniform, all-but-one neighbours of a member, contiguous rank
// blocks), random origins, FIFO and random message order.
func TestRandomFailureSets(t *testing.T) {
	rng := rand.New(rand.NewSource(20240601))
	sizes := []int{13, 17, 31, 32, 33, 63, 64, 65, 96, 100, 127, 128, 129, 255, 256, 257, 384, 500, 511, 512, 513, 640, 768, 1000, 1023, 1024}
	for range 14 {
		sizes = append(sizes, 2+rng.Intn(1023))
	}
	sets := 0
	for _, n := range sizes {
		members := randomNames(rng, n)
		ovs := overlaysFor(t, members)
		sorted := slices.Sorted(slices.Values(members))
		deg := wantDegree(n)
		trials := 40
		if n > 256 {
			trials = 12
		}
		for trial := range trials {
			var dead []string
			switch trial % 3 {
			case 0: // uniform random set of size D-1 (or fewer)
				k := deg - 1 - rng.Intn(2)
				for _, i := range rng.Perm(n)[:max(k, 0)] {
					dead = append(dead, members[i])
				}
			case 1: // all neighbours of a victim but one
				victim := members[rng.Intn(n)]
				nb := ovs[victim].Neighbors()
				keep := rng.Intn(len(nb))
				dead = append(nb[:keep:keep], nb[keep+1:]...)
			case 2: // D-1 consecutive ranks
				start := rng.Intn(n)
				for i := range deg - 1 {
					dead = append(dead, sorted[(start+i)%n])
				}
			}
			isDead := map[string]bool{}
			for _, d := range dead {
				isDead[d] = true
			}
			var origin string
			for origin == "" || isDead[origin] {
				origin = members[rng.Intn(n)]
			}
			var order *rand.Rand
			if trial%2 == 1 {
				order = rand.New(rand.NewSource(int64(trial)))
			}
			sets++
			checkWave(t, members, ovs, dead, origin, order, fmt.Sprintf("n=%d trial=%d", n, trial))
		}
	}
	t.Logf("random: %d failure sets over %d sizes", sets, len(sizes))
}

// TestCrashesDuringBroadcast: members crash part-way through their sends
// (after a random prefix, before delivering). Non-uniform agreement: if any
// surviving member delivered, every surviving member did.
func TestCrashesDuringBroadcast(t *testing.T) {
	rng := rand.New(rand.NewSource(99))
	delivered, none := 0, 0
	for trial := range 300 {
		n := 2 + rng.Intn(200)
		members := randomNames(rng, n)
		ovs := overlaysFor(t, members)
		deg := wantDegree(n)
		s := newSim(t, ovs, rand.New(rand.NewSource(int64(trial))))
		perm := rng.Perm(n)
		k := rng.Intn(deg) // ≤ D-1 failures in total
		crashed := map[string]bool{}
		for _, i := range perm[:k] {
			m := members[i]
			crashed[m] = true
			if rng.Intn(2) == 0 {
				s.dead[m] = true // dead from the start
			} else {
				s.crashAfter[m] = rng.Intn(deg + 1)
			}
		}
		origin := members[perm[rng.Intn(n)]] // possibly a crashing one
		if s.dead[origin] {
			continue
		}
		nt := Notice{Origin: origin, Subject: "s", Epoch: uint64(trial)}
		s.originate(origin, nt)
		s.run()
		var live []string
		reached := false
		for _, m := range members {
			if !crashed[m] {
				live = append(live, m)
				reached = reached || s.delivered[m] != nil
			}
		}
		if !reached {
			none++
			if !crashed[origin] {
				t.Fatalf("trial %d: live origin did not deliver", trial)
			}
			continue
		}
		delivered++
		s.checkAllDelivered(live, nt.ID(), fmt.Sprintf("trial %d", trial))
	}
	t.Logf("crash trials: %d waves reached every survivor, %d died with their origin", delivered, none)
}

func TestDuplicatesIgnored(t *testing.T) {
	members := names(8, "m")
	o, _ := NewOverlay(members, members[0])
	b := NewBroadcaster(o)
	n := Notice{Origin: "m0003", Subject: "m0005", Epoch: 2}
	d := b.receive("m0001", n)
	if !d.Deliver || slices.Contains(targets(d.Sends), "m0001") || len(targets(d.Sends)) != o.Degree()-1 {
		t.Fatalf("first copy: %+v", d)
	}
	for _, from := range []string{"m0001", "m0002", "m0007"} {
		if d := b.receive(from, n); d.Deliver || len(targets(d.Sends)) != 0 {
			t.Fatalf("duplicate from %s: %+v", from, d)
		}
	}
	// Another detector's wave about the same failure merges with it.
	if d := b.originate(Notice{Origin: members[0], Subject: "m0005", Epoch: 2}); d.Deliver || len(targets(d.Sends)) != 0 {
		t.Fatalf("originate of a known notice: %+v", d)
	}
	if d := b.receive("m0004", Notice{Origin: "m0006", Subject: "m0005", Epoch: 2}); d.Deliver || len(targets(d.Sends)) != 0 {
		t.Fatalf("same id, other origin: %+v", d)
	}
	// A new incarnation is a new notice.
	if d := b.originate(Notice{Origin: members[0], Subject: "m0005", Epoch: 3}); !d.Deliver || !slices.Equal(targets(d.Sends), o.Neighbors()) {
		t.Fatalf("new epoch: %+v", d)
	}
	// Sender outside the overlay: nobody is left out.
	if d := b.receive("stranger", Notice{Subject: "q"}); len(targets(d.Sends)) != o.Degree() {
		t.Fatalf("stranger: %+v", d)
	}
}

// TestConcurrentOrigins: several members detect the same failure at once;
// each member still forwards once and delivers once.
func TestConcurrentOrigins(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	members := randomNames(rng, 300)
	s := newSim(t, overlaysFor(t, members), rng)
	for _, i := range rng.Perm(300)[:7] {
		s.originate(members[i], Notice{Origin: members[i], Subject: "victim", Epoch: 1})
		for range 50 {
			s.step()
		}
	}
	s.run()
	s.checkAllDelivered(members, ID{Subject: "victim", Epoch: 1}, "concurrent origins")
	if deg := wantDegree(300); s.msgs > 300*deg {
		t.Fatalf("%d messages > n·D = %d", s.msgs, 300*deg)
	}
}

func TestSeenWindowIsBoundedFIFO(t *testing.T) {
	members := names(16, "m")
	o, _ := NewOverlay(members, members[0])
	b := NewBroadcaster(o, WithWindow(3))
	ids := make([]Notice, 5)
	for i := range ids {
		ids[i] = Notice{Subject: fmt.Sprint("s", i)}
		if d := b.originate(ids[i]); !d.Deliver {
			t.Fatalf("notice %d not new", i)
		}
		if b.Remembered() > 3 {
			t.Fatalf("window holds %d > 3", b.Remembered())
		}
	}
	for i, want := range []bool{false, false, true, true, true} {
		if b.Seen(ids[i].ID()) != want {
			t.Fatalf("Seen(%d) = %v, want %v", i, !want, want)
		}
	}
	// An evicted id is taken for new once (bounded), then a duplicate again.
	if d := b.receive("m0001", ids[0]); !d.Deliver {
		t.Fatal("evicted id not re-accepted")
	}
	if d := b.receive("m0002", ids[0]); d.Deliver || len(targets(d.Sends)) != 0 {
		t.Fatal("re-accepted id not remembered")
	}
	if b.Seen(ids[2].ID()) || !b.Seen(ids[3].ID()) {
		t.Fatal("FIFO order broken: oldest must go first")
	}
	// Default window and a stream much longer than it.
	b = NewBroadcaster(o)
	for i := range 3 * DefaultWindow {
		b.receive("m0001", Notice{Subject: "x", Epoch: uint64(i)})
	}
	if b.Remembered() != DefaultWindow || len(b.ring) != DefaultWindow || len(b.recent) > DefaultWindow {
		t.Fatalf("remembered %d ring %d recent %d", b.Remembered(), len(b.ring), len(b.recent))
	}
	// Recent notices expire after DefaultReplayChanges overlay changes.
	o2, _ := o.WithMembers(members[:10])
	o3, _ := o.WithMembers(members[:13])
	b.setOverlay(o2)
	b.setOverlay(o3)
	if len(b.recent) != 0 {
		t.Fatalf("%d recent notices after %d changes", len(b.recent), DefaultReplayChanges)
	}
	if sends := b.setOverlay(o).Sends; len(sends) != 0 {
		t.Fatalf("expired notices replayed: %d", len(sends))
	}
}

func TestSetOverlayReplaysToGainedNeighbours(t *testing.T) {
	old := names(8, "m")
	o, _ := NewOverlay(old, "m0000")
	b := NewBroadcaster(o)
	n := Notice{Subject: "m0003", Epoch: 1}
	b.originate(n)
	nw, _ := o.WithMembers(append(old[:3:3], old[4:]...)) // m0003 left: n=7
	d := b.setOverlay(nw)
	if d.Deliver {
		t.Fatal("an overlay change delivers nothing")
	}
	sends := d.Sends
	was := map[string]bool{}
	for _, x := range o.Neighbors() {
		was[x] = true
	}
	var want []string
	for _, x := range nw.Neighbors() {
		if !was[x] {
			want = append(want, x)
		}
	}
	var got []string
	for _, s := range sends {
		if got := NoticeOf(s.Msg.(*messages.RevokeNotice)); got != n {
			t.Fatalf("replayed %+v", got)
		}
		got = append(got, s.To.(string))
	}
	if !slices.Equal(got, want) || len(want) == 0 {
		t.Fatalf("replayed to %v, want gained neighbours %v", got, want)
	}
	if b.Overlay() != nw {
		t.Fatal("overlay not switched")
	}
	other, _ := NewOverlay(old, "m0001")
	if s := b.setOverlay(other); !s.Empty() || b.Overlay() != nw {
		t.Fatal("overlay of another self accepted")
	}
	if d := b.receive("m0002", n); d.Deliver {
		t.Fatal("window lost across overlay change")
	}
	noReplay := NewBroadcaster(o, WithReplayChanges(0))
	noReplay.originate(n)
	if r := noReplay.setOverlay(nw).Sends; len(r) != 0 {
		t.Fatalf("replay disabled but %d sends", len(r))
	}
}

// TestTopologyChangeMidBroadcast: members leave (and are dead), others
// join, some members are already on the new overlay when the wave starts,
// the rest switch at random moments during it (or after it has passed
// them). Extra failures among the new members: up to D_new-1. Every live
// member of the new topology delivers exactly once.
func TestTopologyChangeMidBroadcast(t *testing.T) {
	rng := rand.New(rand.NewSource(77))
	for trial := range 400 {
		n1 := 2 + rng.Intn(150)
		m1 := randomNames(rng, n1)
		perm := rng.Perm(n1)
		leave := rng.Intn(min(3, n1-1) + 1)
		left := map[string]bool{}
		for _, i := range perm[:leave] {
			left[m1[i]] = true
		}
		var m2 []string
		for _, m := range m1 {
			if !left[m] {
				m2 = append(m2, m)
			}
		}
		joiners := randomNames(rng, rng.Intn(4))
		for _, j := range joiners {
			if !slices.Contains(m1, j) {
				m2 = append(m2, j)
			}
		}
		old, nw := overlaysFor(t, m1), overlaysFor(t, m2)
		start := map[string]*Overlay{}
		var pending []string
		for _, m := range m2 {
			if _, wasOld := old[m]; !wasOld || rng.Intn(3) == 0 {
				start[m] = nw[m] // joiners and some members: already new
			} else {
				start[m] = old[m]
				pending = append(pending, m)
			}
		}
		for m := range left {
			start[m] = old[m]
		}
		s := newSim(t, start, rand.New(rand.NewSource(int64(trial))))
		for m := range left {
			s.dead[m] = true
		}
		// The origin: a member of both topologies (the detector).
		origin := m1[perm[leave]]
		d2 := wantDegree(len(m2))
		for _, i := range rng.Perm(len(m2))[:rng.Intn(max(d2, 1))] {
			if m2[i] != origin {
				s.dead[m2[i]] = true
			}
		}
		nt := Notice{Origin: origin, Subject: "gone", Epoch: uint64(trial)}
		s.originate(origin, nt)
		rng.Shuffle(len(pending), func(i, j int) { pending[i], pending[j] = pending[j], pending[i] })
		for len(pending) > 0 {
			for range rng.Intn(2 * len(m2)) {
				s.step()
			}
			s.switchTo(pending[0], nw[pending[0]])
			pending = pending[1:]
		}
		s.run()
		s.checkAllDelivered(m2, nt.ID(), fmt.Sprintf("trial %d (n %d→%d)", trial, n1, len(m2)))
	}
}

// TestJoinerNeedsReplay: a member joins while a wave passes. The joiner
// already runs the new overlay (it learned the topology by joining), the
// others still forward on the old one, which does not link to it; they
// switch afterwards. Forwarding on current neighbour sets alone misses the
// joiner; SetOverlay's re-send to gained neighbours reaches it.
func TestJoinerNeedsReplay(t *testing.T) {
	old := []string{"a", "b", "c", "d"}
	nw := []string{"a", "b", "c", "d", "e"}
	for _, replay := range []bool{false, true} {
		var opts []Option
		if !replay {
			opts = append(opts, WithReplayChanges(0))
		}
		oldOv, newOv := overlaysFor(t, old), overlaysFor(t, nw)
		start := map[string]*Overlay{"e": newOv["e"]}
		for _, m := range old {
			start[m] = oldOv[m]
		}
		s := newSim(t, start, nil, opts...)
		nt := Notice{Origin: "a", Subject: "x", Epoch: 1}
		s.originate("a", nt)
		s.run()
		for _, m := range old {
			s.switchTo(m, newOv[m])
		}
		s.run()
		got := s.delivered["e"][nt.ID()]
		if replay {
			s.checkAllDelivered(nw, nt.ID(), "joiner with replay")
			if s.replays != len(old) {
				t.Fatalf("%d replays, want one per old member", s.replays)
			}
		} else if got != 0 {
			t.Fatalf("without replay the joiner delivered %d times; scenario no longer shows the gap", got)
		}
	}
}

// The copies a step sends are whole wire notices: from this member, with
// the subject's address the originator knew, to each neighbour once.
func TestSendsAreWireNotices(t *testing.T) {
	members := []string{"a", "b", "c", "d", "e"}
	o, err := NewOverlay(members, "c")
	if err != nil {
		t.Fatal(err)
	}
	b := NewBroadcaster(o)
	d := b.originate(Notice{Origin: "c", Subject: "e", Epoch: 4, SubjectAddress: "127.0.0.1:9"})
	if !d.Deliver || !slices.Equal(targets(d.Sends), o.Neighbors()) {
		t.Fatalf("originate sent to %v, want %v", targets(d.Sends), o.Neighbors())
	}
	for _, s := range d.Sends {
		m := s.Msg.(*messages.RevokeNotice)
		if m.GetFrom() != "c" || m.GetOrigin() != "c" || m.GetSubject() != "e" || m.GetEpoch() != 4 || m.GetSubjectAddress() != "127.0.0.1:9" {
			t.Fatalf("copy to %v is %v", s.To, m)
		}
	}
}

// TestStaleNoticeDoesNotSuppressALaterIncarnation: members of embedded
// clusters are named alike in every process, so a member may hold a late
// notice about another cluster's "node-1#1" (admitted: it knew no member
// of that name yet) when its own node-1#1 fails. The real failure must
// still be forwarded and delivered, at that member and everywhere; a
// second detector's notice of the same failure must still merge with the
// first (the broadcast terminates), and many incarnations of one name
// must not grow the window.
func TestStaleNoticeDoesNotSuppressALaterIncarnation(t *testing.T) {
	const subject, theirs, ours = "node-1#1", "127.0.0.1:41001", "127.0.0.1:42002"
	members := names(8, "m")
	o, _ := NewOverlay(members, members[0])
	stale := []Notice{
		// As members built notices before the epoch was filled in.
		{Origin: "node-2", Subject: subject, SubjectAddress: theirs},
		// As they build them now.
		FailureNotice(subject, theirs),
	}
	for i, old := range stale {
		b := NewBroadcaster(o)
		if d := b.receive("m0001", old); !d.Deliver {
			t.Fatalf("stale notice %d was not new: %+v", i, d)
		}
		nt := FailureNotice(subject, ours)
		nt.Origin = members[0]
		d := b.originate(nt)
		if !d.Deliver || !slices.Equal(targets(d.Sends), o.Neighbors()) {
			t.Fatalf("after stale notice %d the real failure was suppressed: deliver %v, sent to %v", i, d.Deliver, targets(d.Sends))
		}
		for _, s := range d.Sends {
			if m := s.Msg.(*messages.RevokeNotice); m.GetEpoch() != IncarnationEpoch(ours) || m.GetSubjectAddress() != ours {
				t.Fatalf("copy %v", m)
			}
		}
		other := FailureNotice(subject, ours)
		other.Origin = "m0004"
		if d := b.receive("m0003", other); d.Deliver || len(d.Sends) != 0 {
			t.Fatalf("another detector's notice of the same failure: %+v", d)
		}
	}

	// Every member holds the stale notice; the real wave still reaches
	// every one of them, once.
	rng := rand.New(rand.NewSource(11))
	all := randomNames(rng, 60)
	s := newSim(t, overlaysFor(t, all), rng)
	s.originate(all[3], Notice{Origin: all[3], Subject: subject, SubjectAddress: theirs})
	s.run()
	for _, at := range []string{all[7], all[20]} { // two detectors
		nt := FailureNotice(subject, ours)
		nt.Origin = at
		s.originate(at, nt)
	}
	s.run()
	s.checkAllDelivered(all, FailureNotice(subject, ours).ID(), "real failure after a stale notice")

	// Incarnations of one name are distinct ids, and the window is still
	// the bound.
	b := NewBroadcaster(o, WithWindow(4))
	for port := range 100 {
		if d := b.receive("m0001", FailureNotice(subject, fmt.Sprintf("127.0.0.1:%d", 30000+port))); !d.Deliver {
			t.Fatalf("incarnation %d not new", port)
		}
	}
	if b.Remembered() != 4 {
		t.Fatalf("window holds %d ids, want 4", b.Remembered())
	}
	if d := b.receive("m0002", FailureNotice(subject, "127.0.0.1:30099")); d.Deliver {
		t.Fatal("duplicate of the latest incarnation delivered again")
	}
}

func TestIncarnationEpoch(t *testing.T) {
	if IncarnationEpoch("") != 0 {
		t.Fatal("unknown address: epoch not 0")
	}
	a, b := IncarnationEpoch("127.0.0.1:1001"), IncarnationEpoch("127.0.0.1:1002")
	if a == 0 || a == b || a != IncarnationEpoch("127.0.0.1:1001") {
		t.Fatalf("epochs %d %d", a, b)
	}
	n := FailureNotice("x", "127.0.0.1:1001")
	if n.Subject != "x" || n.SubjectAddress != "127.0.0.1:1001" || n.Epoch != a || n.Origin != "" {
		t.Fatalf("FailureNotice: %+v", n)
	}
}
