package sim

import (
	"math"
	"testing"
	"time"
)

// The membership forms and learns of a kill in O(log N) rounds, and a
// member paused for 3 s stays: at each N, a seeded run with every
// member given three seeds and all starting within a second. Without
// the failure notices a kill spreads by rounds and roster pulls alone,
// paced at the refresh interval while they change something: it reaches
// every member within a few overlay hops, O(log N) intervals.
func TestMembershipFormsAndDetectsInLogRounds(t *testing.T) {
	for _, n := range []int{8, 32, 64} {
		for _, notices := range []bool{true, false} {
			o, err := RunMembership(MembershipConfig{N: n, Seed: 7, Latency: 50 * time.Microsecond, MsgCost: 20 * time.Microsecond,
				Seeds: 3, StartSpread: time.Second, Idle: 5 * time.Second, NoNotices: !notices})
			if err != nil {
				t.Fatalf("N=%d: %v", n, err)
			}
			bound := 2*math.Ceil(math.Log2(float64(n))) + 2
			t.Logf("N=%d notices=%v: formed %v after the last start (%d rounds), kill detected %v, known %v (%d rounds, %.1f intervals after detection), %.1f msgs/member/s",
				n, notices, o.Formed, o.FormationRounds, o.Detected, o.Known, o.KnownRounds, o.SpreadIntervals, o.IdleMessages)
			if len(o.Violations) > 0 {
				t.Errorf("N=%d: %q", n, o.Violations)
			}
			if o.Expelled {
				t.Errorf("N=%d: the member paused for %v was expelled", n, o.PauseFor)
			}
			if float64(o.FormationRounds) > bound {
				t.Errorf("N=%d: formed in %d rounds after the last start, want at most %.0f", n, o.FormationRounds, bound)
			}
			if float64(o.KnownRounds) > bound+2 {
				// The rounds from the kill include those before its
				// monitors' next check (the quiet pace: a few).
				t.Errorf("N=%d: the kill known in %d rounds, want at most %.0f", n, o.KnownRounds, bound+2)
			}
			if !notices && o.SpreadIntervals > bound {
				t.Errorf("N=%d: without notices the kill spread in %.1f intervals after its detection, want at most %.0f", n, o.SpreadIntervals, bound)
			}
			if o.Targets > 2*math.Log2(float64(n))+2 {
				t.Errorf("N=%d: %.1f checks per round, want O(log N)", n, o.Targets)
			}
		}
	}
}

// The same seed gives the same run.
func TestMembershipIsDeterministic(t *testing.T) {
	c := MembershipConfig{N: 16, Seed: 3, Latency: 50 * time.Microsecond, MsgCost: 20 * time.Microsecond, Seeds: 2, StartSpread: time.Second, Idle: 5 * time.Second}
	a, err := RunMembership(c)
	if err != nil {
		t.Fatal(err)
	}
	b, err := RunMembership(c)
	if err != nil {
		t.Fatal(err)
	}
	if a.Formed != b.Formed || a.Known != b.Known || a.Messages != b.Messages || a.Events != b.Events || a.Killed != b.Killed {
		t.Fatalf("two runs of one seed differ: %+v, %+v", *a, *b)
	}
}

// TestMembershipIdleTrafficIsLogarithmic: an idle member's monitoring
// traffic (its health checks and its comparisons of views) grows with
// log N: the bytes per member per second at 64 are at most
// log2(64)/log2(8) = 2 times those at 8. A message whose size grows with
// N, such as a whole view in every comparison's answer, breaks it.
func TestMembershipIdleTrafficIsLogarithmic(t *testing.T) {
	bytes := map[int]float64{}
	for _, n := range []int{8, 64} {
		o, err := RunMembership(MembershipConfig{N: n, Seed: 5, Latency: 50 * time.Microsecond, MsgCost: 20 * time.Microsecond,
			Seeds: 3, StartSpread: time.Second, Idle: 40 * time.Second})
		if err != nil {
			t.Fatalf("N=%d: %v", n, err)
		}
		if len(o.Violations) > 0 {
			t.Fatalf("N=%d: %q", n, o.Violations)
		}
		bytes[n] = o.IdleBytes
		t.Logf("N=%d: %.0f B/member/s, %.1f msgs/member/s", n, o.IdleBytes, o.IdleMessages)
	}
	if bytes[8] <= 0 || bytes[64] > bytes[8]*math.Log2(64)/math.Log2(8) {
		t.Fatalf("idle bytes per member per second %.0f at 8, %.0f at 64: more than log2(64)/log2(8) = 2 times", bytes[8], bytes[64])
	}
}
