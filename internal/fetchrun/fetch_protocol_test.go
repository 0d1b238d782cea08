package fetchrun

import (
	"errors"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/netmodel"
	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/internal/storeproto"
	"github.com/hoplite-go/hoplite/messages"
)

type protoFixture struct {
	t     *testing.T
	p     *Fetch
	store *objstore.Store
	obj   *objstore.Object
	now   time.Time
}

func newProtoFixture(t *testing.T, deadline time.Duration) *protoFixture {
	store := objstore.NewStore(1 << 30)
	obj, _ := store.Reserve("x")
	now := time.Unix(1000, 0)
	p := NewFetch(storeproto.FetchConfig{Self: &messages.NodeRef{NodeId: "me"}, Grace: time.Second,
		Rand: rand.New(rand.NewPCG(1, 2))}, store, obj, now.Add(deadline), nil)
	return &protoFixture{t: t, p: p, store: store, obj: obj, now: now}
}

// locate returns the one Locate of out (failing if there is none).
func (f *protoFixture) locate(out storeproto.FetchOutput) *messages.Locate {
	f.t.Helper()
	for _, s := range out.Sends {
		if l, ok := s.Msg.(*messages.Locate); ok {
			if s.To != directory.ShardOf("x") {
				f.t.Fatalf("Locate sent to %v", s.To)
			}
			return l
		}
	}
	f.t.Fatalf("no Locate in %+v", out)
	return nil
}

// watched is the node id out asks to watch ("" for none).
func watched(out storeproto.FetchOutput) string {
	if len(out.Watch) != 1 {
		return ""
	}
	return out.Watch[0].(*messages.NodeRef).GetNodeId()
}

// unwatched is the node id out asks to stop watching ("" for none).
func unwatched(out storeproto.FetchOutput) string {
	if len(out.Unwatch) != 1 {
		return ""
	}
	return out.Unwatch[0].(*messages.NodeRef).GetNodeId()
}

func sender(id string) *messages.NodeRef {
	return &messages.NodeRef{NodeId: id, ActorId: id + "/store"}
}

// A reply to an attempt that is over (late, duplicated) is ignored: only
// the current attempt's answer starts a stream.
func TestFetchProtocolIgnoresStaleReplies(t *testing.T) {
	f := newProtoFixture(t, time.Minute)
	l1 := f.locate(f.p.Start(f.now))
	out := f.p.Located(&messages.LocateReply{ObjectId: "x", Attempt: l1.GetAttempt(), Error: messages.Errorf(messages.ErrorCode_UNAVAILABLE, "restarting")}, f.now)
	if len(out.Timers) != 1 || out.Stream != nil || len(out.Sends) != 0 {
		t.Fatalf("UNAVAILABLE: want one retry timer, got %+v", out)
	}
	f.now = out.Timers[0].At
	l2 := f.locate(f.p.Timer(out.Timers[0].Msg.(storeproto.FetchTimer), f.now))
	if l2.GetAttempt() == l1.GetAttempt() {
		t.Fatalf("the retry reused attempt %d", l1.GetAttempt())
	}
	stale := &messages.LocateReply{ObjectId: "x", Attempt: l1.GetAttempt(), Size: 100, Sender: sender("old")}
	if out := f.p.Located(stale, f.now); out.Stream != nil || out.Done || len(out.Sends) != 0 {
		t.Fatalf("a stale reply acted: %+v", out)
	}
	cur := &messages.LocateReply{ObjectId: "x", Attempt: l2.GetAttempt(), Size: 100, Sender: sender("s")}
	out = f.p.Located(cur, f.now)
	if out.Stream == nil || out.Stream.Sender.GetNodeId() != "s" || watched(out) != "s" {
		t.Fatalf("the current reply did not start a watched stream from s: %+v", out)
	}
	if again := f.p.Located(cur, f.now); again.Stream != nil || len(again.Sends) != 0 {
		t.Fatalf("a duplicated reply started a second stream: %+v", again)
	}
}

// UNAVAILABLE backs off from 5ms doubling to 200ms, each wait jittered
// within [backoff/2, backoff].
func TestFetchProtocolBackoffGrowsWithJitter(t *testing.T) {
	f := newProtoFixture(t, time.Minute)
	l := f.locate(f.p.Start(f.now))
	want := 5 * time.Millisecond
	for i := range 10 {
		out := f.p.Located(&messages.LocateReply{ObjectId: "x", Attempt: l.GetAttempt(), Error: messages.Errorf(messages.ErrorCode_UNAVAILABLE, "x")}, f.now)
		if len(out.Timers) != 1 {
			t.Fatalf("retry %d: %+v", i, out)
		}
		wait := out.Timers[0].At.Sub(f.now)
		if wait < want/2 || wait > want {
			t.Fatalf("retry %d waits %v, want within [%v, %v]", i, wait, want/2, want)
		}
		want = min(2*want, 200*time.Millisecond)
		f.now = out.Timers[0].At
		l = f.locate(f.p.Timer(out.Timers[0].Msg.(storeproto.FetchTimer), f.now))
	}
	if want != 200*time.Millisecond {
		t.Fatalf("backoff reached %v, want 200ms", want)
	}
}

// A Locate whose deadline passes is withdrawn (CancelLocate); a later
// Get's deadline makes the protocol ask again, else it fails TIMEOUT and
// tells the directory it gave up.
func TestFetchProtocolTimeoutAndExtension(t *testing.T) {
	f := newProtoFixture(t, 100*time.Millisecond)
	out := f.p.Start(f.now)
	l1 := f.locate(out)
	if len(out.Timers) != 1 || !out.Timers[0].At.Equal(f.now.Add(100*time.Millisecond)) || l1.GetTimeoutMs() != 100 {
		t.Fatalf("the Locate's deadline: timeout %dms, timers %+v", l1.GetTimeoutMs(), out.Timers)
	}
	f.p.Extend(f.now.Add(time.Second))
	f.now = out.Timers[0].At
	out = f.p.Timer(out.Timers[0].Msg.(storeproto.FetchTimer), f.now)
	if _, ok := out.Sends[0].Msg.(*messages.CancelLocate); !ok {
		t.Fatalf("no CancelLocate first: %+v", out.Sends)
	}
	l2 := f.locate(out)
	if l2.GetTimeoutMs() != 900 {
		t.Fatalf("the second Locate's timeout is %dms, want 900", l2.GetTimeoutMs())
	}
	f.now = out.Timers[0].At
	out = f.p.Located(&messages.LocateReply{ObjectId: "x", Attempt: l2.GetAttempt(), Error: messages.Errorf(messages.ErrorCode_TIMEOUT, "none")}, f.now)
	if !out.Done || !errors.Is(out.Err, messages.ErrTimeout) {
		t.Fatalf("past the extended deadline: done %v err %v", out.Done, out.Err)
	}
	var cancel, aborted bool
	for _, s := range out.Sends {
		_, c := s.Msg.(*messages.CancelLocate)
		_, a := s.Msg.(*messages.FetchAborted)
		cancel, aborted = cancel || c, aborted || a
	}
	if !cancel || !aborted {
		t.Fatalf("a TIMEOUT sends CancelLocate and FetchAborted: %+v", out.Sends)
	}
	if _, _, err := f.obj.Progress(); !errors.Is(err, messages.ErrTimeout) {
		t.Fatalf("the placeholder's error: %v", err)
	}
}

// A sender's failure (its watch fires) cuts the stream; the cut stream's
// end counts as UNAVAILABLE and the protocol locates again naming the
// sender, resuming at its offset. The grace is fixed at the first failure.
func TestFetchProtocolFailoverResumesAndFixesGrace(t *testing.T) {
	f := newProtoFixture(t, 10*time.Millisecond)
	l := f.locate(f.p.Start(f.now))
	out := f.p.Located(&messages.LocateReply{ObjectId: "x", Attempt: l.GetAttempt(), Size: 100, Sender: sender("a")}, f.now)
	if err := f.p.Writer().Append(make([]byte, 40)); err != nil {
		t.Fatal(err)
	}
	cut := f.p.SenderFailed("a")
	if cut.Cut != out.Stream.ID {
		t.Fatalf("the sender's failure did not cut its stream: %+v", cut)
	}
	f.now = f.now.Add(50 * time.Millisecond) // past the Gets' deadline
	out = f.p.StreamEnded(out.Stream.ID, messages.ErrCanceled, f.now)
	if out.Failure() == nil || !errors.Is(out.Failure().Err, messages.ErrUnavailable) || unwatched(out) != "a" {
		t.Fatalf("the cut stream's end: %+v", out)
	}
	l = f.locate(out)
	if l.GetFailedSender().GetNodeId() != "a" {
		t.Fatalf("the Locate after the failure names %q", l.GetFailedSender().GetNodeId())
	}
	grace := f.now.Add(time.Second)
	if !out.Timers[0].At.Equal(grace) {
		t.Fatalf("the Locate after the failure waits until %v, want the grace %v", out.Timers[0].At, grace)
	}
	out = f.p.Located(&messages.LocateReply{ObjectId: "x", Attempt: l.GetAttempt(), Size: 100, Sender: sender("b")}, f.now)
	if sw := out.Switched(); out.Stream.Offset != 40 || sw == nil || sw.From != "a" || sw.To != "b" {
		t.Fatalf("resumed at %d, switched %+v", out.Stream.Offset, sw)
	}
	f.now = f.now.Add(500 * time.Millisecond)
	out = f.p.StreamEnded(out.Stream.ID, messages.Errorf(messages.ErrorCode_TIMEOUT, "stalled"), f.now)
	f.locate(out)
	if !out.Timers[0].At.Equal(grace) {
		t.Fatalf("a second failure renewed the grace to %v (want %v)", out.Timers[0].At, grace)
	}
}

// A whole transfer from a complete copy feeds the estimator; the copy is
// then complete and the shard hears FetchDone.
func TestFetchProtocolCompletesAndObserves(t *testing.T) {
	f := newProtoFixture(t, time.Minute)
	var observed []time.Duration
	f.p.observe = func(bytes int64, elapsed time.Duration) {
		if _, done, _ := f.obj.Progress(); done {
			t.Error("observed after the copy was complete: a Get may return before the measurement")
		}
		observed = append(observed, time.Duration(bytes), elapsed)
	}
	size := int64(netmodel.MinMeasuredTransfer)
	l := f.locate(f.p.Start(f.now))
	out := f.p.Located(&messages.LocateReply{ObjectId: "x", Attempt: l.GetAttempt(), Size: size, Sender: sender("a"),
		SenderState: messages.LocationState_COMPLETE}, f.now)
	if err := f.p.Writer().Append(make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	f.now = f.now.Add(time.Second)
	out = f.p.StreamEnded(out.Stream.ID, nil, f.now)
	if !out.Done || out.Err != nil || len(observed) != 2 || observed[0] != time.Duration(size) || observed[1] != time.Second {
		t.Fatalf("the end of a whole transfer: %+v, observed %v", out, observed)
	}
	if _, ok := out.Sends[0].Msg.(*messages.FetchDone); !ok {
		t.Fatalf("no FetchDone: %+v", out.Sends)
	}
	if _, done, _ := f.obj.Progress(); !done {
		t.Fatal("the copy is not complete")
	}
}

// A directory epoch that changed between two senders (a Reduce re-created
// the object) rewinds the copy: the next stream starts at 0.
func TestFetchProtocolEpochChangeRewinds(t *testing.T) {
	f := newProtoFixture(t, time.Minute)
	l := f.locate(f.p.Start(f.now))
	out := f.p.Located(&messages.LocateReply{ObjectId: "x", Attempt: l.GetAttempt(), Size: 100, Sender: sender("a"), Epoch: 1}, f.now)
	if err := f.p.Writer().Append(make([]byte, 60)); err != nil {
		t.Fatal(err)
	}
	l = f.locate(f.p.StreamEnded(out.Stream.ID, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "gone"), f.now))
	out = f.p.Located(&messages.LocateReply{ObjectId: "x", Attempt: l.GetAttempt(), Size: 100, Sender: sender("b"), Epoch: 2}, f.now)
	if out.Stream == nil || out.Stream.Offset != 0 {
		t.Fatalf("after an epoch change the stream starts at %d, want 0", out.Stream.Offset)
	}
}

// A session that starts after a creator on its node took the placeholder
// (a Put, or a Reduce's root promoted it) leaves the object to it: it
// ends at once without taking the writer, which would cut the creator
// off.
func TestFetchStartingAfterTheCreatorTookThePlaceholderLeavesIt(t *testing.T) {
	f := newProtoFixture(t, time.Minute)
	if _, err := f.store.Promote(f.obj, 16, 0); err != nil {
		t.Fatal(err)
	}
	w := f.obj.NewWriter() // the creator's
	out := f.p.Start(f.now)
	if !out.Done || out.Err != nil || len(out.Sends) != 0 {
		t.Fatalf("start over a creator's copy: %+v, want done, no error, no Locate", out)
	}
	if err := w.Append(make([]byte, 16)); err != nil {
		t.Fatalf("the creator's writer after the session started: %v", err)
	}
}

// The protocol itself holds no store: what it needs done to the object
// comes out as StoreOps, one per step, and goes on only once StoreDone
// brings the result and the object's state back. Driven here with
// states alone: take the writer, allocate (its evictions unpublished),
// stream, complete, and FetchDone names the size the state reported.
func TestFetchProtocolAsksTheStore(t *testing.T) {
	now := time.Unix(1000, 0)
	p := storeproto.NewFetchProtocol(storeproto.FetchConfig{Self: &messages.NodeRef{NodeId: "me"}, Grace: time.Second,
		Rand: rand.New(rand.NewPCG(1, 2))}, "x", now.Add(time.Minute))
	fresh := storeproto.ObjectState{Size: -1}
	out := p.Step(now, storeproto.FetchStart{State: fresh})
	if out.Store.Kind != storeproto.OpTakeWriter || len(out.Sends) != 0 {
		t.Fatalf("start: %+v; want only storeproto.OpTakeWriter", out)
	}
	if o := p.Step(now, storeproto.FetchLocated{Reply: &messages.LocateReply{ObjectId: "x", Attempt: 1}, State: fresh}); o.Store.Kind != 0 || len(o.Sends) != 0 {
		t.Fatalf("an answer while the store works changed something: %+v", o)
	}
	out = p.Step(now, storeproto.FetchStoreDone{Result: storeproto.StoreResult{}, State: fresh})
	var l *messages.Locate
	for _, s := range out.Sends {
		l, _ = s.Msg.(*messages.Locate)
	}
	if l == nil || out.Store.Kind != 0 {
		t.Fatalf("after the writer: %+v; want a Locate", out)
	}
	out = p.Step(now, storeproto.FetchLocated{Reply: &messages.LocateReply{ObjectId: "x", Attempt: l.GetAttempt(), Size: 100, Fingerprint: 7, Sender: sender("s"),
		SenderState: messages.LocationState_COMPLETE}, State: fresh})
	if op := out.Store; op.Kind != storeproto.OpAllocate || op.Size != 100 || op.Fingerprint != 7 || out.Stream != nil {
		t.Fatalf("located: %+v; want storeproto.OpAllocate of 100 bytes, fingerprint 7, and no stream yet", out)
	}
	out = p.Step(now, storeproto.FetchStoreDone{Result: storeproto.StoreResult{Evicted: []string{"old"}}, State: storeproto.ObjectState{Size: 100}})
	if len(out.Sends) != 1 || out.Sends[0].To != directory.ShardOf("old") || out.Stream == nil || out.Stream.Offset != 0 || watched(out) != "s" {
		t.Fatalf("allocated: %+v; want old unpublished and a stream from s at 0", out)
	}
	out = p.Step(now.Add(time.Millisecond), storeproto.FetchStreamEnded{Stream: out.Stream.ID, Err: nil, State: storeproto.ObjectState{Size: 100, Written: 100}})
	if out.Store.Kind != storeproto.OpComplete || out.Done || len(out.Sends) != 0 {
		t.Fatalf("stream ended: %+v; want storeproto.OpComplete before anything is told", out)
	}
	out = p.Step(now, storeproto.FetchStoreDone{Result: storeproto.StoreResult{}, State: storeproto.ObjectState{Size: 100, Written: 100, Done: true}})
	if len(out.Sends) != 1 || !out.Done || out.Err != nil {
		t.Fatalf("completed: %+v; want FetchDone and the end", out)
	}
	if d, ok := out.Sends[0].Msg.(*messages.FetchDone); !ok || d.GetSize() != 100 || d.GetFingerprint() != 7 {
		t.Fatalf("completed: sent %v; want FetchDone of 100 bytes, fingerprint 7", out.Sends[0].Msg)
	}
}

// An inline answer is one store operation; an append refused because a
// newer session owns the object ends this one CANCELED, telling nobody,
// and a failed allocation unpublishes the copy the shard recorded.
func TestFetchProtocolInlineStoreOp(t *testing.T) {
	for _, c := range []struct {
		name  string
		r     storeproto.StoreResult
		err   error
		unpub bool
	}{
		{"stored", storeproto.StoreResult{}, nil, false},
		{"superseded", storeproto.StoreResult{Err: messages.ErrCanceled, AppendFailed: true}, messages.ErrCanceled, false},
		{"no room", storeproto.StoreResult{Err: messages.Errorf(messages.ErrorCode_CAPACITY, "full")}, messages.ErrCapacity, true},
	} {
		now := time.Unix(1000, 0)
		p := storeproto.NewFetchProtocol(storeproto.FetchConfig{Self: &messages.NodeRef{NodeId: "me"}, Rand: rand.New(rand.NewPCG(1, 2))}, "x", now.Add(time.Minute))
		p.Step(now, storeproto.FetchStart{State: storeproto.ObjectState{Size: -1}})
		out := p.Step(now, storeproto.FetchStoreDone{Result: storeproto.StoreResult{}, State: storeproto.ObjectState{Size: -1}})
		attempt := out.Sends[0].Msg.(*messages.Locate).GetAttempt()
		out = p.Step(now, storeproto.FetchLocated{Reply: &messages.LocateReply{ObjectId: "x", Attempt: attempt, Size: 3, HasInline: true, InlineData: []byte("abc")}, State: storeproto.ObjectState{Size: -1}})
		if op := out.Store; op.Kind != storeproto.OpStoreInline || string(op.Data) != "abc" || op.Size != 3 {
			t.Fatalf("%s: %+v; want storeproto.OpStoreInline of abc", c.name, out)
		}
		out = p.Step(now, storeproto.FetchStoreDone{Result: c.r, State: storeproto.ObjectState{Size: 3}})
		unpub := len(out.Sends) == 1
		if !out.Done || !errors.Is(out.Err, c.err) && !(c.err == nil && out.Err == nil) || unpub != c.unpub || len(out.Sends) > 1 {
			t.Fatalf("%s: done %v err %v sends %v; want err %v, unpublished %v", c.name, out.Done, out.Err, out.Sends, c.err, c.unpub)
		}
	}
}

// An inline answer whose allocation evicted copies to make room
// unpublishes them, as an allocation for a stream does: the shard would
// go on offering them. It did not, and the directory listed an evicted
// copy until a reader found it gone.
func TestFetchProtocolInlineStoreUnpublishesWhatItEvicted(t *testing.T) {
	now := time.Unix(1000, 0)
	p := storeproto.NewFetchProtocol(storeproto.FetchConfig{Self: &messages.NodeRef{NodeId: "me"}, Rand: rand.New(rand.NewPCG(1, 2))}, "x", now.Add(time.Minute))
	p.Step(now, storeproto.FetchStart{State: storeproto.ObjectState{Size: -1}})
	out := p.Step(now, storeproto.FetchStoreDone{Result: storeproto.StoreResult{}, State: storeproto.ObjectState{Size: -1}})
	attempt := out.Sends[0].Msg.(*messages.Locate).GetAttempt()
	p.Step(now, storeproto.FetchLocated{Reply: &messages.LocateReply{ObjectId: "x", Attempt: attempt, Size: 3, HasInline: true, InlineData: []byte("abc")}, State: storeproto.ObjectState{Size: -1}})
	out = p.Step(now, storeproto.FetchStoreDone{Result: storeproto.StoreResult{Evicted: []string{"old"}}, State: storeproto.ObjectState{Size: 3, Written: 3, Done: true}})
	var unpub []string
	for _, s := range out.Sends {
		if u, ok := s.Msg.(*messages.UnpublishLocation); ok && s.To == directory.ShardOf(u.GetObjectId()) {
			unpub = append(unpub, u.GetObjectId())
		}
	}
	if !out.Done || out.Err != nil || len(unpub) != 1 || unpub[0] != "old" {
		t.Fatalf("stored, evicting old: done %v err %v sends %v; want old unpublished at its shard", out.Done, out.Err, out.Sends)
	}
}

// fetchAborted returns the one FetchAborted of out (nil if none).
func fetchAborted(out storeproto.FetchOutput) *messages.FetchAborted {
	for _, s := range out.Sends {
		if a, ok := s.Msg.(*messages.FetchAborted); ok {
			return a
		}
	}
	return nil
}

// A fetch the directory's drop ends tells the shard which attempt it
// gives up, streaming or still locating (the answer may be on its way),
// so that the sender the shard holds for it is freed. A fetch that stops
// with its node tells nothing: the restarted node resumes it.
func TestFetchDroppedAbortsItsAttempt(t *testing.T) {
	f := newProtoFixture(t, time.Minute)
	l := f.locate(f.p.Start(f.now))
	f.p.Located(&messages.LocateReply{ObjectId: "x", Attempt: l.GetAttempt(), Size: 100, Sender: sender("a")}, f.now)
	out := f.p.Dropped()
	a := fetchAborted(out)
	if a == nil || a.GetAttempt() != l.GetAttempt() || a.GetSender().GetNodeId() != "a" || a.GetReceiver().GetNodeId() != "me" || out.Cut == 0 || !out.Done {
		t.Fatalf("dropped while streaming: %+v", out)
	}

	f = newProtoFixture(t, time.Minute)
	l = f.locate(f.p.Start(f.now))
	out = f.p.Dropped()
	if a := fetchAborted(out); a == nil || a.GetAttempt() != l.GetAttempt() || a.GetSender() != nil || !out.Done {
		t.Fatalf("dropped while locating: %+v", out)
	}

	f = newProtoFixture(t, time.Minute)
	l = f.locate(f.p.Start(f.now))
	f.p.Located(&messages.LocateReply{ObjectId: "x", Attempt: l.GetAttempt(), Size: 100, Sender: sender("a")}, f.now)
	if out := f.p.Stop(); fetchAborted(out) != nil || !out.Done {
		t.Fatalf("stopped with its node: %+v", out)
	}
}

// The directory names this node as the sender of its own whole copy,
// which its store does not hold: the record is stale. The fetch
// unpublishes it and asks again, instead of failing its Get. A copy the
// node holds (a Put here took the placeholder over) ends the fetch.
func TestFetchUnpublishesAStaleRecordOfItsOwnCopy(t *testing.T) {
	f := newProtoFixture(t, time.Minute)
	l := f.locate(f.p.Start(f.now))
	me := &messages.NodeRef{NodeId: "me"}
	out := f.p.Located(&messages.LocateReply{ObjectId: "x", Attempt: l.GetAttempt(), Size: 100, Sender: me,
		SenderState: messages.LocationState_COMPLETE}, f.now)
	var unpub *messages.UnpublishLocation
	for _, s := range out.Sends {
		if u, ok := s.Msg.(*messages.UnpublishLocation); ok {
			unpub = u
		}
	}
	if unpub == nil || unpub.GetNode().GetNodeId() != "me" || unpub.GetObjectId() != "x" || out.Done || len(out.Timers) != 1 {
		t.Fatalf("a stale record of its own copy: %+v; want an Unpublish and a retry", out)
	}
	f.now = out.Timers[0].At
	l = f.locate(f.p.Timer(out.Timers[0].Msg.(storeproto.FetchTimer), f.now))

	// A Put here takes the placeholder over, as it does before it
	// publishes its copy.
	if _, err := f.store.Promote(f.obj, 100, 0); err != nil {
		t.Fatal(err)
	}
	if out := f.p.Located(&messages.LocateReply{ObjectId: "x", Attempt: l.GetAttempt(), Size: 100, Sender: me,
		SenderState: messages.LocationState_COMPLETE}, f.now); !out.Done || out.Err != nil {
		t.Fatalf("its own copy, held by a Put here: %+v; want the fetch to end", out)
	}
}

// A sender that answered NOT_FOUND is named as one that lacks the object
// in the next Locate; one whose stream merely broke is not.
func TestFetchSaysASenderLacksTheObject(t *testing.T) {
	for _, c := range []struct {
		err   error
		lacks bool
	}{
		{messages.Errorf(messages.ErrorCode_NOT_FOUND, "object %q is not on this node", "x"), true},
		{messages.Errorf(messages.ErrorCode_UNAVAILABLE, "connection reset"), false},
	} {
		f := newProtoFixture(t, time.Minute)
		l := f.locate(f.p.Start(f.now))
		out := f.p.Located(&messages.LocateReply{ObjectId: "x", Attempt: l.GetAttempt(), Size: 100, Sender: sender("a"),
			SenderState: messages.LocationState_COMPLETE}, f.now)
		next := f.locate(f.p.StreamEnded(out.Stream.ID, c.err, f.now))
		if next.GetFailedSender().GetNodeId() != "a" || next.GetFailedSenderLacks() != c.lacks {
			t.Fatalf("after %v: failed sender %v, lacks %v; want a, %v", c.err, next.GetFailedSender(), next.GetFailedSenderLacks(), c.lacks)
		}
	}
}

// A copy that streamed part of a small object from a copy the shard
// named (an inline object relayed past the shard's uplink budget), whose
// sender then failed, is answered with the object's bytes: they replace
// what it streamed, and the Get completes with them. Adopted over the
// bytes already written, they failed the Get (INTERNAL).
func TestInlineAnswerAfterAPartialStreamCompletesTheCopy(t *testing.T) {
	f := newProtoFixture(t, time.Minute)
	l := f.locate(f.p.Start(f.now))
	out := f.p.Located(&messages.LocateReply{ObjectId: "x", Attempt: l.GetAttempt(), Size: 6, Fingerprint: 7, Sender: sender("a"),
		SenderState: messages.LocationState_COMPLETE, Epoch: 1}, f.now)
	if out.Stream == nil {
		t.Fatalf("located a sender: %+v; want a stream", out)
	}
	if err := f.p.Writer().Append([]byte("inl")); err != nil {
		t.Fatal(err)
	}
	l = f.locate(f.p.StreamEnded(out.Stream.ID, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "sender a terminated"), f.now))
	if l.GetFailedSender().GetNodeId() != "a" {
		t.Fatalf("the Locate after the failure names %q", l.GetFailedSender().GetNodeId())
	}
	out = f.p.Located(&messages.LocateReply{ObjectId: "x", Attempt: l.GetAttempt(), Size: 6, Fingerprint: 7,
		HasInline: true, InlineData: []byte("inline")}, f.now)
	if !out.Done || out.Err != nil {
		t.Fatalf("the inline answer after a partial stream: done %v err %v; want the copy complete", out.Done, out.Err)
	}
	if b, ok := f.obj.WholeBytes(); !ok || string(b) != "inline" {
		t.Fatalf("the copy holds %q (whole %v); want the answer's bytes", b, ok)
	}
	if _, done, _ := f.obj.Progress(); !done {
		t.Fatal("the copy is not complete")
	}
}
