package memberview

import (
	"fmt"
	"math/rand"
	"slices"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

func ids(n int, rng *rand.Rand) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("127.0.0.1:%d#%08x", 7000+i, rng.Uint32())
	}
	slices.Sort(out)
	return out
}

func TestShardOwnersStableAndBalanced(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	for trial := 0; trial < 200; trial++ {
		n := 1 + rng.Intn(8)
		live := ids(n, rng)
		owners := ShardOwners(live, 64)
		count := map[string]int{}
		for _, o := range owners {
			if !slices.Contains(live, o) {
				t.Fatalf("owner %q is not live", o)
			}
			count[o]++
		}
		if n <= 4 {
			for _, id := range live {
				if count[id] < 64/n/3 {
					t.Fatalf("n=%d: %s owns %d of 64 shards: %v", n, id, count[id], count)
				}
			}
		}
		// A member fails: only its shards move.
		gone := live[rng.Intn(n)]
		rest := slices.DeleteFunc(slices.Clone(live), func(s string) bool { return s == gone })
		after := ShardOwners(rest, 64)
		for j := range owners {
			if owners[j] != gone && after[j] != owners[j] {
				t.Fatalf("shard %d moved from survivor %s to %s", j, owners[j], after[j])
			}
		}
		// A member joins: shards move only to it.
		joiner := fmt.Sprintf("127.0.0.1:%d#ffffffff", 9000+trial)
		grown := append(slices.Clone(live), joiner)
		slices.Sort(grown)
		joined := ShardOwners(grown, 64)
		for j := range owners {
			if joined[j] != owners[j] && joined[j] != joiner {
				t.Fatalf("shard %d moved from %s to %s, not to the joiner", j, owners[j], joined[j])
			}
		}
	}
	if got := ShardOwners(nil, 4); !slices.Equal(got, []string{"", "", "", ""}) {
		t.Fatalf("no members: %v", got)
	}
}

func TestMemberViewLifecycle(t *testing.T) {
	ref := func(id string) *messages.NodeRef {
		return &messages.NodeRef{NodeId: id, Address: id + "-addr", ActorId: "node/store", DataAddress: id + "-data"}
	}
	v := New("b", "b-addr", ref("b"), 16)
	joined, left := v.Topology([]Member{{"a", "a-addr"}, {"b", "b-addr"}, {"c", "c-addr"}, {"d", "d-addr"}})
	if !slices.Equal(joined, []string{"a", "c", "d"}) || left != nil {
		t.Fatalf("joined %v left %v", joined, left)
	}
	if got := v.Live(); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("before any handshake: %v", got)
	}
	if got := len(v.NeedsHello()); got != 3 {
		t.Fatalf("needs hello: %d", got)
	}
	v.Hello("a", "a-addr", ref("a"), true, "")
	if !v.Hello("c", "c-addr", nil, false, "version 2") {
		t.Fatal("first incompatibility not reported")
	}
	if v.Hello("c", "c-addr", ref("c"), true, "") || v.Hello("c", "c-addr", nil, false, "again") {
		t.Fatal("an incompatible member became compatible or was reported twice")
	}
	v.Hello("d", "d-addr", ref("d"), true, "")
	if got := v.Live(); !slices.Equal(got, []string{"a", "b", "d"}) {
		t.Fatalf("live %v", got)
	}
	if c, i, u, _ := v.Compatibility(); c != 2 || i != 1 || u != 0 {
		t.Fatalf("compatibility %d %d %d", c, i, u)
	}
	// d leaves gracefully: out of placement, still reachable and a store
	// to republish from.
	v.Leaving("d")
	if got := v.Live(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("live with d leaving: %v", got)
	}
	if got := v.Reachable(); !slices.Equal(got, []string{"a", "b", "d"}) {
		t.Fatalf("reachable %v", got)
	}
	if got := len(v.Stores()); got != 3 {
		t.Fatalf("stores %d", got)
	}
	// a fails: gone from everything; then the topology drops it.
	if !v.Failed("a", "") || v.Failed("a", "") {
		t.Fatal("Failed must report the first notice only")
	}
	if got := v.Reachable(); !slices.Equal(got, []string{"b", "d"}) {
		t.Fatalf("reachable after a failed: %v", got)
	}
	_, left = v.Topology([]Member{{"b", "b-addr"}, {"c", "c-addr"}, {"d", "d-addr"}})
	if !slices.Equal(left, []string{"a"}) || v.peers["a"] != nil {
		t.Fatalf("left %v, a still known: %v", left, v.peers["a"])
	}
	// A new incarnation of a at the same address stays out of the view
	// for AddressQuarantine after a's failure.
	t0 := time.Unix(1000, 0)
	v.SetNow(t0)
	v.Failed("d", "") // d's address is now quarantined from t0
	v.Topology([]Member{{"b", "b-addr"}, {"c", "c-addr"}, {"d2", "d-addr"}})
	if got := v.NeedsHello(); len(got) != 0 {
		t.Fatalf("greeting a quarantined incarnation: %v", got[0].ID)
	}
	v.Hello("d2", "d-addr", ref("d2"), true, "") // it greeted us
	if got := v.Live(); !slices.Equal(got, []string{"b"}) {
		t.Fatalf("quarantined incarnation live: %v", got)
	}
	v.SetNow(t0.Add(AddressQuarantine))
	if got := v.Live(); !slices.Equal(got, []string{"b", "d2"}) {
		t.Fatalf("after the quarantine: %v", got)
	}
	// self leaving: placement without self.
	v.selfLeaving = true
	if got := v.Live(); !slices.Equal(got, []string{"d2"}) {
		t.Fatalf("live with self leaving: %v", got)
	}
	if v.Address("b") != "b-addr" || v.Address("d2") != "d-addr" || v.Address("zz") != "" {
		t.Fatal("addresses")
	}
}

// A starting member knows its peers from the topology before any
// handshake is over. A failure notice of another process's embedded
// cluster that names a member alike ("node-1") at that cluster's address
// reached a starting node-0 through a recycled loopback port and marked
// its live node-1 dead for good: "the members did not converge within
// 20s: node-0 sees [node-0 node-2] … node-1 … dead true". The view
// takes a notice only if it names the member at the address it knows.
func TestViewIgnoresANoticeAboutAMemberAtAnotherAddress(t *testing.T) {
	ref := func(id string) *messages.NodeRef {
		return &messages.NodeRef{NodeId: id, Address: "127.0.0.1:100" + id[len(id)-1:], ActorId: "node/store", DataAddress: id + "-data"}
	}
	v := New("node-0", "127.0.0.1:1000", ref("node-0"), 4)
	v.Topology([]Member{{"node-0", "127.0.0.1:1000"}, {"node-1", "127.0.0.1:1001"}, {"node-2", "127.0.0.1:1002"}})
	// Another cluster's node-1, at its own address: not this one.
	if v.Failed("node-1", "127.0.0.1:2001") {
		t.Fatal("a notice naming node-1 at another address marked it dead")
	}
	v.Hello("node-1", "127.0.0.1:1001", ref("node-1"), true, "")
	v.Hello("node-2", "127.0.0.1:1002", ref("node-2"), true, "")
	if got := v.Live(); !slices.Equal(got, []string{"node-0", "node-1", "node-2"}) {
		t.Fatalf("live after the foreign notice and the handshakes: %v", got)
	}
	// A notice naming it at its own address (or at none) is about it.
	if !v.Failed("node-1", "127.0.0.1:1001") {
		t.Fatal("a notice naming node-1 at its address was not taken")
	}
	if !v.Failed("node-2", "") {
		t.Fatal("a notice without an address was not taken")
	}
	if got := v.Live(); !slices.Equal(got, []string{"node-0"}) {
		t.Fatalf("live after the real failures: %v", got)
	}
}

// A notice about a member this view does not know yet (admitted: it may
// be about a member the topology dropped already) is not remembered: the
// member that later joins under that name is live, whatever address the
// notice named. Had the notice been about that member, the provider would
// not list it and its handshake would not be answered.
func TestViewForgetsANoticeAboutAnUnknownMember(t *testing.T) {
	ref := &messages.NodeRef{NodeId: "node-4", Address: "127.0.0.1:1004", ActorId: "node/store", DataAddress: "node-4-data"}
	v := New("node-0", "127.0.0.1:1000", &messages.NodeRef{NodeId: "node-0", Address: "127.0.0.1:1000"}, 4)
	for _, addr := range []string{"127.0.0.1:2004", "127.0.0.1:1004", ""} {
		if v.Failed("node-4", addr) {
			t.Fatalf("a notice about the unknown node-4 at %q changed the view", addr)
		}
	}
	v.Topology([]Member{{"node-0", "127.0.0.1:1000"}, {"node-4", "127.0.0.1:1004"}})
	v.Hello("node-4", "127.0.0.1:1004", ref, true, "")
	if got := v.Live(); !slices.Equal(got, []string{"node-0", "node-4"}) {
		t.Fatalf("live after node-4 joined: %v (%v)", got, v.Describe())
	}
}
