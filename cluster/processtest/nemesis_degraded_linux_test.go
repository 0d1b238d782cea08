//go:build linux

package processtest

import (
	"fmt"
	"slices"
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
