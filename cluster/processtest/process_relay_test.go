package processtest

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestProcessFailureNoticeRelayed: the failure broadcast's relays carry a
// notice to the members its origin does not talk to, on `hoplite node`
// processes.
//
// The binomial graph links each member to the ones 1, 2, 4, ... ranks
// away (internal/revoke's Overlay), so a member 3 ranks from the origin
// hears of a failure only through a relay. On a real cluster most
// survivors detect a SIGKILL themselves (their connections to the victim
// break at once), which is why TestProcessChaos cannot count on a relay.
// Here every member but one (the origin) waits 3 s before it probes a
// suspect (-test-probe-delay), so the origin's notice reaches the others
// first. Nine members, the victim 4 ranks after the origin: the members
// 3 and 6 ranks after it are 3 ranks away both in the graph of nine and
// in the graph of eight the victim's removal leaves, so the origin's
// re-send to the neighbours a new graph adds (WithReplayChanges) does not
// reach them either. Each survivor delivers the notice once and publishes
// the failure once, a delayed probe finding a failure already known.
func TestProcessFailureNoticeRelayed(t *testing.T) {
	t.Parallel()
	bin := hopliteBinary(t)
	const n = 9
	slots, seeds := memberSlots(t, n)
	nodes := make([]*nodeProc, n)
	for i := range n {
		var extra []string
		if i > 0 {
			extra = []string{"-test-probe-delay", "3s"}
		}
		nodes[i] = startNode(t, bin, slots[i], seeds, extra...)
	}
	for _, p := range nodes {
		p.waitStarted(t, 60*time.Second)
	}
	c := newTestClient(t)
	view := c.converge(t, nodes...)
	if len(view) != n {
		t.Fatalf("view %v, want %d members", view, n)
	}

	// Ranks are the sorted member ids (internal/revoke's Overlay).
	origin := nodes[0]
	ranked := slices.Clone(nodes)
	slices.SortFunc(ranked, func(a, b *nodeProc) int { return strings.Compare(a.id, b.id) })
	r := slices.Index(ranked, origin)
	at := func(d int) *nodeProc { return ranked[((r+d)%n+n)%n] }
	victim := at(4)
	far := []*nodeProc{at(3), at(6)}

	// The origin reads an object the victim holds, listed in one of the
	// origin's own directory shards: a shard of the origin, and no other
	// member's, watches the victim's store, and a data connection joins
	// the two, so the origin sees the kill at once whatever the warm-up
	// opened.
	data := randomBytes(31, 1<<20)
	id := idOwnedBy(t, view, origin.id, "relay-probe")
	putRetry(t, c.of(victim), id, data)
	getExact(t, c.of(origin), id, data)

	killed := time.Now()
	victim.kill()
	survivors := without(nodes, victim)
	_, seen := firstDetection(t, survivors, victim, killed)
	t.Logf("published: %v", seen)
	// A delayed member's notice may follow its shard's publication.
	waitDelivered(t, survivors, victim, 10*time.Second)

	for _, w := range survivors {
		// Published once, whichever path came first (a directory shard
		// watching the victim's store, or the notice).
		if lines := failurePublished(w, victim.id); len(lines) != 1 {
			t.Fatalf("%s published the failure of %s %d times, want once", w.id, victim.id, len(lines))
		}
		got := noticesDelivered(w, victim.id)
		if len(got) != 1 {
			t.Fatalf("%s delivered %d notices of the failure of %s, want one", w.id, len(got), victim.id)
		}
		e := got[0]
		if e.str("origin") != origin.id {
			t.Errorf("%s delivered the notice of %q, want %s's (the others probe 3 s late)", w.id, e.str("origin"), origin.id)
			continue
		}
		switch from := e.str("from"); {
		case w == origin:
			if from != "" {
				t.Errorf("the origin %s delivered its notice from %q, want none", w.id, from)
			}
		case slices.Contains(far, w):
			// The origin sends to its neighbours only.
			if from == "" || from == origin.id {
				t.Errorf("%s, 3 ranks from the origin, got the notice from %q, want a relay", w.id, from)
			} else {
				t.Logf("%s, 3 ranks from the origin, got its notice from %s", w.id, from)
			}
		}
	}

	// The cluster goes on: the survivors agree on a view without the victim.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for ctx.Err() == nil {
		if v := c.converge(t, survivors...); !slices.Contains(v, victim.id) {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Fatalf("the survivors' view still holds %s", victim.id)
}

// noticesDelivered are p's deliveries of a failure notice about id.
func noticesDelivered(p *nodeProc, id string) []logEntry {
	var out []logEntry
	for _, e := range p.logs() {
		if e.str("msg") == "failure notice delivered" && e.str("failed") == id {
			out = append(out, e)
		}
	}
	return out
}

// waitDelivered waits until every member of nodes delivered a notice of
// victim's failure.
func waitDelivered(t testing.TB, nodes []*nodeProc, victim *nodeProc, d time.Duration) {
	t.Helper()
	end := time.Now().Add(d)
	for _, n := range nodes {
		for len(noticesDelivered(n, victim.id)) == 0 {
			if time.Now().After(end) {
				t.Fatalf("%s delivered no notice of the failure of %s within %v", n.id, victim.id, d)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}
