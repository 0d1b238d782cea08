//go:build linux

package processtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/history"
	"github.com/hoplite-go/hoplite/messages"
)

// internal/history has no event for a slow link: the nemesis records
// loss, reordering and a bandwidth drop on a member as a Stall of the
// member's own calls (which excuses their TIMEOUTs, and no LOST). A call
// of another member that needed the degraded one (its shard's host, a
// holder of its object or of a Reduce's source, which the history names)
// is as slow; degradedExcuse says so for such a TIMEOUT violation, or "".
func degradedExcuse(h history.History, v history.Violation, settle time.Duration) string {
	if v.Rule != history.RuleTimeout {
		return ""
	}
	o := h.Ops[v.Op]
	if o.Code != messages.ErrorCode_TIMEOUT && o.Code != messages.ErrorCode_UNAVAILABLE {
		return ""
	}
	needed := []int{o.Member, o.Hosts[0], o.Hosts[1]}
	objs := append([]string{o.Object}, o.Sources...)
	for _, q := range h.Ops {
		if q.Code == messages.ErrorCode_OK && (q.Kind == history.Put || q.Kind == history.Get) && slices.Contains(objs, q.Object) && q.End.Before(o.End) {
			needed = append(needed, q.Member)
		}
		// A read of a Reduce's target needs the Reduce's members too.
		if q.Kind == history.Reduce && q.Object == o.Object {
			needed = append(needed, q.Member, q.Hosts[0], q.Hosts[1])
		}
	}
	for _, e := range h.Events {
		if e.Kind != history.Stall || e.Object != "" || !slices.Contains(needed, e.Member) {
			continue
		}
		if e.Begin.Before(o.End) && !e.End.Add(settle).Before(o.Begin) {
			return fmt.Sprintf("member %d's link was degraded from %s to %s", e.Member, e.Begin.Format("15:04:05.000"), e.End.Format("15:04:05.000"))
		}
	}
	return ""
}

// A TIMEOUT of a Reduce whose source only a degraded member held is
// excused while the link was degraded and Settle after, not later, and
// not by a degraded member it did not need.
func TestNemesisDegradedExcuse(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	h := history.History{
		Ops: []history.Op{
			{ID: 0, Kind: history.Put, Member: 1, Object: "src", Hosts: [2]int{2, 2}, Begin: at(0), End: at(1)},
			{ID: 1, Kind: history.Reduce, Member: 0, Object: "sum", Sources: []string{"src"}, Num: 1, Hosts: [2]int{0, 0},
				Begin: at(10), End: at(30), Deadline: at(30), Code: messages.ErrorCode_TIMEOUT},
		},
	}
	v := history.Violation{Op: 1, Rule: history.RuleTimeout}
	stall := func(member int, from, to float64) []history.Event {
		return []history.Event{{Kind: history.Stall, Member: member, Shard: -1, Begin: at(from), End: at(to)}}
	}
	for _, tc := range []struct {
		name    string
		events  []history.Event
		excused bool
	}{
		{"the holder's link degraded during it", stall(1, 12, 15), true},
		{"the holder's link degraded just before it", stall(1, 2, 5), true},
		{"the holder's link degraded long before it", stall(1, -30, -20), false},
		{"another member's link", stall(3, 12, 15), false},
		{"no fault", nil, false},
	} {
		h.Events = tc.events
		if got := degradedExcuse(h, v, 15*time.Second); (got != "") != tc.excused {
			t.Errorf("%s: excuse %q, want excused %v", tc.name, got, tc.excused)
		}
	}
	if got := degradedExcuse(h, history.Violation{Op: 1, Rule: history.RuleLost}, time.Minute); got != "" {
		t.Errorf("a LOST violation excused: %q", got)
	}
}

// driverStalls records when the driver itself did not run: a machine
// that stops every process (CPU starvation, memory reclaim) delays the
// driver's reading of an answer as much as the answer, and the history
// would count that delay as the system's lateness.
type driverStalls struct {
	mu   sync.Mutex
	gaps [][2]time.Time
}

// watchDriverStalls samples, until ctx ends, how late a 50 ms sleep of
// the driver wakes, and records each wake-up later than 250 ms.
func watchDriverStalls(ctx context.Context) *driverStalls {
	s := &driverStalls{}
	// last is read before the goroutine starts: a stop that lands before
	// the goroutine first runs must still count from here.
	last := time.Now()
	go func() {
		const tick = 50 * time.Millisecond
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(tick):
			}
			now := time.Now()
			if now.Sub(last) > 5*tick {
				s.add(last.Add(tick), now)
			}
			last = now
		}
	}()
	return s
}

func (s *driverStalls) add(from, to time.Time) {
	s.mu.Lock()
	s.gaps = append(s.gaps, [2]time.Time{from, to})
	s.mu.Unlock()
}

// within is how long the driver did not run between from and to.
func (s *driverStalls) within(from, to time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	var d time.Duration
	for _, g := range s.gaps {
		a, b := g[0], g[1]
		if a.Before(from) {
			a = from
		}
		if b.After(to) {
			b = to
		}
		if b.After(a) {
			d += b.Sub(a)
		}
	}
	return d
}

// lateExcuse says, for an answer later than its deadline (or cancel)
// plus grace, how long of its lateness the driver itself did not run, if
// the rest is within the grace; else "".
func lateExcuse(h history.History, v history.Violation, grace time.Duration, s *driverStalls) string {
	if v.Rule != history.RuleLate || s == nil {
		return ""
	}
	o := h.Ops[v.Op]
	due := o.Deadline
	if !o.Canceled.IsZero() && (due.IsZero() || o.Canceled.Before(due)) {
		due = o.Canceled
	}
	if due.IsZero() || !o.End.After(due) {
		return ""
	}
	late, stalled := o.End.Sub(due), s.within(due, o.End)
	if late-stalled > grace {
		return ""
	}
	return fmt.Sprintf("answered %v late, %v of it while the driver itself did not run", late.Round(time.Millisecond), stalled.Round(time.Millisecond))
}

// An answer late by a stall of the driver is excused only as far as the
// stall covers the time past its due: a stall before the deadline, or
// one shorter than the lateness less the grace, excuses nothing.
func TestNemesisLateExcuse(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s float64) time.Time { return t0.Add(time.Duration(s * float64(time.Second))) }
	h := history.History{Ops: []history.Op{{ID: 0, Kind: history.Get, Member: 0, Object: "x", Begin: at(0), Deadline: at(20), End: at(50)}}}
	v := history.Violation{Op: 0, Rule: history.RuleLate}
	for _, tc := range []struct {
		name    string
		gaps    [][2]float64
		excused bool
	}{
		{"the driver stalled through the lateness", [][2]float64{{15, 49}}, true},
		{"two stalls that add up to the lateness less the grace", [][2]float64{{20, 35}, {36, 50}}, true},
		{"a stall before the deadline", [][2]float64{{5, 19}}, false},
		{"a stall shorter than the lateness less the grace", [][2]float64{{30, 40}}, false},
		{"no stall", nil, false},
	} {
		s := &driverStalls{}
		for _, g := range tc.gaps {
			s.add(at(g[0]), at(g[1]))
		}
		if got := lateExcuse(h, v, 2*time.Second, s); (got != "") != tc.excused {
			t.Errorf("%s: excuse %q, want excused %v", tc.name, got, tc.excused)
		}
	}
	s := &driverStalls{}
	s.add(at(15), at(50))
	if got := lateExcuse(h, history.Violation{Op: 0, Rule: history.RuleTimeout}, 2*time.Second, s); got != "" {
		t.Errorf("a TIMEOUT violation excused: %q", got)
	}
}

// The watch records a stall of the driver that it sleeps through.
func TestNemesisDriverStallsWatch(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	s := watchDriverStalls(ctx)
	from := time.Now()
	// A child stops this process and continues it 600 ms later, as a
	// machine that stops every process would.
	pid := os.Getpid()
	stop := exec.CommandContext(ctx, "sh", "-c", fmt.Sprintf("kill -STOP %d; sleep 0.6; kill -CONT %d", pid, pid))
	if out, err := stop.CombinedOutput(); err != nil {
		t.Fatalf("stop and continue the test process: %v: %s", err, out)
	}
	for ctx.Err() == nil {
		if d := s.within(from, time.Now()); d >= 300*time.Millisecond {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("a 600 ms stop of every goroutine recorded as %v of stall", s.within(from, time.Now()))
}
