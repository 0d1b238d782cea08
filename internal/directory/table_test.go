package directory

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/messages"
)

var t0 = time.Unix(1000, 0)

func node(i int) *messages.NodeRef {
	return &messages.NodeRef{NodeId: fmt.Sprintf("n%d", i), ActorId: fmt.Sprintf("n%d/store", i)}
}

// replyTo is an opaque requester as the table sees it.
type replyTo string

func locateReply(t *testing.T, out []outbox.Send, to any) *messages.LocateReply {
	t.Helper()
	r := outbox.SendsTo(out, to)
	if len(r) != 1 {
		t.Fatalf("want one reply to %v, got %d in %v", to, len(r), out)
	}
	lr, ok := r[0].Msg.(*messages.LocateReply)
	if !ok {
		t.Fatalf("want LocateReply, got %T", r[0].Msg)
	}
	return lr
}

func create(t *testing.T, tb *LocationTable, id string, size int64, creator int) {
	t.Helper()
	out := tb.onCreate(&messages.CreateObject{ObjectId: id, Size: size, Fingerprint: 42, Creator: node(creator)}, replyTo("c")).Sends
	r := outbox.SendsTo(out, replyTo("c"))
	if len(r) != 1 || r[0].Msg.(*messages.CreateObjectReply).GetError() != nil {
		t.Fatalf("create: %v", out)
	}
}

func locate(tb *LocationTable, id string, receiver int, now time.Time) []outbox.Send {
	return tb.onLocate(&messages.Locate{ObjectId: id, Receiver: node(receiver), TimeoutMs: 1000}, replyTo(fmt.Sprintf("r%d", receiver)), now).Sends
}

func TestLocatePrefersCompleteAndServesOneAtATime(t *testing.T) {
	// Thesis Figure 2.4 a–d: S sends to R1; R2 arrives and gets partial R1;
	// R1 completes; R3 arrives and gets S (complete beats partial).
	tb := NewLocationTable(TableConfig{})
	create(t, tb, "x", 1<<20, 0)
	tb.onPublish(&messages.PublishLocation{ObjectId: "x", Node: node(0), State: messages.LocationState_COMPLETE, Size: 1 << 20, Creator: true})

	if s := locateReply(t, locate(tb, "x", 1, t0), replyTo("r1")).GetSender().GetNodeId(); s != "n0" {
		t.Fatalf("R1 sender = %s, want n0", s)
	}
	if s := locateReply(t, locate(tb, "x", 2, t0), replyTo("r2")).GetSender().GetNodeId(); s != "n1" {
		t.Fatalf("R2 sender = %s, want n1 (partial, S busy)", s)
	}
	out := tb.onFetchDone(fetchDone(tb, "x", node(1), node(0))).Sends
	if len(out) != 0 {
		t.Fatalf("FetchDone with no waiters sent %v", out)
	}
	if s := locateReply(t, locate(tb, "x", 3, t0), replyTo("r3")).GetSender().GetNodeId(); s != "n0" {
		t.Fatalf("R3 sender = %s, want n0 (complete beats partial R2)", s)
	}
	info := queryInfo(t, tb, "x")
	states := map[string]messages.LocationState{}
	for _, l := range info.GetLocations() {
		states[l.GetNode().GetNodeId()] = l.GetState()
	}
	want := map[string]messages.LocationState{"n0": messages.LocationState_COMPLETE, "n1": messages.LocationState_COMPLETE,
		"n2": messages.LocationState_PARTIAL, "n3": messages.LocationState_PARTIAL}
	if fmt.Sprint(states) != fmt.Sprint(want) {
		t.Fatalf("locations %v, want %v", states, want)
	}
}

func queryInfo(t *testing.T, tb *LocationTable, id string) *messages.ObjectInfo {
	t.Helper()
	out := tb.onQuery(&messages.QueryObject{ObjectId: id}, replyTo("q"), t0).Sends
	info := out[0].Msg.(*messages.ObjectInfo)
	if info.GetError() != nil {
		t.Fatalf("query %s: %v", id, info.GetError())
	}
	return info
}

func TestConcurrentReceiversFormAPipelineNotAStar(t *testing.T) {
	// Receivers that all wait before the object exists are served in order
	// the moment it is created: each fetches from the previous one.
	tb := NewLocationTable(TableConfig{})
	for r := 1; r <= 7; r++ {
		if out := locate(tb, "x", r, t0); len(out) != 0 {
			t.Fatalf("locate before create answered: %v", out)
		}
	}
	out := tb.onCreate(&messages.CreateObject{ObjectId: "x", Size: 1 << 26, Creator: node(0)}, replyTo("c")).Sends
	for r := 1; r <= 7; r++ {
		got := locateReply(t, out, replyTo(fmt.Sprintf("r%d", r))).GetSender().GetNodeId()
		if want := fmt.Sprintf("n%d", r-1); got != want {
			t.Fatalf("receiver %d fetches from %s, want %s", r, got, want)
		}
	}
}

func TestNoSenderServesTwoAtOnceRandomized(t *testing.T) {
	for seed := uint64(0); seed < 200; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		tb := NewLocationTable(TableConfig{})
		const n = 12
		create(t, tb, "x", 1<<20, 0)
		pending := map[int]string{} // receiver -> sender
		waiting := map[int]bool{}
		arrived := 0
		now := t0
		for steps := 0; steps < 200 && (arrived < n-1 || len(pending) > 0 || len(waiting) > 0); steps++ {
			var out []outbox.Send
			switch {
			case arrived < n-1 && rng.IntN(2) == 0:
				arrived++
				waiting[arrived] = true
				out = locate(tb, "x", arrived, now)
			case len(pending) > 0:
				var rs []int
				for r := range pending {
					rs = append(rs, r)
				}
				r := rs[rng.IntN(len(rs))]
				if r == 0 {
					continue
				}
				out = tb.onFetchDone(fetchDone(tb, "x", node(r), &messages.NodeRef{NodeId: pending[r]})).Sends
				delete(pending, r)
			case rng.IntN(3) == 0:
				out = tb.onPublish(&messages.PublishLocation{ObjectId: "x", Node: node(0), State: messages.LocationState_COMPLETE, Size: 1 << 20}).Sends
			}
			for _, s := range out {
				if lr, ok := s.Msg.(*messages.LocateReply); ok {
					var r int
					fmt.Sscanf(string(s.To.(replyTo)), "r%d", &r)
					pending[r] = lr.GetSender().GetNodeId()
					delete(waiting, r)
				}
			}
			// Invariant: every sender serves at most one receiver at a time.
			busy := map[string]int{}
			for r, snd := range pending {
				busy[snd]++
				if busy[snd] > 1 {
					t.Fatalf("seed %d: %s serves two receivers (%v)", seed, snd, pending)
				}
				if snd == fmt.Sprintf("n%d", r) {
					t.Fatalf("seed %d: receiver %d serves itself", seed, r)
				}
			}
		}
		checkTransfersTree(t, seed, queryInfo(t, tb, "x"))
	}
}

// checkTransfersTree asserts from the shard's records that transfers form
// a tree rooted at the creator and that no sender overlapped two.
func checkTransfersTree(t *testing.T, seed uint64, info *messages.ObjectInfo) {
	t.Helper()
	parent := map[string]string{}
	for _, tr := range info.GetTransfers() {
		if _, dup := parent[tr.GetReceiver()]; dup {
			t.Fatalf("seed %d: %s received twice", seed, tr.GetReceiver())
		}
		parent[tr.GetReceiver()] = tr.GetSender()
		for _, o := range info.GetTransfers() {
			if o != tr && o.GetSender() == tr.GetSender() && overlaps(o, tr) {
				t.Fatalf("seed %d: %s served %s and %s at once", seed, tr.GetSender(), tr.GetReceiver(), o.GetReceiver())
			}
		}
	}
	for r := range parent {
		seen := map[string]bool{}
		for cur := r; cur != "n0"; cur = parent[cur] {
			if seen[cur] || parent[cur] == "" {
				t.Fatalf("seed %d: %s does not lead back to the creator: %v", seed, r, parent)
			}
			seen[cur] = true
		}
	}
}

func overlaps(a, b *messages.Transfer) bool {
	end := func(t *messages.Transfer) int64 {
		if t.GetEndSeq() == 0 {
			return 1 << 62
		}
		return t.GetEndSeq()
	}
	return a.GetStartSeq() < end(b) && b.GetStartSeq() < end(a)
}

func TestCycleRefusedOnFailover(t *testing.T) {
	// Figure 2.4 c': S→R1→R2 and R1 fails. R2 locates again naming R1 as
	// failed: it must get S, never a node downstream of itself.
	tb := NewLocationTable(TableConfig{})
	create(t, tb, "x", 100, 0)
	locate(tb, "x", 1, t0)        // R1 <- S
	locate(tb, "x", 2, t0)        // R2 <- R1
	out := locate(tb, "x", 3, t0) // R3 <- R2 (S and R1 busy)
	if s := locateReply(t, out, replyTo("r3")).GetSender().GetNodeId(); s != "n2" {
		t.Fatalf("R3 from %s, want n2", s)
	}
	out = tb.onLocate(&messages.Locate{ObjectId: "x", Receiver: node(2), TimeoutMs: 100, FailedSender: node(1)}, replyTo("r2"), t0).Sends
	if s := locateReply(t, out, replyTo("r2")).GetSender().GetNodeId(); s != "n0" {
		t.Fatalf("R2 resumed from %s, want n0", s)
	}
	// Now only R3 is free, and it is downstream of R2: a second failover of
	// R2 (S failed too) must wait instead of creating R2<-R3<-R2.
	out = tb.onLocate(&messages.Locate{ObjectId: "x", Receiver: node(2), TimeoutMs: 100, FailedSender: node(0)}, replyTo("r2"), t0).Sends
	if len(outbox.SendsTo(out, replyTo("r2"))) != 0 {
		t.Fatalf("R2 was given a sender in its own downstream: %v", out)
	}
	out = tb.onTick(t0.Add(time.Second)).Sends
	if lr := locateReply(t, out, replyTo("r2")); !errors.Is(lr.GetError(), messages.ErrTimeout) {
		t.Fatalf("want TIMEOUT, got %v", lr.GetError())
	}
}

func TestInlineObjectsNeedNoSender(t *testing.T) {
	tb := NewLocationTable(TableConfig{InlineLimit: 64})
	out := locate(tb, "small", 1, t0)
	tb.onCreate(&messages.CreateObject{ObjectId: "small", Size: 3, Creator: node(0), HasInline: true, InlineData: []byte("abc")}, nil)
	_ = out
	out = locate(tb, "small", 2, t0)
	lr := locateReply(t, out, replyTo("r2"))
	if !lr.GetHasInline() || string(lr.GetInlineData()) != "abc" || lr.GetSender() != nil {
		t.Fatalf("inline reply %v", lr)
	}
	// An inline object is never claimed: the creator can serve everyone.
	if lr := locateReply(t, locate(tb, "small", 3, t0), replyTo("r3")); string(lr.GetInlineData()) != "abc" {
		t.Fatalf("second inline reply %v", lr)
	}
}

// An inline reply makes its receiver a copy at once: the receiver sends
// no PublishLocation, yet a Delete reaches its copy; one that could not
// store the bytes unpublishes.
func TestInlineReplyRecordsTheReceiversCopy(t *testing.T) {
	tb := NewLocationTable(TableConfig{InlineLimit: 64})
	tb.onCreate(&messages.CreateObject{ObjectId: "small", Size: 3, Creator: node(0), HasInline: true, InlineData: []byte("abc")}, nil)
	locateReply(t, locate(tb, "small", 2, t0), replyTo("r2"))
	locateReply(t, locate(tb, "small", 3, t0), replyTo("r3"))
	tb.onUnpublish(&messages.UnpublishLocation{ObjectId: "small", Node: node(3)})
	info := tb.onQuery(&messages.QueryObject{ObjectId: "small"}, replyTo("q"), t0).Sends[0].Msg.(*messages.ObjectInfo)
	var got []string
	for _, l := range info.GetLocations() {
		if l.GetNode().GetNodeId() != "n0" && l.GetState() != messages.LocationState_COMPLETE {
			t.Errorf("received copy on %s is %v", l.GetNode().GetNodeId(), l.GetState())
		}
		got = append(got, l.GetNode().GetNodeId())
	}
	if want := []string{"n0", "n2"}; !slices.Equal(got, want) {
		t.Fatalf("locations %v, want %v (the creator and the receiver that kept its copy)", got, want)
	}
}

func TestWaitingLocateIsServedOnCreate(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	if out := locate(tb, "x", 1, t0); len(out) != 0 {
		t.Fatalf("answered before create: %v", out)
	}
	out := tb.onCreate(&messages.CreateObject{ObjectId: "x", Size: 1 << 20, Creator: node(0)}, replyTo("c")).Sends
	lr := locateReply(t, out, replyTo("r1"))
	if lr.GetSender().GetNodeId() != "n0" || lr.GetSenderState() != messages.LocationState_PARTIAL || lr.GetSize() != 1<<20 {
		t.Fatalf("reply %v", lr)
	}
}

func TestCreateConflictAndIdempotence(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	create(t, tb, "x", 10, 0)
	out := tb.onCreate(&messages.CreateObject{ObjectId: "x", Size: 10, Fingerprint: 42, Creator: node(1)}, replyTo("c2")).Sends
	if r := out[0].Msg.(*messages.CreateObjectReply); r.GetError() != nil || !r.GetExisted() {
		t.Fatalf("same bytes: %v", r)
	}
	out = tb.onCreate(&messages.CreateObject{ObjectId: "x", Size: 10, Fingerprint: 43, Creator: node(1)}, replyTo("c2")).Sends
	if r := out[0].Msg.(*messages.CreateObjectReply); !errors.Is(r.GetError(), messages.ErrConflict) {
		t.Fatalf("other bytes: %v", r)
	}
	out = tb.onCreate(&messages.CreateObject{ObjectId: "x", Size: 11, Fingerprint: 42, Creator: node(1)}, replyTo("c2")).Sends
	if r := out[0].Msg.(*messages.CreateObjectReply); !errors.Is(r.GetError(), messages.ErrConflict) {
		t.Fatalf("other size: %v", r)
	}
}

func TestBadInput(t *testing.T) {
	tb := NewLocationTable(TableConfig{MaxObjectIDLen: 8})
	cases := map[string][]outbox.Send{
		"empty id":     tb.onCreate(&messages.CreateObject{ObjectId: "", Creator: node(0)}, replyTo("c")).Sends,
		"long id":      tb.onCreate(&messages.CreateObject{ObjectId: "123456789", Creator: node(0)}, replyTo("c")).Sends,
		"no creator":   tb.onCreate(&messages.CreateObject{ObjectId: "a", Size: 1}, replyTo("c")).Sends,
		"neg size":     tb.onCreate(&messages.CreateObject{ObjectId: "a", Size: -1, Creator: node(0)}, replyTo("c")).Sends,
		"inline size":  tb.onCreate(&messages.CreateObject{ObjectId: "a", Size: 5, Creator: node(0), HasInline: true, InlineData: []byte("x")}, replyTo("c")).Sends,
		"no receiver":  tb.onLocate(&messages.Locate{ObjectId: "a"}, replyTo("c"), t0).Sends,
		"locate empty": tb.onLocate(&messages.Locate{ObjectId: "", Receiver: node(1)}, replyTo("c"), t0).Sends,
	}
	for name, out := range cases {
		if len(out) != 1 {
			t.Fatalf("%s: %v", name, out)
		}
		var err *messages.Error
		switch m := out[0].Msg.(type) {
		case *messages.CreateObjectReply:
			err = m.GetError()
		case *messages.LocateReply:
			err = m.GetError()
		}
		if !errors.Is(err, messages.ErrInvalidArgument) {
			t.Fatalf("%s: want INVALID_ARGUMENT, got %v", name, err)
		}
	}
	if tb.Len() != 0 {
		t.Fatalf("bad input left %d entries", tb.Len())
	}
}

func TestDeleteDropsCopiesFailsWaitersAndTombstones(t *testing.T) {
	tb := NewLocationTable(TableConfig{TombstoneLimit: 2})
	create(t, tb, "x", 100, 0)
	locate(tb, "x", 1, t0)
	sub := replyTo("sub")
	tb.onSubscribe(&messages.Subscribe{ObjectId: "x"}, "sub", sub)
	// A query waiting on another id is untouched.
	tb.onQuery(&messages.QueryObject{ObjectId: "y", Wait: true, TimeoutMs: 50}, replyTo("qy"), t0)
	out := tb.onDelete(&messages.DeleteObject{ObjectId: "x"}, replyTo("d")).Sends
	drops := 0
	for _, s := range out {
		if _, ok := s.Msg.(*messages.DropObject); ok {
			drops++
		}
	}
	if drops != 2 {
		t.Fatalf("want drops to n0 and n1, got %v", out)
	}
	if u := outbox.SendsTo(out, sub); len(u) != 1 || !u[0].Msg.(*messages.LocationUpdate).GetDeleted() {
		t.Fatalf("subscriber not told: %v", out)
	}
	if r := locateReply(t, locate(tb, "x", 2, t0), replyTo("r2")); !errors.Is(r.GetError(), messages.ErrDeleted) {
		t.Fatalf("get after delete: %v", r)
	}
	out = tb.onCreate(&messages.CreateObject{ObjectId: "x", Size: 1, Creator: node(0)}, replyTo("c")).Sends
	if r := out[0].Msg.(*messages.CreateObjectReply); !errors.Is(r.GetError(), messages.ErrDeleted) {
		t.Fatalf("put after delete: %v", r)
	}
	// A late completion of a copy of a deleted object frees that copy.
	out = tb.onFetchDone(fetchDone(tb, "x", node(1), node(0))).Sends
	if len(out) != 1 || out[0].To != node(1) && out[0].To.(*messages.NodeRef).GetNodeId() != "n1" {
		t.Fatalf("late FetchDone: %v", out)
	}
	if _, ok := out[0].Msg.(*messages.DropObject); !ok {
		t.Fatalf("late FetchDone answered %T", out[0].Msg)
	}
	// Delete of something never created.
	out = tb.onDelete(&messages.DeleteObject{ObjectId: "nope"}, replyTo("d")).Sends
	if r := out[0].Msg.(*messages.DeleteObjectReply); !errors.Is(r.GetError(), messages.ErrNotFound) {
		t.Fatalf("delete unknown: %v", r)
	}
	// Tombstones are bounded: the oldest is forgotten.
	for _, id := range []string{"a", "b"} {
		create(t, tb, id, 1, 0)
		tb.onDelete(&messages.DeleteObject{ObjectId: id}, nil)
	}
	if len(tb.tombstones) != 2 {
		t.Fatalf("tombstones %d, want 2", len(tb.tombstones))
	}
	if _, ok := tb.tombstones["x"]; ok {
		t.Fatalf("oldest tombstone kept")
	}
}

func TestTickTimesOutWaitersAndForgetsUnknownIDs(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	tb.onLocate(&messages.Locate{ObjectId: "ghost", Receiver: node(1), TimeoutMs: 100}, replyTo("r1"), t0)
	tb.onQuery(&messages.QueryObject{ObjectId: "ghost2", Wait: true, TimeoutMs: 300}, replyTo("q"), t0)
	if out := tb.onTick(t0.Add(50 * time.Millisecond)).Sends; len(out) != 0 {
		t.Fatalf("early tick answered %v", out)
	}
	out := tb.onTick(t0.Add(150 * time.Millisecond)).Sends
	if r := locateReply(t, out, replyTo("r1")); !errors.Is(r.GetError(), messages.ErrTimeout) {
		t.Fatalf("want TIMEOUT: %v", r)
	}
	if tb.Len() != 1 {
		t.Fatalf("want only ghost2 left, have %d entries", tb.Len())
	}
	out = tb.onTick(t0.Add(400 * time.Millisecond)).Sends
	if len(out) != 1 || !errors.Is(out[0].Msg.(*messages.ObjectInfo).GetError(), messages.ErrTimeout) {
		t.Fatalf("query timeout: %v", out)
	}
	if tb.Len() != 0 {
		t.Fatalf("entries left: %d", tb.Len())
	}
}

func TestCancelLocateForgetsWaiter(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	locate(tb, "ghost", 1, t0)
	tb.onCancelLocate(&messages.CancelLocate{ObjectId: "ghost", Receiver: node(1)})
	if tb.Len() != 0 {
		t.Fatalf("entry kept after cancel")
	}
}

// endpointRef is a reply address with an actor PID's getters.
type endpointRef struct{ addr, id string }

func (e endpointRef) GetAddress() string { return e.addr }
func (e endpointRef) GetId() string      { return e.id }

// AbandonLocate withdraws only the parked Locate whose reply was to go to
// that address (matched by address and id, not by identity): another
// reply address leaves it parked, and it is answered when the object
// comes.
func TestAbandonLocateWithdrawsExactlyThatRequest(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	call := endpointRef{"m1", "future$7"}
	tb.onLocate(&messages.Locate{ObjectId: "x", Receiver: node(1), TimeoutMs: 1000}, call, t0)
	tb.onAbandonLocate("x", endpointRef{"m1", "future$8"})
	tb.onAbandonLocate("y", call)
	out := tb.onCreate(&messages.CreateObject{ObjectId: "x", Size: 100, Fingerprint: 42, Creator: node(0)}, replyTo("c")).Sends
	if lr := locateReply(t, out, call); lr.GetSender().GetNodeId() != "n0" {
		t.Fatalf("the parked Locate was answered with %v", lr)
	}

	tb.onLocate(&messages.Locate{ObjectId: "z", Receiver: node(2), TimeoutMs: 1000}, call, t0)
	tb.onAbandonLocate("z", endpointRef{"m1", "future$7"}) // an equal address, another value
	if tb.Len() != 1 {
		t.Fatalf("entries after the abandon: %d, want only x", tb.Len())
	}
	out = tb.onCreate(&messages.CreateObject{ObjectId: "z", Size: 100, Fingerprint: 42, Creator: node(0)}, replyTo("c")).Sends
	if r := outbox.SendsTo(out, call); len(r) != 0 {
		t.Fatalf("an abandoned Locate was answered: %v", r)
	}
}

func TestSubscribeGetsCurrentAndFutureLocations(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	create(t, tb, "x", 100, 0)
	out := tb.onSubscribe(&messages.Subscribe{ObjectId: "x"}, "s", replyTo("s")).Sends
	if len(out) != 1 || out[0].Msg.(*messages.LocationUpdate).GetNode().GetNodeId() != "n0" {
		t.Fatalf("current locations: %v", out)
	}
	out = locate(tb, "x", 1, t0)
	var got []string
	for _, s := range outbox.SendsTo(out, replyTo("s")) {
		u := s.Msg.(*messages.LocationUpdate)
		got = append(got, u.GetNode().GetNodeId()+":"+u.GetState().String())
	}
	if fmt.Sprint(got) != "[n1:PARTIAL]" {
		t.Fatalf("future locations: %v", got)
	}
	tb.onUnsubscribe(&messages.Unsubscribe{ObjectId: "x"}, "s")
	if out := tb.onFetchDone(fetchDone(tb, "x", node(1), node(0))).Sends; len(outbox.SendsTo(out, replyTo("s"))) != 0 {
		t.Fatalf("pushed after unsubscribe: %v", out)
	}
}

func TestUnpublishedSenderIsReplaced(t *testing.T) {
	// Eviction race: the shard handed out n1, which evicted its copy. The
	// receiver reports it failed and gets another sender.
	tb := NewLocationTable(TableConfig{})
	create(t, tb, "x", 100, 0)
	tb.onPublish(&messages.PublishLocation{ObjectId: "x", Node: node(0), State: messages.LocationState_COMPLETE, Size: 100})
	locate(tb, "x", 1, t0)
	tb.onFetchDone(fetchDone(tb, "x", node(1), node(0)))
	locate(tb, "x", 2, t0) // gets n0 (complete, oldest)
	lr := locateReply(t, locate(tb, "x", 3, t0), replyTo("r3"))
	if lr.GetSender().GetNodeId() != "n1" {
		t.Fatalf("r3 from %s", lr.GetSender().GetNodeId())
	}
	tb.onUnpublish(&messages.UnpublishLocation{ObjectId: "x", Node: node(1)})
	out := tb.onLocate(&messages.Locate{ObjectId: "x", Receiver: node(3), TimeoutMs: 100, FailedSender: node(1)}, replyTo("r3"), t0).Sends
	// n0 is busy with n2; n2 is a free partial copy upstream of nobody.
	if s := locateReply(t, out, replyTo("r3")).GetSender().GetNodeId(); s != "n2" {
		t.Fatalf("r3 resumed from %s, want n2", s)
	}
	if info := queryInfo(t, tb, "x"); len(info.GetLocations()) != 3 {
		t.Fatalf("evicted copy still listed: %v", info.GetLocations())
	}
}

// creatorOnly is a sender policy that sends every receiver to the
// creator's copy.
func creatorOnly(_ string, copies []Copy) (string, bool) {
	for _, c := range copies {
		if c.Creator {
			return c.Node, true
		}
	}
	return "", false
}

// TestSenderPolicyChoosesEverySender: under a policy every receiver
// fetches from the copy it names, however busy; the copies so fetched
// are offered to nobody (not even a no-copy reader), and a receiver that
// must avoid the policy's only choice waits.
func TestSenderPolicyChoosesEverySender(t *testing.T) {
	tb := NewLocationTable(TableConfig{Senders: creatorOnly, FanOut: 2})
	create(t, tb, "x", 100, 0)
	for r := 1; r <= 5; r++ {
		if s := locateReply(t, locate(tb, "x", r, t0), replyTo(fmt.Sprintf("r%d", r))).GetSender().GetNodeId(); s != "n0" {
			t.Fatalf("receiver %d from %s, want the creator n0", r, s)
		}
	}
	for r := 1; r <= 2; r++ {
		tb.onFetchDone(&messages.FetchDone{ObjectId: "x", Receiver: node(r), Sender: node(0), Size: 100})
	}
	if s := locateReply(t, locateNoCopy(tb, "x", 9, "i9", t0), replyTo("i9")).GetSender().GetNodeId(); s != "n0" {
		t.Fatalf("no-copy reader from %s, want n0 (the chosen copies are offered to nobody)", s)
	}
	out := tb.onLocate(&messages.Locate{ObjectId: "x", Receiver: node(6), TimeoutMs: 1000, FailedSender: node(0)}, replyTo("r6"), t0).Sends
	if r := outbox.SendsTo(out, replyTo("r6")); len(r) != 0 {
		t.Fatalf("receiver avoiding the creator answered %v; want it to wait", r)
	}
}

func TestWaitingReceiverThatBecomesCreatorIsItsOwnSender(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	locate(tb, "x", 1, t0) // n1's Get parks
	out := tb.onCreate(&messages.CreateObject{ObjectId: "x", Size: 1 << 20, Creator: node(1)}, replyTo("c")).Sends
	if s := locateReply(t, out, replyTo("r1")).GetSender().GetNodeId(); s != "n1" {
		t.Fatalf("n1's parked Locate got %s, want itself", s)
	}
	// A partial receiver that locates again is not its own sender.
	locate(tb, "x", 2, t0)
	out = tb.onLocate(&messages.Locate{ObjectId: "x", Receiver: node(2), TimeoutMs: 100, FailedSender: node(3)}, replyTo("r2"), t0).Sends
	if s := locateReply(t, out, replyTo("r2")).GetSender().GetNodeId(); s != "n1" {
		t.Fatalf("re-locating n2 got %s, want n1", s)
	}
}

func TestCreateAfterOwnRepublicationIsNotADuplicate(t *testing.T) {
	// A shard that just started asked for republication; the creator's
	// copy, still being written, arrives before the creator's CreateObject.
	tb := NewLocationTable(TableConfig{})
	tb.onPublish(&messages.PublishLocation{ObjectId: "x", Node: node(0), State: messages.LocationState_PARTIAL, Size: 10, Fingerprint: 42, Creator: true})
	out := tb.onCreate(&messages.CreateObject{ObjectId: "x", Size: 10, Fingerprint: 42, Creator: node(0)}, replyTo("c")).Sends
	if r := out[0].Msg.(*messages.CreateObjectReply); r.GetError() != nil || r.GetExisted() {
		t.Fatalf("the creator's own Put was answered %v: it would drop its only copy", r)
	}
	// Another node's Put of the same bytes is still idempotent.
	out = tb.onCreate(&messages.CreateObject{ObjectId: "x", Size: 10, Fingerprint: 42, Creator: node(1)}, replyTo("c")).Sends
	if r := out[0].Msg.(*messages.CreateObjectReply); !r.GetExisted() {
		t.Fatalf("a second creator: %v", r)
	}
}

func TestSecondLocateOfAReceiverReplacesItsParkedOne(t *testing.T) {
	// n1's Get parks before the object exists; n1 restarts and its resumed
	// fetch parks again. On creation n1 must claim exactly one sender.
	tb := NewLocationTable(TableConfig{})
	if first := tb.onLocate(&messages.Locate{ObjectId: "x", Receiver: node(1), TimeoutMs: 1000}, replyTo("old"), t0).Sends; len(first) != 0 {
		t.Fatalf("parked Locate answered: %v", first)
	}
	out := tb.onLocate(&messages.Locate{ObjectId: "x", Receiver: node(1), TimeoutMs: 1000}, replyTo("new"), t0).Sends
	if r := locateReply(t, out, replyTo("old")); !errors.Is(r.GetError(), messages.ErrUnavailable) {
		t.Fatalf("the replaced Locate got %v", r)
	}
	out = tb.onCreate(&messages.CreateObject{ObjectId: "x", Size: 100, Creator: node(0)}, replyTo("c")).Sends
	if s := locateReply(t, out, replyTo("new")).GetSender().GetNodeId(); s != "n0" {
		t.Fatalf("n1 got %s", s)
	}
	if len(outbox.SendsTo(out, replyTo("old"))) != 0 {
		t.Fatal("the replaced Locate claimed a sender too")
	}
	// n0 is busy with n1 alone; the next receiver gets n1's partial copy,
	// and when n1 finishes n0 is free again.
	if s := locateReply(t, locate(tb, "x", 2, t0), replyTo("r2")).GetSender().GetNodeId(); s != "n1" {
		t.Fatalf("n2 got %s, want n1", s)
	}
	tb.onFetchDone(fetchDone(tb, "x", node(1), node(0)))
	for _, l := range queryInfo(t, tb, "x").GetLocations() {
		if l.GetNode().GetNodeId() == "n0" && l.GetServing() {
			t.Fatal("n0 still marked serving after its only receiver finished")
		}
	}
}

// fetchDone is the FetchDone a receiver sends: it carries the object's
// size and fingerprint as the receiver learnt them from the shard.
func fetchDone(tb *LocationTable, id string, receiver, sender *messages.NodeRef) *messages.FetchDone {
	m := &messages.FetchDone{ObjectId: id, Receiver: receiver, Sender: sender}
	if e := tb.entries[id]; e != nil {
		m.Size, m.Fingerprint = e.size, e.fingerprint
	}
	return m
}

// A shard rebuilt while a fetch ran learns the object from the fetch's
// FetchDone when no republication reached it first, and tells its
// subscribers the real size (a reduce coordinator subscribed to the
// rebuilt shard took a size-0 update for an inline source and failed the
// Reduce with INTERNAL; chaos seed 122).
func TestFetchDoneTeachesARebuiltShardTheObject(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	tb.onSubscribe(&messages.Subscribe{ObjectId: "x"}, "coord", replyTo("coord"))
	out := tb.onFetchDone(&messages.FetchDone{ObjectId: "x", Receiver: node(1), Sender: node(0), Size: 1 << 20, Fingerprint: 7}).Sends
	var got *messages.LocationUpdate
	for _, s := range out {
		if u, ok := s.Msg.(*messages.LocationUpdate); ok && s.To == replyTo("coord") {
			got = u
		}
	}
	if got == nil || got.GetSize() != 1<<20 || got.GetState() != messages.LocationState_COMPLETE || got.GetNode().GetNodeId() != "n1" {
		t.Fatalf("subscriber got %v, want n1 COMPLETE with size 1 MiB", got)
	}
	// A later republication of a different size is refused.
	out = tb.onFetchDone(&messages.FetchDone{ObjectId: "x", Receiver: node(2), Sender: node(1), Size: 5}).Sends
	if len(out) != 1 {
		t.Fatalf("size mismatch: %v, want one DropObject to n2", out)
	}
	if to, ok := out[0].To.(*messages.NodeRef); !ok || to.GetNodeId() != "n2" {
		t.Fatalf("size mismatch: %v, want a DropObject to n2", out)
	}
	if _, ok := out[0].Msg.(*messages.DropObject); !ok {
		t.Fatalf("size mismatch answered with %T", out[0].Msg)
	}
}

// A shard that started over cannot tell an id it never heard of from one
// whose copies died with its old host: Delete succeeds there and
// tombstones the id, so a copy republished later is dropped, not revived.
func TestAmnesicTableDeletesUnknownIDs(t *testing.T) {
	tb := NewLocationTable(TableConfig{Amnesic: true})
	tb.onRepublished()
	out := tb.onDelete(&messages.DeleteObject{ObjectId: "was-there"}, replyTo("d")).Sends
	if len(out) != 1 {
		t.Fatalf("delete of an unknown id on a rebuilt shard: %v", out)
	}
	if r := out[0].Msg.(*messages.DeleteObjectReply); r.GetError() != nil {
		t.Fatalf("delete of an unknown id on a rebuilt shard: %v", r.GetError())
	}
	if r := locateReply(t, locate(tb, "was-there", 1, t0), replyTo("r1")); !errors.Is(r.GetError(), messages.ErrDeleted) {
		t.Fatalf("get after the delete: %v", r)
	}
	out = tb.onCreate(&messages.CreateObject{ObjectId: "was-there", Size: 1, Creator: node(0)}, replyTo("c")).Sends
	if r := out[0].Msg.(*messages.CreateObjectReply); !errors.Is(r.GetError(), messages.ErrDeleted) {
		t.Fatalf("a copy coming back after the delete: %v", r)
	}
}

// The creator's store node matches replies to its Puts by request id,
// whatever the reply says.
func TestCreateEchoesRequestID(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	for i, req := range []*messages.CreateObject{
		{ObjectId: "e", Size: 10, Creator: node(0), RequestId: 7},  // created
		{ObjectId: "e", Size: 10, Creator: node(1), RequestId: 8},  // existed
		{ObjectId: "e", Size: 11, Creator: node(1), RequestId: 9},  // conflict
		{ObjectId: "f", Size: -1, Creator: node(1), RequestId: 10}, // invalid
	} {
		out := tb.onCreate(req, replyTo("c")).Sends
		r, ok := out[0].Msg.(*messages.CreateObjectReply)
		if !ok || r.GetRequestId() != req.GetRequestId() {
			t.Fatalf("create %d: reply %v, want request id %d", i, out[0].Msg, req.GetRequestId())
		}
	}
}

func TestDeleteEchoesRequestID(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	create(t, tb, "d", 10, 0)
	for i, id := range []string{"d", "d", "nothing"} { // deleted, twice, not found
		out := tb.onDelete(&messages.DeleteObject{ObjectId: id, RequestId: uint64(20 + i)}, replyTo("c")).Sends
		r, ok := out[len(out)-1].Msg.(*messages.DeleteObjectReply)
		if !ok || r.GetRequestId() != uint64(20+i) {
			t.Fatalf("delete %d: reply %v, want request id %d", i, out[len(out)-1].Msg, 20+i)
		}
	}
}

func locateNoCopy(tb *LocationTable, id string, receiver int, to string, now time.Time) []outbox.Send {
	return tb.onLocate(&messages.Locate{ObjectId: id, Receiver: node(receiver), TimeoutMs: 1000, NoCopy: true}, replyTo(to), now).Sends
}

// TestNoCopyLocateLeavesNoTrace: a receiver that keeps no copy
// (GetInto) is answered with a copy to read, but the directory records
// nothing of it: no location (nobody is offered it, subscribers hear
// nothing, an inline answer records no copy), no claim on its sender
// (the next ordinary receiver still gets the free creator), no transfer.
func TestNoCopyLocateLeavesNoTrace(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	create(t, tb, "x", 1<<20, 0)
	tb.onPublish(&messages.PublishLocation{ObjectId: "x", Node: node(0), State: messages.LocationState_COMPLETE, Size: 1 << 20, Creator: true})
	tb.onSubscribe(&messages.Subscribe{ObjectId: "x"}, "s", replyTo("s"))
	out := locateNoCopy(tb, "x", 1, "i1", t0)
	if s := locateReply(t, out, replyTo("i1")).GetSender().GetNodeId(); s != "n0" {
		t.Fatalf("no-copy receiver got %s, want n0", s)
	}
	if len(outbox.SendsTo(out, replyTo("s"))) != 0 {
		t.Fatalf("a subscriber heard of the no-copy receiver: %v", out)
	}
	if s := locateReply(t, locate(tb, "x", 2, t0), replyTo("r2")).GetSender().GetNodeId(); s != "n0" {
		t.Fatalf("the next receiver got %s, want the creator (not claimed by the no-copy read)", s)
	}
	info := queryInfo(t, tb, "x")
	if len(info.GetLocations()) != 2 || len(info.GetTransfers()) != 1 {
		t.Fatalf("locations %v transfers %v: want n0 and n2, one transfer", info.GetLocations(), info.GetTransfers())
	}

	small := []byte("inline")
	tb.onCreate(&messages.CreateObject{ObjectId: "s", Size: int64(len(small)), HasInline: true, InlineData: small, Creator: node(0)}, replyTo("c"))
	if r := locateReply(t, locateNoCopy(tb, "s", 3, "i3", t0), replyTo("i3")); string(r.GetInlineData()) != "inline" {
		t.Fatalf("inline no-copy answer %v", r)
	}
	if locs := queryInfo(t, tb, "s").GetLocations(); len(locs) != 1 {
		t.Fatalf("an inline no-copy answer recorded a copy: %v", locs)
	}
}

// TestNoCopyLocatePrefersAFreeCopyAndTakesABusyOne: a no-copy reader
// prefers a copy that serves nobody, but reads a busy one rather than
// wait for the tree; never its own node's copy in progress.
func TestNoCopyLocatePrefersAFreeCopyAndTakesABusyOne(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	create(t, tb, "x", 100, 0)
	tb.onPublish(&messages.PublishLocation{ObjectId: "x", Node: node(0), State: messages.LocationState_COMPLETE, Size: 100, Creator: true})
	locate(tb, "x", 1, t0) // n1 fetches from n0: n0 busy, n1 partial and free
	if s := locateReply(t, locateNoCopy(tb, "x", 2, "i2", t0), replyTo("i2")).GetSender().GetNodeId(); s != "n1" {
		t.Fatalf("got %s, want the free partial n1", s)
	}
	// n1's own no-copy read skips its own partial copy and reads the busy creator.
	if s := locateReply(t, locateNoCopy(tb, "x", 1, "i1", t0), replyTo("i1")).GetSender().GetNodeId(); s != "n0" {
		t.Fatalf("n1 got %s, want n0", s)
	}
	// A node whose own copy is whole reads that one.
	tb.onFetchDone(fetchDone(tb, "x", node(1), node(0)))
	if s := locateReply(t, locateNoCopy(tb, "x", 1, "i1b", t0), replyTo("i1b")).GetSender().GetNodeId(); s != "n1" {
		t.Fatalf("n1 with a whole copy got %s, want itself", s)
	}
}

// TestNoCopyLocatesParkApartFromTheReceiversOwn: before the object
// exists, a node's Get (an ordinary Locate) and two GetIntos (no-copy)
// all park; none replaces another, a CancelLocate of the Get withdraws
// only the Get's, and on creation both no-copy readers are answered.
// Deadlines still time them out, and a Delete fails them.
func TestNoCopyLocatesParkApartFromTheReceiversOwn(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	if out := locate(tb, "x", 1, t0); len(out) != 0 {
		t.Fatalf("parked Locate answered: %v", out)
	}
	for _, to := range []string{"i1", "i2"} {
		if out := locateNoCopy(tb, "x", 1, to, t0); len(out) != 0 {
			t.Fatalf("parking %s answered %v", to, out)
		}
	}
	tb.onCancelLocate(&messages.CancelLocate{ObjectId: "x", Receiver: node(1)})
	out := tb.onCreate(&messages.CreateObject{ObjectId: "x", Size: 100, Creator: node(0)}, replyTo("c")).Sends
	if len(outbox.SendsTo(out, replyTo("r1"))) != 0 {
		t.Fatal("the cancelled Locate was answered")
	}
	for _, to := range []string{"i1", "i2"} {
		if r := locateReply(t, out, replyTo(to)); r.GetError() != nil || r.GetSender().GetNodeId() != "n0" {
			t.Fatalf("%s: %v", to, r)
		}
	}

	locateNoCopy(tb, "y", 1, "iy", t0)
	if r := locateReply(t, tb.onTick(t0.Add(2*time.Second)).Sends, replyTo("iy")); !errors.Is(r.GetError(), messages.ErrTimeout) {
		t.Fatalf("parked no-copy Locate at its deadline: %v", r)
	}
	create(t, tb, "z", 100, 0)
	tb.onDelete(&messages.DeleteObject{ObjectId: "z"}, replyTo("d"))
	if r := locateReply(t, locateNoCopy(tb, "z", 1, "iz", t0), replyTo("iz")); !errors.Is(r.GetError(), messages.ErrDeleted) {
		t.Fatalf("no-copy Locate of a deleted object: %v", r)
	}
}

// updateStates lists the LocationUpdates out sends to the subscriber to,
// as node:state.
func updateStates(out []outbox.Send, to any) []string {
	var got []string
	for _, s := range outbox.SendsTo(out, to) {
		if u, ok := s.Msg.(*messages.LocationUpdate); ok {
			got = append(got, u.GetNode().GetNodeId()+":"+u.GetState().String())
		}
	}
	return got
}

// A receiver that locates again and gets no sender is no location until
// one is claimed for it: its partial copy cannot grow meanwhile. A Reduce
// coordinator that placed it, or would, must hear that it is gone (chaos
// seed 93: a Reduce waited on such a copy until the receiver gave up, and
// failed although another source was whole), and no receiver is handed
// it. A receiver served at once stays one, unannounced. The table still
// knows the copy: its node's failure shows that the object is lost.
func TestUnfedReceiverIsNoLocationUntilServed(t *testing.T) {
	tb := NewLocationTable(TableConfig{})
	create(t, tb, "x", 1<<20, 0)
	tb.onSubscribe(&messages.Subscribe{ObjectId: "x"}, "s", replyTo("s"))
	locate(tb, "x", 1, t0) // n1 <- n0
	locate(tb, "x", 2, t0) // n2 <- n1
	locate(tb, "x", 3, t0) // n3 <- n2
	// n0 fails, and n1 says so before the shard hears of it. Every other
	// copy is downstream of n1: it gets no sender.
	out := tb.onLocate(&messages.Locate{ObjectId: "x", Receiver: node(1), TimeoutMs: 1000, FailedSender: node(0)}, replyTo("r1"), t0).Sends
	if len(outbox.SendsTo(out, replyTo("r1"))) != 0 {
		t.Fatalf("n1 was given a sender: %v", out)
	}
	if got := fmt.Sprint(updateStates(out, replyTo("s"))); got != "[n0:LOCATION_STATE_UNSPECIFIED n1:LOCATION_STATE_UNSPECIFIED]" {
		t.Fatalf("subscriber told %v, want n0 and n1 gone", got)
	}
	if got := updateStates(tb.onSubscribe(&messages.Subscribe{ObjectId: "x"}, "s2", replyTo("s2")).Sends, replyTo("s2")); slices.Contains(got, "n1:PARTIAL") {
		t.Fatalf("a new subscriber is offered n1: %v", got)
	}
	// n2's stream from n1 ends where n1's copy did, and n2 locates again.
	// The older waiter n1 is handed neither n2, unfed now, nor n3, which
	// only n2 feeds: both would stall it where they end.
	out = tb.onLocate(&messages.Locate{ObjectId: "x", Receiver: node(2), TimeoutMs: 1000, FailedSender: node(1)}, replyTo("r2"), t0).Sends
	if r := outbox.SendsTo(out, replyTo("r1")); len(r) != 0 {
		t.Fatalf("n1 was handed an unfed copy: %v", r)
	}
	if got := updateStates(out, replyTo("s")); !slices.Contains(got, "n2:LOCATION_STATE_UNSPECIFIED") {
		t.Fatalf("subscriber told %v, want n2 gone", got)
	}
	// n0 only stalled: its copy comes back, and n1 is fed (and announced)
	// again.
	out = tb.onPublish(&messages.PublishLocation{ObjectId: "x", Node: node(0), State: messages.LocationState_COMPLETE, Size: 1 << 20, Fingerprint: 42, Creator: true}).Sends
	if s := locateReply(t, out, replyTo("r1")).GetSender().GetNodeId(); s != "n0" {
		t.Fatalf("n1 resumed from %s, want n0", s)
	}
	if got := updateStates(out, replyTo("s")); !slices.Contains(got, "n1:PARTIAL") {
		t.Fatalf("subscriber not told n1 is a location again: %v", got)
	}

	// n2 <- n1 <- n0, and n1 fails: n2 resumes from n0 (which n1's
	// failure freed) in the same step, and stays a location throughout.
	tb = NewLocationTable(TableConfig{})
	create(t, tb, "y", 1<<20, 0)
	locate(tb, "y", 1, t0) // n1 <- n0
	locate(tb, "y", 2, t0) // n2 <- n1
	tb.onSubscribe(&messages.Subscribe{ObjectId: "y"}, "s", replyTo("s"))
	out = tb.onLocate(&messages.Locate{ObjectId: "y", Receiver: node(2), TimeoutMs: 1000, FailedSender: node(1)}, replyTo("r2"), t0).Sends
	if s := locateReply(t, out, replyTo("r2")).GetSender().GetNodeId(); s != "n0" {
		t.Fatalf("n2 resumed from %s, want n0 (freed by n1's failure)", s)
	}
	if got := updateStates(out, replyTo("s")); slices.Contains(got, "n2:LOCATION_STATE_UNSPECIFIED") {
		t.Fatalf("n2, served at once, was announced gone: %v", got)
	}

	// n1 <- n0; n0 dies and n1 says so first; then both failures reach
	// the shard: the last copy, unfed, went with n1, and z is lost.
	tb = NewLocationTable(TableConfig{})
	create(t, tb, "z", 1<<20, 0)
	locate(tb, "z", 1, t0)
	tb.onLocate(&messages.Locate{ObjectId: "z", Receiver: node(1), TimeoutMs: 1000, FailedSender: node(0)}, replyTo("r1"), t0)
	tb.onNodeFailed("n0")
	tb.onNodeFailed("n1")
	if lr := locateReply(t, locate(tb, "z", 9, t0), replyTo("r9")); !errors.Is(lr.GetError(), messages.ErrLost) {
		t.Fatalf("a Get of z after its last copy died: %v, want LOST", lr)
	}
}

// TestCreateOverOnlyUnfedPartialCopiesRegistersTheCreator: a rebuilt
// shard learns a Put's copy from its republication, a receiver claims it,
// the Put fails (its CreateObject went to the shard's dead host) and
// drops the copy, and the receiver names it a failed sender. The retried
// Put of the same bytes finds only the receiver's partial copy, which
// nothing can finish: it must become the creator (and feed the receiver),
// not be told the object exists and drop its copy (chaos seed 91128467:
// no Get found a location again).
func TestCreateOverOnlyUnfedPartialCopiesRegistersTheCreator(t *testing.T) {
	tb := NewLocationTable(TableConfig{Amnesic: true})
	tb.onPublish(&messages.PublishLocation{ObjectId: "x", Node: node(1), State: messages.LocationState_PARTIAL, Size: 1 << 20, Fingerprint: 42, Creator: true})
	if s := locateReply(t, locate(tb, "x", 4, t0), replyTo("r4")).GetSender().GetNodeId(); s != "n1" {
		t.Fatalf("n4's sender %s, want n1", s)
	}
	out := tb.onLocate(&messages.Locate{ObjectId: "x", Receiver: node(4), TimeoutMs: 1000, FailedSender: node(1)}, replyTo("r4"), t0).Sends
	if len(outbox.SendsTo(out, replyTo("r4"))) != 0 {
		t.Fatalf("n4 was given a sender with no source left: %v", out)
	}
	out = tb.onCreate(&messages.CreateObject{ObjectId: "x", Size: 1 << 20, Fingerprint: 42, Creator: node(1)}, replyTo("c")).Sends
	if r := outbox.SendsTo(out, replyTo("c")); len(r) != 1 || r[0].Msg.(*messages.CreateObjectReply).GetError() != nil || r[0].Msg.(*messages.CreateObjectReply).GetExisted() {
		t.Fatalf("the retried Put was answered %v: told the object exists, it drops the only source", r)
	}
	if s := locateReply(t, out, replyTo("r4")).GetSender().GetNodeId(); s != "n1" {
		t.Fatalf("n4 resumed from %s, want the creator n1", s)
	}
	complete(tb, "x", 1, 1<<20, true)
	if r := locateReply(t, locate(tb, "x", 6, t0), replyTo("r6")); r.GetError() != nil || r.GetSender() == nil {
		t.Fatalf("a later Get was answered %v, want a sender", r)
	}

	// Other bytes under the id still conflict: a copy that only stalled
	// may be republished whole.
	out = tb.onCreate(&messages.CreateObject{ObjectId: "x", Size: 1 << 20, Fingerprint: 43, Creator: node(2)}, replyTo("c2")).Sends
	if r := out[0].Msg.(*messages.CreateObjectReply); !errors.Is(r.GetError(), messages.ErrConflict) {
		t.Fatalf("other bytes: %v", r)
	}
}
