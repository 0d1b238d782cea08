package liveview

import (
	"context"
	"errors"
	"fmt"
	"net/http/httptest"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/events"
	"github.com/hoplite-go/hoplite/internal/livetest"
)

// Members of the scripted cluster, named as members are (name, then
// "#incarnation" past the first).
const (
	m1 = "node-1" // serves the page; the creator, the coordinator
	m2 = "node-2#2"
	m3 = "node-3#1"
	m4 = "node-4" // answers the first gathering, then is killed
)

// TestPageShowsEveryPanel: the page, in a real browser, fed a scripted
// cluster through the Hub: a broadcast whose relaying receiver failed
// (the receiver switched senders), a Reduce run until a knee whose
// source was lost (a position replaced, its ancestors invalidated) with
// positions part way, a throttled barrier and a semaphore, members'
// stores and measurements, and the failure as each member learnt of it.
// A stream in progress shows its progress and rate. m4 answers the
// view's first gathering as the acting primary of a barrier nobody talks
// to, and never again: the barrier shows its replica on m4 failed, not
// primary, and a take-over pending. m4's shards rebuilt on m2 and m3 are
// one line of the events list, naming each. Every panel shows what it
// was fed, read back from the page's DOM.
func TestPageShowsEveryPanel(t *testing.T) {
	const mib = 1 << 20
	internal := "\x00reduce/sum#1/1/2" // the inner position's output
	statuses := map[string]Status{
		m1: {Address: "sys-1", Capacity: 1 << 30, Used: 48 * mib, Pinned: 16 * mib, LatencyNs: 250_000, Bandwidth: 50e6,
			Copies: []Copy{{ID: "sum", Size: mib, Written: mib / 4}, {ID: "bcast", Size: 16 * mib, Written: 16 * mib, Complete: true, Pinned: true}}},
		m2: {Address: "sys-2", Capacity: 1 << 30, Used: 8 * mib, LatencyNs: 300_000, Bandwidth: 48e6,
			Copies: []Copy{{ID: "bcast", Size: 16 * mib, Written: 6 * mib}, {ID: internal, Size: mib, Written: mib / 2}}},
		m3: {Address: "sys-3", Capacity: 1 << 30, Used: 17 * mib, LatencyNs: 280_000, Bandwidth: 49e6,
			Copies: []Copy{{ID: "bcast", Size: 16 * mib, Written: 16 * mib, Complete: true}}},
	}
	recs := map[string]*Recorder{}
	for _, id := range []string{m1, m2, m3} {
		s := statuses[id]
		s.Member = id
		var moved int64
		recs[id] = NewRecorder(id, 0, func() Status {
			s := s
			s.At = time.Now().UnixMilli()
			if id == m3 {
				// m3 streams "moving" from m1: 64 KiB more at every ask.
				moved = min(moved+64<<10, 16*mib)
				s.Copies = append(slices.Clone(s.Copies), Copy{ID: "moving", Size: 16 * mib, Written: moved})
			}
			return s
		})
	}
	unavailable := errors.New("UNAVAILABLE: the sender failed")
	// The broadcast: m4 relayed to m2 and failed; m2 resumed from m1.
	recs[m2].Observe(&events.TransferStarted{Object: "bcast", Receiver: m2, Sender: m4, Size: 16 * mib})
	recs[m3].Observe(&events.TransferStarted{Object: "bcast", Receiver: m3, Sender: m1, Size: 16 * mib})
	recs[m3].Observe(&events.TransferEnded{Object: "bcast", Receiver: m3, Sender: m1})
	recs[m3].Observe(&events.TransferStarted{Object: "moving", Receiver: m3, Sender: m1, Size: 16 * mib})
	recs[m2].Observe(&events.SenderSwitched{Object: "bcast", Receiver: m2, From: m4, To: m1, Offset: 4 * mib})
	recs[m2].Observe(&events.TransferEnded{Object: "bcast", Receiver: m2, Sender: m4, Err: unavailable})
	recs[m2].Observe(&events.TransferStarted{Object: "bcast", Receiver: m2, Sender: m1, Offset: 4 * mib, Size: 16 * mib})
	// The failure as each member learnt of it.
	recs[m1].Observe(&events.NodeFailed{Node: m4, DetectedBy: "node/shard-3", At: time.Now()})
	recs[m2].Observe(&events.NodeFailed{Node: m4, DetectedBy: "revoke:" + m3, Forwarder: m1, At: time.Now()})
	recs[m3].Observe(&events.NodeFailed{Node: m4, DetectedBy: "revoke:" + m3, At: time.Now()})
	// The Reduce: a chain of 3 fixed by max_objects; s4 on m4 was lost,
	// s2 took its position and the ancestors pull again.
	recs[m1].Observe(&events.ReduceTree{Reduce: "sum#1", Target: "sum", Shape: "d-ary", Degree: 1, Num: 3, Size: mib,
		L: 200 * time.Microsecond, B: 50e6, Knee: "max_objects",
		Costs: map[int]time.Duration{1: 60 * time.Millisecond, 2: 80 * time.Millisecond, 3: 90 * time.Millisecond},
		Positions: []events.ReducePosition{
			{Position: 0, Parent: -1, Object: "s0", Node: m1, Arrival: 0, State: "reducing", Output: "sum"},
			{Position: 1, Parent: 0, Object: "s1", Node: m2, Arrival: 1, State: "reducing", Output: internal},
			{Position: 2, Parent: 1, Object: "s2", Node: m3, Arrival: 3, State: "ready", Output: "s2"},
		}})
	recs[m1].Observe(&events.TreeNodeReplaced{Reduce: "sum#1", Position: 2, Failed: "s4", Replacement: "s2"})
	recs[m1].Observe(&events.AncestorsInvalidated{Reduce: "sum#1", Positions: []int{1, 0}})
	// Barriers: a throttled one whose backup's member failed, a
	// semaphore; a stale state of the throttled one from a replica that
	// no longer acts.
	recs[m1].Observe(&events.BarrierState{Barrier: "tb", Member: m1, Acting: true, Epoch: 1, Kind: "throttled", Max: 4, Entered: 4, Passed: 1,
		Throttled: 3, Fired: true, Reason: "max", Replicas: []events.BarrierReplicaState{{Member: m1, Primary: true}, {Member: m4, Down: true}},
		At: time.Now()})
	recs[m3].Observe(&events.BarrierState{Barrier: "tb", Member: m3, Acting: false, Epoch: 0, Kind: "throttled", Max: 4, Entered: 2,
		Replicas: []events.BarrierReplicaState{{Member: m4, Primary: true}, {Member: m3}}, At: time.Now().Add(-time.Second)})
	recs[m2].Observe(&events.BarrierState{Barrier: "sem", Member: m2, Acting: true, Kind: "semaphore", Max: 5, Entered: 3, Queued: 1,
		Holders: 2, Limit: 2, Replicas: []events.BarrierReplicaState{{Member: m2, Primary: true}, {Member: m3}}, At: time.Now()})
	recs[m1].Observe(&events.BarrierTookOver{Barrier: "tb", Manager: "barriers/tb", Member: m1, Epoch: 1, At: time.Now()})
	// m4's shards rebuilt on m2 and m3, as a member's failure moves them
	// all at once: one line in the events list, not eight.
	rebuiltOn := map[string][]string{}
	for i := range 8 {
		host := []string{m2, m3}[min(i/5, 1)]
		shard := fmt.Sprintf("node#%s/shard-%d", host, i)
		recs[host].Observe(&events.ShardRebuilt{Shard: shard, Host: host})
		rebuiltOn[host] = append(rebuiltOn[host], shard)
	}
	// m4's last report: the acting primary of "qb", backed up on m2 and
	// m3, which no client talks to (no backup takes over).
	var m4Answered atomic.Bool
	m4Peer := Peer{ID: m4, Fetch: func(context.Context, uint64) (*Batch, error) {
		if m4Answered.Swap(true) {
			return nil, unavailable
		}
		return &Batch{Member: m4, Status: &Status{Member: m4, Address: "sys-4", Capacity: 1 << 30, Barriers: []events.BarrierState{{
			Barrier: "qb", Member: m4, Acting: true, Kind: "barrier", Max: 3, Entered: 1,
			Replicas: []events.BarrierReplicaState{{Member: m4, Primary: true}, {Member: m2}, {Member: m3}}, At: time.Now()}}}}, nil
	}}

	hub := NewHub(HubConfig{Self: m1, Interval: 20 * time.Millisecond, Peers: func() []Peer {
		var out []Peer
		for _, id := range []string{m1, m2, m3} {
			rec := recs[id]
			out = append(out, Peer{ID: id, Fetch: func(_ context.Context, since uint64) (*Batch, error) {
				b := rec.Since(since)
				return &b, nil
			}})
		}
		return append(out, m4Peer)
	}})
	srv := httptest.NewServer(hub)
	defer srv.Close()
	defer hub.Close() // first: it ends the page's feed, which srv.Close waits for
	page := livetest.Open(t, livetest.Browser(t), srv.URL+"/")
	d := page.Wait("every panel", func(d livetest.DOM) bool {
		moving := slices.ContainsFunc(d.Streams, func(s livetest.Stream) bool {
			return s.Object == "moving" && s.Progress > 0 && s.Progress < 100 && s.Rate > 0
		})
		return d.Conn == "open" && len(d.Members) == 4 && len(d.Edges) == 4 && len(d.Positions) == 3 && len(d.Barriers) == 3 &&
			len(d.Bars) == 4 && slices.Contains(d.Events, "AncestorsInvalidated") && len(d.Copies) >= 6 && moving
	})
	defer func() {
		if t.Failed() {
			page.Screenshot("failed.png", "")
		}
	}()

	// Members: health, store, L and B, and how each learnt of m4's failure.
	member := func(id string) livetest.Member {
		for _, m := range d.Members {
			if m.ID == id {
				return m
			}
		}
		t.Fatalf("no member %s: %+v", id, d.Members)
		return livetest.Member{}
	}
	for _, id := range []string{m1, m2, m3} {
		if m := member(id); m.Health != "up" || m.LatencyNs != float64(statuses[id].LatencyNs) || m.Bandwidth != statuses[id].Bandwidth {
			t.Errorf("member %s: %+v, want up with L %d ns, B %v", id, m, statuses[id].LatencyNs, statuses[id].Bandwidth)
		}
	}
	if m := member(m4); m.Health != "failed" {
		t.Errorf("the failed member: %+v", m)
	}
	wantFailure := map[string]livetest.Failure{
		m1: {Node: m4, DetectedBy: "node/shard-3", Via: "shard", Text: m4 + ": seen by node/shard-3"},
		m2: {Node: m4, DetectedBy: "revoke:" + m3, Via: "revoke", Origin: m3, Forwarder: m1,
			Text: m4 + ": notice of " + m3 + ", forwarded by " + m1},
		m3: {Node: m4, DetectedBy: "revoke:" + m3, Via: "revoke", Origin: m3, Text: m4 + ": notice of " + m3 + ", raised here"},
	}
	for id, want := range wantFailure {
		if fs := member(id).Failures; len(fs) != 1 || fs[0] != want {
			t.Errorf("%s noticed %+v, want %+v", id, fs, want)
		}
	}

	// The broadcast tree: the relay's stream failed, the failover drawn.
	wantEdges := []livetest.Edge{
		{Object: "bcast", From: m4, To: m2, State: "failed"},
		{Object: "bcast", From: m1, To: m3, State: "done"},
		{Object: "bcast", From: m1, To: m2, State: "streaming", Failover: true},
	}
	for _, e := range wantEdges {
		if !slices.Contains(d.Edges, e) {
			t.Errorf("no edge %+v in %+v", e, d.Edges)
		}
	}
	for _, want := range []livetest.Stream{{Object: "bcast", From: m1, To: m2, Progress: 37}, {Object: "bcast", From: m1, To: m3, Progress: 100}} {
		if !slices.ContainsFunc(d.Streams, func(s livetest.Stream) bool {
			return s.Object == want.Object && s.From == want.From && s.To == want.To && s.Progress == want.Progress
		}) {
			t.Errorf("no stream labelled %+v in %+v", want, d.Streams)
		}
	}
	if want := (livetest.Switch{Object: "bcast", Receiver: m2, From: m4, To: m1}); !slices.Equal(d.Switches, []livetest.Switch{want}) {
		t.Errorf("switches %+v, want %+v", d.Switches, want)
	}

	// Objects: where the copies are, complete or how far.
	for _, c := range []livetest.Copy{
		{Object: "bcast", Member: m1, Complete: true, Progress: 100},
		{Object: "bcast", Member: m2, Progress: 37},
		{Object: "bcast", Member: m3, Complete: true, Progress: 100},
	} {
		if !slices.Contains(d.Copies, c) {
			t.Errorf("no copy %+v in %+v", c, d.Copies)
		}
	}

	// The Reduce: its knee, T(d) beside the tree with the chosen degree,
	// each position's progress, the repair and the invalidated ancestors.
	if len(d.Reduces) != 1 || d.Reduces[0].Knee != "max_objects" || d.Reduces[0].Num != 3 {
		t.Errorf("reduces %+v, want one fixed at 3 by max_objects", d.Reduces)
	} else if cs := d.Reduces[0].Costs; !slices.Equal(cs, []livetest.Cost{{Degree: 1, CostNs: 60e6, Chosen: true}, {Degree: 2, CostNs: 80e6}, {Degree: 3, CostNs: 90e6}}) {
		t.Errorf("T(d): %+v", cs)
	}
	wantPos := map[int]livetest.Position{
		0: {Reduce: "sum#1", Position: 0, Object: "s0", Node: m1, Output: "sum", State: "reducing", Progress: 25, Invalidated: true},
		1: {Reduce: "sum#1", Position: 1, Object: "s1", Node: m2, Output: internal, State: "reducing", Progress: 50, Invalidated: true},
		2: {Reduce: "sum#1", Position: 2, Object: "s2", Node: m3, Output: "s2", State: "ready", Progress: 100, Repaired: true},
	}
	for _, p := range d.Positions {
		if p != wantPos[p.Position] {
			t.Errorf("position %+v, want %+v", p, wantPos[p.Position])
		}
	}
	if want := (livetest.Repair{Reduce: "sum#1", Position: 2, Failed: "s4", Replacement: "s2"}); !slices.Equal(d.Repairs, []livetest.Repair{want}) {
		t.Errorf("repairs %+v, want %+v", d.Repairs, want)
	}

	// The timeline: a lane per receiver, a bar per stream.
	if !slices.Equal(d.Lanes, []string{m2, m3}) {
		t.Errorf("timeline lanes %v, want %s and %s", d.Lanes, m2, m3)
	}
	for _, e := range wantEdges {
		if !slices.Contains(d.Bars, livetest.Bar{Object: e.Object, From: e.From, To: e.To, State: e.State}) {
			t.Errorf("no timeline bar for %+v in %+v", e, d.Bars)
		}
	}

	// Barriers: counts, the semaphore, the replicas (the acting
	// primary's state, not the stale one); m4's barrier with its primary
	// failed, nobody acting, a take-over pending.
	wantBarriers := []livetest.Barrier{
		{Name: "qb", Kind: "barrier", Entered: 1, Pending: true,
			Replicas: []livetest.Replica{{Member: m4, Down: true}, {Member: m2}, {Member: m3}}},
		{Name: "sem", Kind: "semaphore", Entered: 3, Queued: 1, Holders: 2, Limit: 2, Acting: m2,
			Replicas: []livetest.Replica{{Member: m2, Primary: true}, {Member: m3}}},
		{Name: "tb", Kind: "throttled", Entered: 4, Passed: 1, Throttled: 3, Epoch: 1, Acting: m1,
			Replicas: []livetest.Replica{{Member: m1, Primary: true}, {Member: m4, Down: true}}},
	}
	for i, want := range wantBarriers {
		if got := d.Barriers[i]; got.Name != want.Name || got.Kind != want.Kind || got.Entered != want.Entered || got.Passed != want.Passed ||
			got.Throttled != want.Throttled || got.Queued != want.Queued || got.Holders != want.Holders || got.Limit != want.Limit ||
			got.Epoch != want.Epoch || got.Acting != want.Acting || got.Pending != want.Pending || !slices.Equal(got.Replicas, want.Replicas) {
			t.Errorf("barrier %+v, want %+v", got, want)
		}
	}
	for _, k := range []string{"NodeFailed", "SenderSwitched", "TreeNodeReplaced", "AncestorsInvalidated", "BarrierTookOver", "TransferStarted", "TransferEnded", "ShardsRebuilt"} {
		if !slices.Contains(d.Events, k) {
			t.Errorf("the events list has no %s: %v", k, d.Events)
		}
	}
	// The 8 rebuilds: one line, after m4's failure, each host's shards.
	if n := countOf(d.Events, "ShardRebuilt") + countOf(d.Events, "ShardsRebuilt"); n != 1 || len(d.Rebuilds) != 1 {
		t.Errorf("the events list has %d lines of shard rebuilds for m4's 8 shards, want 1: %v", n, d.Events)
	} else if r := d.Rebuilds[0]; r.Count != 8 || !slices.Equal(r.Failed, []string{m4}) || len(r.Hosts) != 2 {
		t.Errorf("the rebuilds' line: %+v; want 8 shards after %s failed, on 2 hosts", r, m4)
	} else {
		for _, h := range r.Hosts {
			if h.Count != len(rebuiltOn[h.Host]) || !slices.Equal(h.Shards, rebuiltOn[h.Host]) {
				t.Errorf("rebuilt on %s: %d %v, want %v", h.Host, h.Count, h.Shards, rebuiltOn[h.Host])
			}
		}
	}
	page.Screenshot("every-panel.png", "")
}

func countOf(kinds []string, k string) int {
	n := 0
	for _, x := range kinds {
		if x == k {
			n++
		}
	}
	return n
}
