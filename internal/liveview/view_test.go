package liveview

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/events"
	"github.com/hoplite-go/hoplite/messages"
)

// scripted is a member whose next answer to a gathering the test sets:
// its status and the events it published since (each at a given time),
// or no answer at all once it is down.
type scripted struct {
	id string

	mu     sync.Mutex
	down   bool
	status Status
	next   []Entry
	seq    uint64
}

func (s *scripted) peer() Peer {
	return Peer{ID: s.id, Fetch: func(context.Context, uint64) (*Batch, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.down {
			return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "%s is down", s.id)
		}
		st := s.status
		st.Member = s.id
		b := &Batch{Member: s.id, Status: &st, Entries: s.next, Last: s.seq}
		s.next = nil
		return b, nil
	}}
}

// publish records e, published at at (Unix ms).
func (s *scripted) publish(t *testing.T, at int64, e any) {
	t.Helper()
	kind, data, _, ok := describe(e)
	if !ok {
		t.Fatalf("the view does not show %T", e)
	}
	b, err := json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.seq++
	s.next = append(s.next, Entry{Seq: s.seq, Member: s.id, At: at, Kind: kind, Data: b})
}

func (s *scripted) set(f func(*Status)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(&s.status)
}

func hubOf(entries int, ms ...*scripted) *Hub {
	return NewHub(HubConfig{Entries: entries, Peers: func() []Peer {
		var out []Peer
		for _, m := range ms {
			out = append(out, m.peer())
		}
		return out
	}})
}

// barrierRow is a barrier as the state frame lists it (its wire form).
type barrierRow struct {
	Barrier         string
	Acting          bool
	Epoch           uint64
	Entered         int
	Replicas        []events.BarrierReplicaState
	ActingMember    string
	TakeoverPending bool
}

func barrierRows(t *testing.T, h *Hub) map[string]barrierRow {
	t.Helper()
	var f struct {
		Barriers []barrierRow `json:"barriers"`
	}
	if err := json.Unmarshal(h.State(), &f); err != nil {
		t.Fatal(err)
	}
	out := map[string]barrierRow{}
	for _, b := range f.Barriers {
		out[b.Barrier] = b
	}
	return out
}

// TestDeadBarrierPrimaryShownAtOnce: m1 hosts the primaries of two
// barriers, "quiet" and "busy", backed up on m2 and m3. m1 is killed: at
// the gathering that brings the news of its failure (m2's NodeFailed),
// with no barrier message since, neither barrier shows m1 as primary or
// as acting: its replicas are down and a take-over is pending. m3's
// take-over of "busy" (BarrierTookOver) makes m3 its acting primary
// before any report of m3's; m3's report then stands. "quiet", which no
// client talks to, stays pending.
func TestDeadBarrierPrimaryShownAtOnce(t *testing.T) {
	m1, m2, m3 := &scripted{id: "m1#a"}, &scripted{id: "m2#b"}, &scripted{id: "m3#c"}
	t0 := time.Unix(1_800_000_000, 0)
	replicas := []events.BarrierReplicaState{{Member: m1.id, Primary: true}, {Member: m2.id}, {Member: m3.id}}
	m1.set(func(s *Status) {
		for _, name := range []string{"busy", "quiet"} {
			s.Barriers = append(s.Barriers, events.BarrierState{Barrier: name, Member: m1.id, Acting: true, Kind: "barrier", Max: 4,
				Entered: 1, Replicas: slices.Clone(replicas), At: t0})
		}
	})
	h := hubOf(64, m1, m2, m3)
	defer h.Close()
	h.Gather()
	for name, b := range barrierRows(t, h) {
		if b.ActingMember != m1.id || b.TakeoverPending || !slices.Equal(b.Replicas, replicas) {
			t.Fatalf("%s before the failure: %+v", name, b)
		}
	}
	if n := len(barrierRows(t, h)); n != 2 {
		t.Fatalf("%d barriers shown, want 2", n)
	}

	// m1 is killed; m2 publishes its failure.
	m1.mu.Lock()
	m1.down = true
	m1.mu.Unlock()
	m2.publish(t, t0.Add(time.Second).UnixMilli(), &events.NodeFailed{Node: m1.id, DetectedBy: "node/shard-1", At: t0.Add(time.Second)})
	h.Gather()
	dead := []events.BarrierReplicaState{{Member: m1.id, Down: true}, {Member: m2.id}, {Member: m3.id}}
	rows := barrierRows(t, h)
	for _, name := range []string{"busy", "quiet"} {
		b := rows[name]
		if b.Acting || b.ActingMember != "" || !b.TakeoverPending || !slices.Equal(b.Replicas, dead) || b.Entered != 1 {
			t.Errorf("%s after its primary's member failed: %+v; want m1 down and not primary, nobody acting, a take-over pending, m1's numbers", name, b)
		}
	}

	// m3 takes "busy" over; its report follows at the next gathering.
	m3.publish(t, t0.Add(3*time.Second).UnixMilli(), &events.BarrierTookOver{Barrier: "busy", Manager: "barriers/busy", Member: m3.id, Epoch: 1,
		At: t0.Add(3 * time.Second)})
	h.Gather()
	rows = barrierRows(t, h)
	tookOver := []events.BarrierReplicaState{{Member: m1.id, Down: true}, {Member: m2.id}, {Member: m3.id, Primary: true}}
	if b := rows["busy"]; b.ActingMember != m3.id || b.TakeoverPending || !slices.Equal(b.Replicas, tookOver) {
		t.Errorf("busy after m3's take-over: %+v; want m3 acting and primary", b)
	}
	if b := rows["quiet"]; b.ActingMember != "" || !b.TakeoverPending || !slices.Equal(b.Replicas, dead) {
		t.Errorf("quiet, which nobody took over: %+v", b)
	}
	m3.set(func(s *Status) {
		s.Barriers = []events.BarrierState{{Barrier: "busy", Member: m3.id, Acting: true, Epoch: 1, Kind: "barrier", Max: 4, Entered: 3,
			Replicas: tookOver, At: t0.Add(4 * time.Second)}}
	})
	h.Gather()
	if b := barrierRows(t, h)["busy"]; b.ActingMember != m3.id || !b.Acting || b.Epoch != 1 || b.Entered != 3 || !slices.Equal(b.Replicas, tookOver) {
		t.Errorf("busy with m3's report: %+v", b)
	}
}

// rebuilt is a ShardsRebuilt entry as the ring holds it (its wire form).
type rebuilt struct {
	Run    uint64   `json:"run"`
	Failed []string `json:"failed"`
	Count  int      `json:"count"`
	Hosts  []struct {
		Host   string   `json:"host"`
		Count  int      `json:"count"`
		Shards []string `json:"shards"`
	} `json:"hosts"`
}

// TestShardRebuildsAreOneEntry: m1's failure re-homes its 64 directory
// shards on m2 and m3, who publish a ShardRebuilt each, with a transfer
// among them, into a ring of 16 entries. The ring holds one entry for
// the 64, naming the failed member, each host's count and every shard,
// and keeps the transfer. Two more rebuilds of the same failure on m4
// at the next gathering are the same run, published again with all 66;
// a shard restarted ten minutes later, with no failure before it, is
// another run, and so is a later failure's.
func TestShardRebuildsAreOneEntry(t *testing.T) {
	m1, m2, m3, m4 := &scripted{id: "m1#a"}, &scripted{id: "m2#b"}, &scripted{id: "m3#c"}, &scripted{id: "m4#d"}
	m1.down = true
	t0 := time.Unix(1_800_000_000, 0).UnixMilli()
	m2.publish(t, t0, &events.NodeFailed{Node: m1.id, DetectedBy: "node/shard-3"})
	m3.publish(t, t0+40, &events.NodeFailed{Node: m1.id, DetectedBy: "revoke:" + m2.id, Forwarder: m2.id})
	want := map[string][]string{}
	for j := range 64 {
		host := []*scripted{m2, m3}[j%3%2]
		shard := fmt.Sprintf("node#%s/shard-%d", host.id, j)
		host.publish(t, t0+200+int64(j)*10, &events.ShardRebuilt{Shard: shard, Host: host.id})
		want[host.id] = append(want[host.id], shard)
		if j == 30 {
			m2.publish(t, t0+500, &events.TransferStarted{Object: "o", Receiver: m2.id, Sender: m3.id, Size: 1 << 20})
		}
	}
	h := hubOf(16, m1, m2, m3, m4)
	defer h.Close()
	h.Gather()
	entries, _, _ := h.afterLocked(0)
	kinds := map[string]int{}
	var runs []rebuilt
	for _, e := range entries {
		kinds[e.Kind]++
		if e.Kind == "ShardsRebuilt" {
			var r rebuilt
			if err := json.Unmarshal(e.Data, &r); err != nil {
				t.Fatal(err)
			}
			runs = append(runs, r)
		}
	}
	if kinds["ShardRebuilt"] != 0 || kinds["ShardsRebuilt"] != 1 || kinds["TransferStarted"] != 1 || kinds["NodeFailed"] != 2 {
		t.Fatalf("the ring holds %v; want the 64 rebuilds as one ShardsRebuilt, the transfer and both NodeFailed", kinds)
	}
	r := runs[0]
	if r.Count != 64 || !slices.Equal(r.Failed, []string{m1.id}) || len(r.Hosts) != 2 {
		t.Fatalf("the run: %+v; want 64 shards after %s failed, on 2 hosts", r, m1.id)
	}
	for _, hr := range r.Hosts {
		if hr.Count != len(want[hr.Host]) || !slices.Equal(hr.Shards, want[hr.Host]) {
			t.Errorf("host %s: %d shards %v; want %d: %v", hr.Host, hr.Count, hr.Shards, len(want[hr.Host]), want[hr.Host])
		}
	}

	// Two more of the same failure on m4, a gathering later.
	m4.publish(t, t0+2000, &events.ShardRebuilt{Shard: "node#m4/shard-64", Host: m4.id})
	m4.publish(t, t0+2100, &events.ShardRebuilt{Shard: "node#m4/shard-65", Host: m4.id})
	h.Gather()
	// A shard restarted after a crash, ten minutes on.
	m2.publish(t, t0+600_000, &events.ShardRebuilt{Shard: "node#m2/shard-7", Host: m2.id})
	h.Gather()
	// m4 fails; m3 rebuilds its shard.
	m4.mu.Lock()
	m4.down = true
	m4.mu.Unlock()
	m2.publish(t, t0+1_200_000, &events.NodeFailed{Node: m4.id, DetectedBy: "node/shard-9"})
	m3.publish(t, t0+1_201_000, &events.ShardRebuilt{Shard: "node#m3/shard-64", Host: m3.id})
	h.Gather()
	entries, _, _ = h.afterLocked(h.last - 4)
	runs = runs[:0]
	for _, e := range entries {
		if e.Kind == "ShardsRebuilt" {
			var r rebuilt
			if err := json.Unmarshal(e.Data, &r); err != nil {
				t.Fatal(err)
			}
			runs = append(runs, r)
		}
	}
	if len(runs) != 3 {
		t.Fatalf("the last 4 entries hold %d runs, want 3: %+v", len(runs), entries)
	}
	if r := runs[0]; r.Run != 1 || r.Count != 66 || !slices.Equal(r.Failed, []string{m1.id}) || len(r.Hosts) != 3 ||
		r.Hosts[2].Host != m4.id || r.Hosts[2].Count != 2 {
		t.Errorf("the first run, grown: %+v", r)
	}
	if r := runs[1]; r.Run == 1 || r.Count != 1 || len(r.Failed) != 0 {
		t.Errorf("a crash's rebuild: %+v; want a run of its own with no failure", r)
	}
	if r := runs[2]; r.Run == 1 || r.Run == runs[1].Run || r.Count != 1 || !slices.Equal(r.Failed, []string{m4.id}) {
		t.Errorf("the second failure's rebuild: %+v", r)
	}
	if s := h.Stats(); s.Entries > s.Capacity || s.Capacity != 16 {
		t.Fatalf("the ring holds %d of %d", s.Entries, s.Capacity)
	}
}
