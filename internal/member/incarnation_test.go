package member

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	promtest "github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/internal/actors/shardactor"
	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/testutil"
	"github.com/hoplite-go/hoplite/messages"
)

// A member that stopped and the member that took its actor system and
// data plane addresses since are two incarnations. What a peer kept of
// the first (its store's NodeRef, a shard table's entry, its members
// actor, its data address) reaches the second's process, which must not
// take it for its own: actor messages go to the dead letters there (a
// request answers UNAVAILABLE), and data-plane requests are refused as
// meant for another incarnation. The second's state shows nothing of
// them.
func TestMessagesForAStoppedIncarnationAreNotHandledByTheNext(t *testing.T) {
	log := testLogger(t, logrus.InfoLevel)
	slots, seeds := memberSlots(t, 2)
	dataBind := fmt.Sprintf("127.0.0.1:%d", freePorts(t, 1)[0])
	// 64 shards: the second incarnation surely hosts one the first did.
	mod := func(c *MemberConfig) { c.Shards = 64 }
	sameData := func(c *MemberConfig) { mod(c); c.DataBind = dataBind }
	a, err := joinSlot(t, slots[0], seeds, log, mod)
	if err != nil {
		t.Fatal(err)
	}
	b1, err := joinSlot(t, slots[1], seeds, log, sameData)
	if err != nil {
		t.Fatal(err)
	}
	waitMembers(t, 2, a, b1)

	// What a keeps of b's first incarnation.
	old := b1.Node()
	oldMembers := freshPID(b1.membersPID.Load())
	oldShards := map[int]bool{}
	for j, pid := range *a.table.Load() {
		if pid.GetAddress() == b1.Address() {
			oldShards[j] = true
		}
	}
	oldTable := *a.table.Load()
	b1.Stop()
	eventually(t, 20*time.Second, "a sees b's first incarnation leave", func() bool { return len(a.Members()) == 1 })

	b2, err := joinSlot(t, slots[1], seeds, log, sameData)
	if err != nil {
		t.Fatal(err)
	}
	waitMembers(t, 2, a, b2)
	if b2.Address() != old.GetAddress() || !strings.HasPrefix(b2.DataAddress(), dataBind) || b2.ID() == old.GetNodeId() {
		t.Fatalf("b's second incarnation %s at %s (data %s); the first was %s at %s (data %s)",
			b2.ID(), b2.Address(), b2.DataAddress(), old.GetNodeId(), old.GetAddress(), old.GetDataAddress())
	}
	ctx := deadline(t, 20*time.Second)

	// The first incarnation's store node: a Put is not stored by the next.
	err = a.ClientOf(old).Put(ctx, "for-the-first", []byte("meant for b's first incarnation"))
	if !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("a Put to the stopped incarnation's store node = %v, want UNAVAILABLE", err)
	}
	if b2.store.Lookup("for-the-first") != nil {
		t.Fatal("the next incarnation stored an object Put to the stopped one's store node")
	}

	// Its members actor: a leave it is told of is not recorded by the
	// next (which would take a out of its placement).
	if _, err := actorutil.Request(ctx, a.system.Root, oldMembers, &messages.MemberLeaving{MemberId: a.ID()}); !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("a leave told to the stopped incarnation's members actor = %v, want UNAVAILABLE", err)
	}
	if live := *b2.live.Load(); len(live) != 2 {
		t.Fatalf("the next incarnation's placement is %v after a leave told to the stopped one", live)
	}

	// A directory shard of the first that the next hosts too, by the PID
	// a's table held.
	asked := false
	for j, pid := range *a.table.Load() {
		if !oldShards[j] || pid.GetAddress() != b2.Address() {
			continue
		}
		asked = true
		_, err := actorutil.Request(ctx, a.system.Root, freshPID(oldTable[j]), &messages.ListObjects{Shard: int32(j), Limit: 10})
		if !errors.Is(err, messages.ErrUnavailable) {
			t.Fatalf("a listing of shard %d by the stopped incarnation's PID = %v, want UNAVAILABLE", j, err)
		}
		break
	}
	if !asked {
		t.Fatalf("no shard hosted by both incarnations among %d (first: %v)", len(oldTable), oldShards)
	}

	// The data plane: an object the next incarnation holds, whose shard
	// it hosts, is neither streamed nor located for a request to the
	// first's data address.
	var id string
	for k := 0; ; k++ {
		if id = fmt.Sprintf("held-%d", k); b2.ShardOwner(id) == b2.ID() {
			break
		}
	}
	data := testutil.Pattern(7, 64<<10)
	if err := b2.Client().Put(ctx, id, data); err != nil {
		t.Fatal(err)
	}
	sent := promtest.ToFloat64(b2.metrics.sent)
	located := promtest.ToFloat64(b2.metrics.locates.WithLabelValues("ok"))
	s, err := a.data.Open(ctx, a.DataAddress(), old.GetDataAddress(), id, 0, 16<<10)
	if err == nil {
		s.Close()
		t.Fatalf("a stream of %s from the stopped incarnation's data address was served by the next", id)
	}
	if !errors.Is(err, messages.ErrUnavailable) || !strings.Contains(err.Error(), "another incarnation") {
		t.Fatalf("a stream from the stopped incarnation's data address = %v, want UNAVAILABLE naming another incarnation", err)
	}
	_, err = shardactor.CallLocate(ctx, a.data, old.GetDataAddress(), &messages.Locate{ObjectId: id, Receiver: a.Node(), TimeoutMs: 5000})
	if !errors.Is(err, messages.ErrUnavailable) || !strings.Contains(err.Error(), "another incarnation") {
		t.Fatalf("a Locate at the stopped incarnation's data address = %v, want UNAVAILABLE naming another incarnation", err)
	}
	if d := promtest.ToFloat64(b2.metrics.sent) - sent; d != 0 {
		t.Fatalf("the next incarnation sent %v object bytes for requests meant for the stopped one", d)
	}
	if d := promtest.ToFloat64(b2.metrics.locates.WithLabelValues("ok")) - located; d != 0 {
		t.Fatalf("the next incarnation answered %v Locates meant for the stopped one", d)
	}

	// The names the two incarnations' actor systems generate (the reply
	// actors of their requests, reduce workers) are apart: a late reply
	// to a request of the first reaches none of the next's.
	generated := map[string]bool{}
	for range 1000 {
		generated[b1.system.ProcessRegistry.NextId()] = true
	}
	for range 1000 {
		if id := b2.system.ProcessRegistry.NextId(); generated[id] {
			t.Fatalf("both incarnations generate the actor name %q", id)
		}
	}

	// What a knows of the next incarnation reaches it.
	if got, err := a.ClientOf(b2.Node()).Get(ctx, id); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("a Get through the next incarnation's store node: %v", err)
	}
}
