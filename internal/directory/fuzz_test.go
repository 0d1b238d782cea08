package directory

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/internal/testutil"
	"github.com/hoplite-go/hoplite/messages"
)

// fuzzInput reads a fuzz target's bytes as a program (testutil.FuzzInput).
type fuzzInput = testutil.FuzzInput

// hostileIDs are the object ids the fuzzed requests name: few, so that
// requests meet on one entry, and the limits (empty, over the limit,
// the internal prefix).
var hostileIDs = []string{"a", "b", "", strings.Repeat("x", 4097), InternalPrefix + "r", "a#c.n"}

// hostileNode is a NodeRef a peer may name: one of three real nodes, an
// incarnation of n0 at another address, nil, one without a node id, or
// one that names a foreign actor.
func hostileNode(c byte) *messages.NodeRef {
	switch c % 8 {
	case 0, 1, 2:
		return node(int(c % 8))
	case 3:
		return &messages.NodeRef{NodeId: "n0", Address: "elsewhere:1", ActorId: "n0/store"}
	case 4:
		return nil
	case 5:
		return &messages.NodeRef{Address: "x:1", ActorId: "y"}
	case 6:
		return &messages.NodeRef{NodeId: strings.Repeat("n", 4097), Address: "evil:1", ActorId: "$1"}
	}
	return &messages.NodeRef{NodeId: "n1", ActorId: "other/actor", DataAddress: "evil:2"}
}

// hostileInt is a size, offset, timeout or count a peer may send.
func hostileInt(c byte) int64 {
	return testutil.HostileInt(c, 3, 100, 1<<40, 1000)
}

// tableMessage builds one of the messages a directory shard hands its
// table, decoded from the fuzz input and then given hostile fields.
func tableMessage(in *fuzzInput) proto.Message {
	kind, raw := in.Byte(), in.Bytes()
	var m proto.Message
	switch kind % 16 {
	case 0:
		m = &messages.CreateObject{}
	case 1:
		m = &messages.PublishLocation{}
	case 2:
		m = &messages.UnpublishLocation{}
	case 3:
		m = &messages.ReportLost{}
	case 4:
		m = &messages.Locate{}
	case 5:
		m = &messages.CancelLocate{}
	case 6:
		m = &messages.FetchDone{}
	case 7:
		m = &messages.FetchAborted{}
	case 8:
		m = &messages.DeleteObject{}
	case 9:
		m = &messages.Tombstones{}
	case 10:
		m = &messages.Subscribe{}
	case 11:
		m = &messages.Unsubscribe{}
	case 12:
		m = &messages.QueryObject{}
	case 13:
		m = &messages.ListObjects{}
	case 14:
		m = &messages.ReleaseTarget{}
	default:
		m = &messages.StartReduce{} // stands for Reserve
	}
	if proto.Unmarshal(raw, m) != nil {
		proto.Reset(m)
	}
	if kind&0x10 == 0 {
		return m // the decoded fields as they came
	}
	id := hostileIDs[int(in.Byte())%len(hostileIDs)]
	n1, n2, v := hostileNode(in.Byte()), hostileNode(in.Byte()), hostileInt(in.Byte())
	switch m := m.(type) {
	case *messages.CreateObject:
		m.ObjectId, m.Creator, m.Size = id, n1, v
		if kind&0x20 != 0 {
			m.HasInline, m.InlineData = true, make([]byte, min(max(v, 0), 64))
		}
		if kind&0x40 != 0 {
			m.ReduceId = "a#c.n"
		}
	case *messages.PublishLocation:
		m.ObjectId, m.Node, m.Size = id, n1, v
		m.State = messages.LocationState(kind >> 6)
		m.Creator = kind&0x20 != 0
	case *messages.UnpublishLocation:
		m.ObjectId, m.Node = id, n1
	case *messages.ReportLost:
		m.ObjectId, m.Node = id, n1
	case *messages.Locate:
		m.ObjectId, m.Receiver, m.FailedSender, m.TimeoutMs = id, n1, n2, v
		m.FailedSenderLacks, m.NoCopy = kind&0x20 != 0, kind&0x40 != 0
	case *messages.CancelLocate:
		m.ObjectId, m.Receiver = id, n1
	case *messages.FetchDone:
		m.ObjectId, m.Receiver, m.Sender, m.Size = id, n1, n2, v
		m.Epoch = uint64(v)
	case *messages.FetchAborted:
		m.ObjectId, m.Receiver, m.Sender, m.Attempt = id, n1, n2, uint64(v)
	case *messages.DeleteObject:
		m.ObjectId = id
	case *messages.Tombstones:
		m.ObjectIds = append(m.ObjectIds, id, "")
	case *messages.Subscribe:
		m.ObjectId, m.Subscriber = id, n1
		m.LocatedBefore = kind&0x20 != 0
	case *messages.Unsubscribe:
		m.ObjectId = id
	case *messages.QueryObject:
		m.ObjectId, m.TimeoutMs, m.Wait = id, v, kind&0x20 != 0
	case *messages.ListObjects:
		m.Limit = int32(v)
	case *messages.ReleaseTarget:
		m.ReduceId, m.TargetId = "a#c.n", id
	case *messages.StartReduce:
		m.Reduce = &messages.Reduce{TargetId: id}
		m.CallId = "c"
	}
	return m
}

// stepTable hands m to the table as its shard does, with requester the
// reply target, and checks what comes back.
func stepTable(t *testing.T, tb *LocationTable, m proto.Message, requester any, now time.Time) outbox.Box {
	var out outbox.Box
	switch m := m.(type) {
	case *messages.CreateObject:
		out = tb.onCreate(m, requester)
	case *messages.PublishLocation:
		out = tb.onPublish(m)
	case *messages.UnpublishLocation:
		out = tb.onUnpublish(m)
	case *messages.ReportLost:
		out = tb.onReportLost(m, requester)
	case *messages.Locate:
		out = tb.onLocate(m, requester, now)
	case *messages.CancelLocate:
		out = tb.onCancelLocate(m)
	case *messages.FetchDone:
		out = tb.onFetchDone(m)
	case *messages.FetchAborted:
		out = tb.onFetchAborted(m)
	case *messages.DeleteObject:
		out = tb.onDelete(m, requester)
	case *messages.Tombstones:
		out = tb.onApplyTombstones(m)
	case *messages.Subscribe:
		out = tb.onSubscribe(m, fmt.Sprint(requester), requester)
	case *messages.Unsubscribe:
		out = tb.onUnsubscribe(m, fmt.Sprint(requester))
	case *messages.QueryObject:
		out = tb.onQuery(m, requester, now)
	case *messages.ListObjects:
		if r := tb.List(m); r == nil {
			t.Fatalf("List(%v) answered nil", m)
		}
	case *messages.ReleaseTarget:
		out = tb.onRelease(m)
	case *messages.StartReduce:
		_, _ = tb.Reserve(m.GetReduce().GetTargetId(), directoryReduceID(m))
	}
	for _, s := range out.Sends {
		if s.Msg == nil || s.To == nil {
			t.Fatalf("%T %v: a send of %v to %v", m, m, s.Msg, s.To)
		}
		if n, ok := s.To.(*messages.NodeRef); ok && !nodeOK(n) {
			t.Fatalf("%T %v: a send of %v to a node without an id", m, m, s.Msg)
		}
		if e, ok := replyError(s.Msg); ok && e != nil && e.GetCode() == messages.ErrorCode_INTERNAL {
			t.Fatalf("%T %v: answered INTERNAL: %v", m, m, e)
		}
		// A size the table hands on is one some node will allocate.
		switch r := s.Msg.(type) {
		case *messages.LocateReply:
			if r.GetSize() < 0 {
				t.Fatalf("%T %v: answered a negative size: %v", m, m, r)
			}
		case *messages.LocationUpdate:
			if r.GetSize() < 0 {
				t.Fatalf("%T %v: told a subscriber a negative size: %v", m, m, r)
			}
		}
	}
	return out
}

func directoryReduceID(m *messages.StartReduce) string {
	return ReduceID(m.GetReduce().GetTargetId(), m.GetCallId(), "n")
}

// replyError is the error an answer carries, if it is one that can.
func replyError(m proto.Message) (*messages.Error, bool) {
	switch r := m.(type) {
	case *messages.CreateObjectReply:
		return r.GetError(), true
	case *messages.LocateReply:
		return r.GetError(), true
	case *messages.ObjectInfo:
		return r.GetError(), true
	case *messages.DeleteObjectReply:
		return r.GetError(), true
	case *messages.ReportLostReply:
		return r.GetError(), true
	}
	return nil, false
}

// A peer can send the directory any of its messages with any fields: no
// sequence of them panics the table, none is answered INTERNAL, and a
// well-formed Put and Get of a fresh id still work after them (the table
// stays consistent).
func FuzzLocationTable(f *testing.F) {
	good := func(ms ...proto.Message) []byte {
		var b []byte
		for _, m := range ms {
			raw, _ := proto.Marshal(m)
			kind := map[string]byte{"CreateObject": 0, "PublishLocation": 1, "Locate": 4, "FetchDone": 6, "DeleteObject": 8, "Subscribe": 10}[string(m.ProtoReflect().Descriptor().Name())]
			b = append(b, kind, byte(len(raw)))
			b = append(b, raw...)
		}
		return b
	}
	f.Add(good(&messages.CreateObject{ObjectId: "a", Size: 1 << 20, Creator: node(0)},
		&messages.PublishLocation{ObjectId: "a", Node: node(0), State: messages.LocationState_COMPLETE, Size: 1 << 20, Creator: true},
		&messages.Locate{ObjectId: "a", Receiver: node(1), TimeoutMs: 1000},
		&messages.FetchDone{ObjectId: "a", Receiver: node(1), Sender: node(0), Size: 1 << 20},
		&messages.Subscribe{ObjectId: "a"},
		&messages.DeleteObject{ObjectId: "a"}))
	f.Add(good(&messages.Locate{ObjectId: "b", Receiver: node(2), TimeoutMs: 5},
		&messages.CreateObject{ObjectId: "b", Size: 3, Creator: node(1), HasInline: true, InlineData: []byte("abc")}))
	f.Add([]byte{0x10, 0, 1, 0, 2, 3, 0x14, 0, 1, 1, 0, 1, 0x36, 0, 1, 2, 1, 1})
	f.Add([]byte{0x30, 0, 0, 0, 0, 4, 0x71, 0, 0, 0, 0, 4, 0xf4, 0, 0, 1, 3, 2, 0x1f, 0, 0, 0, 0, 0, 0x10, 0, 0, 6, 0, 3})
	f.Fuzz(func(t *testing.T, data []byte) {
		cfg := TableConfig{InlineLimit: 64, TombstoneLimit: 8, TransferLogLimit: 4, MaxObjectIDLen: 4096}
		if len(data)%2 == 1 { // half the inputs run under a sender policy
			cfg.Senders = creatorOnly
		}
		tb := NewLocationTable(cfg)
		in := testutil.NewFuzzInput(data)
		now := t0
		for i := 0; in.More() && i < 64; i++ {
			m := tableMessage(in)
			stepTable(t, tb, m, replyTo(fmt.Sprintf("p%d", in.Byte()%3)), now)
			switch in.Byte() % 4 {
			case 0:
				now = now.Add(time.Second)
				tb.onTick(now)
			case 1:
				tb.onIncarnationFailed(fmt.Sprintf("n%d", in.Byte()%3), "")
			}
		}
		for id, e := range tb.entries {
			if ValidateObjectID(id, tb.cfg.MaxObjectIDLen) != nil || (e.known && e.size < 0) {
				t.Fatalf("an entry no request can name, or of a negative size: %q (%d bytes)", id, e.size)
			}
		}
		// The next good request still works.
		create(t, tb, "fresh", 1<<20, 0)
		tb.onPublish(&messages.PublishLocation{ObjectId: "fresh", Node: node(0), State: messages.LocationState_COMPLETE, Size: 1 << 20, Creator: true})
		r := locateReply(t, locate(tb, "fresh", 1, now), replyTo("r1"))
		if r.GetError() != nil || r.GetSender().GetNodeId() != "n0" || r.GetSize() != 1<<20 {
			t.Fatalf("a good Locate after the fuzzed requests: %v", r)
		}
		// A hostile request gets an answer, INVALID_ARGUMENT when it names
		// no object or no receiver.
		for _, bad := range []*messages.Locate{{Receiver: node(1)}, {ObjectId: "fresh"}, {ObjectId: "fresh", Receiver: &messages.NodeRef{}}} {
			r := locateReply(t, tb.onLocate(bad, replyTo("bad"), now).Sends, replyTo("bad"))
			if r.GetError().GetCode() != messages.ErrorCode_INVALID_ARGUMENT {
				t.Fatalf("Locate %v answered %v, want INVALID_ARGUMENT", bad, r)
			}
		}
	})
}
