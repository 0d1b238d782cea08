package inlineindex

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/messages"
)

var t0 = time.Unix(1000, 0)

func node(i int) *messages.NodeRef {
	return &messages.NodeRef{NodeId: fmt.Sprintf("n%d", i), ActorId: fmt.Sprintf("n%d/store", i)}
}

// replyTo is an opaque requester as the table sees it.
type replyTo string

func indexedTable() (*directory.LocationTable, *Index) {
	x := New()
	return directory.NewLocationTable(directory.TableConfig{InlineLimit: 64, Inline: x}), x
}

func createInline(t *testing.T, tb *directory.LocationTable, id, data string, extra func(*messages.CreateObject)) {
	t.Helper()
	req := &messages.CreateObject{ObjectId: id, Size: int64(len(data)), Fingerprint: 7, Creator: node(0), HasInline: true, InlineData: []byte(data)}
	if extra != nil {
		extra(req)
	}
	out := tb.Step(t0, directory.Create{Req: req, ReplyTo: replyTo("c")}).Sends
	if r := outbox.SendsTo(out, replyTo("c")); len(r) != 1 || r[0].Msg.(*messages.CreateObjectReply).GetError() != nil {
		t.Fatalf("create %s: %v", id, out)
	}
}

// A plain Put's inline object is published as the table registers it,
// with what a Locate's answer carries; a streamed object, an unoffered
// one and a Reduce's target are not: the table answers those itself.
func TestIndexPublishesPlainInlineObjects(t *testing.T) {
	tb, x := indexedTable()
	createInline(t, tb, "small", "abc", nil)
	o := x.Lookup("small")
	if o == nil || string(o.Data) != "abc" || o.Size != 3 || o.Fingerprint != 7 || o.ID != "small" {
		t.Fatalf("published %+v, want small's 3 bytes and fingerprint", o)
	}
	tb.Step(t0, directory.Create{Req: &messages.CreateObject{ObjectId: "big", Size: 1000, Fingerprint: 42, Creator: node(0)}, ReplyTo: replyTo("cb")})
	createInline(t, tb, "held", "xyz", func(r *messages.CreateObject) { r.Unoffered = true })
	if _, err := tb.Reserve("target", "red#1"); err != nil {
		t.Fatal(err)
	}
	createInline(t, tb, "target", "sum", func(r *messages.CreateObject) { r.ReduceId, r.ReduceGeneration = "red#1", 1 })
	for _, id := range []string{"big", "held", "target", "never"} {
		if o := x.Lookup(id); o != nil {
			t.Errorf("%s published: %+v", id, o)
		}
	}
	if x.Len() != 1 {
		t.Fatalf("%d published, want 1", x.Len())
	}
}

// A Delete withdraws the object in the step that answers it, so a Get
// that starts once the Delete is answered finds nothing to read without
// the table; so does a Reduce's release of its target, and Close.
func TestIndexWithdrawsBeforeTheAnswer(t *testing.T) {
	tb, x := indexedTable()
	createInline(t, tb, "a", "abc", nil)
	createInline(t, tb, "b", "def", nil)
	out := tb.Step(t0, directory.Delete{Req: &messages.DeleteObject{ObjectId: "a"}, ReplyTo: replyTo("d")})
	if len(outbox.SendsTo(out.Sends, replyTo("d"))) != 1 {
		t.Fatalf("the Delete was not answered in its step: %v", out.Sends)
	}
	if x.Lookup("a") != nil {
		t.Fatal("a deleted object is still published when its Delete is answered")
	}
	if x.Lookup("b") == nil || x.Len() != 1 {
		t.Fatalf("the other object: %v, %d published", x.Lookup("b"), x.Len())
	}
	// Put again after the Delete: refused (DELETED), nothing published.
	out = tb.Step(t0, directory.Create{Req: &messages.CreateObject{ObjectId: "a", Size: 3, Creator: node(1), HasInline: true, InlineData: []byte("abc")}, ReplyTo: replyTo("c2")})
	if x.Lookup("a") != nil {
		t.Fatalf("a deleted id published again: %v", out.Sends)
	}
	x.Close()
	if x.Lookup("b") != nil || x.Len() != 0 {
		t.Fatal("Close left objects published")
	}
}

// A Reduce's target that a later commit reaches through a publication is
// withdrawn, whatever it was before.
func TestIndexWithdrawsWhatBecomesATarget(t *testing.T) {
	tb, x := indexedTable()
	createInline(t, tb, "t", "abc", nil)
	tb.Step(t0, &messages.PublishLocation{ObjectId: "t", Node: node(1), State: messages.LocationState_COMPLETE, Size: 3, Fingerprint: 7, ReduceId: "red#1"})
	if x.Lookup("t") != nil {
		t.Fatal("an object published as a Reduce's is still served without the table")
	}
}

// The index keeps the table's uplink budget: past it a Locate is asked of
// the table (which sends receivers to copies), and the queue drains at
// the uplink's rate.
func TestObjectAnswerKeepsTheUplinkBudget(t *testing.T) {
	const size, uplink = 1 << 10, 1e6 // 1 ms at the uplink: 976 copies of 1 KiB
	o := &Object{ID: "x", Size: size, uplink: uplink}
	n := 0
	for o.Answer(t0, nil) {
		n++
		if n > 10000 {
			t.Fatal("no budget")
		}
	}
	if want := int(directory.InlineQueueBudget(size, uplink) / size); n != want {
		t.Fatalf("%d answers with the bytes at once, want %d", n, want)
	}
	if !o.Answer(t0.Add(10*time.Millisecond), nil) {
		t.Fatal("the queue did not drain")
	}
}

// Readers on other goroutines see whole snapshots while the table
// writes: run with -race.
func TestIndexConcurrentReaders(t *testing.T) {
	tb, x := indexedTable()
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for r := range 4 {
		wg.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				id := fmt.Sprintf("o%d", (i+r)%64)
				if o := x.Lookup(id); o != nil && (o.ID != id || string(o.Data) != id) {
					t.Errorf("lookup %s: %+v", id, o)
					return
				}
				x.Len()
			}
		})
	}
	for i := range 64 {
		id := fmt.Sprintf("o%d", i)
		createInline(t, tb, id, id, nil)
		if i%2 == 0 {
			tb.Step(t0, directory.Delete{Req: &messages.DeleteObject{ObjectId: id}, ReplyTo: replyTo("d")})
		}
	}
	close(stop)
	wg.Wait()
	if x.Len() != 32 {
		t.Fatalf("%d published, want 32", x.Len())
	}
}

// An inline object whose copies cost the shard's uplink more than its
// processing (past InlineQueueCopies in InlineQueueTime) is not
// published: past the budget it is relayed from receivers' copies, which
// only receivers that asked the table keep.
func TestIndexLeavesCostlyObjectsToTheTable(t *testing.T) {
	x := New()
	tb := directory.NewLocationTable(directory.TableConfig{InlineLimit: 64 << 10, InlineUplink: 1e6, Inline: x}) // 1 ms: 1,000 B
	createInline(t, tb, "cheap", "abc", nil)
	createInline(t, tb, "costly", string(make([]byte, 200)), nil) // 8 copies: 1,600 B
	if x.Lookup("cheap") == nil || x.Lookup("costly") != nil {
		t.Fatalf("published: cheap %v, costly %v; want only the cheap one", x.Lookup("cheap"), x.Lookup("costly"))
	}
	if !directory.CheapOnTheUplink(6250, 50e6) || directory.CheapOnTheUplink(6251, 50e6) {
		t.Error("at 400 Mbit/s the limit is 6,250 bytes")
	}
}

// An answer given from the index records its receiver's copy, as the
// table's own inline answer does: the table takes it at its next step
// (an Info lists it), and a Delete drops it, including one recorded in
// the very step that deletes (withdraw hands over what was not taken).
// A no-copy receiver is not recorded; nothing is answered once the
// object is withdrawn.
func TestIndexAnswersRecordTheReadersCopies(t *testing.T) {
	tb, x := indexedTable()
	createInline(t, tb, "a", "abc", nil)
	o := x.Lookup("a")
	if !o.Answer(t0, node(2)) || !o.Answer(t0, nil) {
		t.Fatal("not answered")
	}
	info := tb.Step(t0, directory.Query{Req: &messages.QueryObject{ObjectId: "a"}, ReplyTo: replyTo("q")}).Sends
	var listed []string
	for _, s := range outbox.SendsTo(info, replyTo("q")) {
		for _, l := range s.Msg.(*messages.ObjectInfo).GetLocations() {
			if l.GetState() == messages.LocationState_COMPLETE {
				listed = append(listed, l.GetNode().GetNodeId())
			}
		}
	}
	if !slices.Contains(listed, "n2") || len(listed) != 1 {
		t.Fatalf("whole copies listed after the answers: %v, want n2's (the creator's is not whole yet, the no-copy reader has none)", listed)
	}
	// Recorded after the table's last step: the Delete takes it too.
	if !o.Answer(t0, node(3)) {
		t.Fatal("not answered")
	}
	out := tb.Step(t0, directory.Delete{Req: &messages.DeleteObject{ObjectId: "a"}, ReplyTo: replyTo("d")}).Sends
	dropped := map[string]bool{}
	for _, s := range out {
		if _, ok := s.Msg.(*messages.DropObject); ok {
			dropped[s.To.(*messages.NodeRef).GetNodeId()] = true
		}
	}
	if !dropped["n0"] || !dropped["n2"] || !dropped["n3"] {
		t.Fatalf("the Delete dropped %v, want n0, n2 and n3", dropped)
	}
	if o.Answer(t0, node(4)) {
		t.Fatal("a withdrawn object answered")
	}
	// A reader recorded while a step runs, after its drain: withdraw
	// hands it over.
	createInline(t, tb, "b", "def", nil)
	ob := x.Lookup("b")
	ob.Answer(t0, node(5))
	if r := x.Withdraw("b"); len(r) != 1 || r[0].GetNodeId() != "n5" {
		t.Fatalf("withdraw handed over %v, want n5", r)
	}
	if ob.Answer(t0, node(6)) || x.Lookup("b") != nil {
		t.Fatal("a withdrawn object is still served")
	}
}

// A deputy's batch of Locates is answered with one copy of the bytes on
// the uplink's budget, however many it holds, each answered receiver's
// copy recorded (a Delete drops them all); the Locates the table must
// answer (a failed sender named, no receiver though keeping a copy, or
// another object's) are left to it; a withdrawn object answers none.
func TestObjectAnswerBatch(t *testing.T) {
	tb, x := indexedTable()
	createInline(t, tb, "a", "abc", nil)
	o := x.Lookup("a")
	ls := []*messages.Locate{
		{ObjectId: "a", Receiver: node(2)},
		{ObjectId: "a", Receiver: node(3), FailedSender: node(9)},
		{ObjectId: "a"}, // keeps a copy, names no receiver
		{ObjectId: "a", NoCopy: true},
		{ObjectId: "b", Receiver: node(4)},
		{ObjectId: "a", Receiver: node(5)},
	}
	got := o.AnswerBatch(ls, t0)
	if want := []bool{true, false, false, true, false, true}; !slices.Equal(got, want) {
		t.Fatalf("answered %v, want %v", got, want)
	}
	if q := o.queue.queued; q != float64(o.Size) {
		t.Fatalf("the batch counted %v bytes on the uplink, want one copy's %d", q, o.Size)
	}
	out := tb.Step(t0, directory.Delete{Req: &messages.DeleteObject{ObjectId: "a"}, ReplyTo: replyTo("d")}).Sends
	dropped := map[string]bool{}
	for _, s := range out {
		if _, ok := s.Msg.(*messages.DropObject); ok {
			dropped[s.To.(*messages.NodeRef).GetNodeId()] = true
		}
	}
	if !dropped["n2"] || !dropped["n5"] || dropped["n3"] {
		t.Fatalf("the Delete dropped %v, want n2 and n5 (recorded), not n3", dropped)
	}
	if got := o.AnswerBatch(ls[:1], t0); got[0] {
		t.Fatal("a withdrawn object answered a batch")
	}
	// Past the budget, none is answered.
	p := &Object{ID: "p", Size: 1 << 10, uplink: 1e6}
	for p.Answer(t0, nil) {
	}
	if got := p.AnswerBatch([]*messages.Locate{{ObjectId: "p", NoCopy: true}}, t0); got[0] {
		t.Fatal("a batch answered past the uplink's budget")
	}
}
