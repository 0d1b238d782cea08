package storeproto

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/messages"
)

// fetchModel is the store a fuzzed fetch runs against: it applies the
// protocol's store operations as a store node does, with the checks the
// store makes.
type fetchModel struct{ st ObjectState }

func (m *fetchModel) apply(op StoreOp) StoreResult {
	switch op.Kind {
	case OpAllocate, OpStoreInline:
		if op.Size < 0 || op.Size > 1<<20 {
			return StoreResult{Err: messages.Errorf(messages.ErrorCode_CAPACITY, "size %d", op.Size)}
		}
		if m.st.Size >= 0 && m.st.Size != op.Size {
			return StoreResult{Err: messages.Errorf(messages.ErrorCode_INTERNAL, "allocated with %d, asked %d", m.st.Size, op.Size)}
		}
		m.st.Size = op.Size
		if op.Kind == OpStoreInline {
			if int64(len(op.Data)) != op.Size {
				return StoreResult{Err: messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "%d bytes for %d", len(op.Data), op.Size), AppendFailed: true}
			}
			m.st.Written, m.st.Done = op.Size, true
		}
	case OpRewind:
		m.st.Written = 0
	case OpComplete:
		m.st.Done = true
	case OpAbort:
		m.st.Err = op.Err
	}
	return StoreResult{}
}

// A fetch takes its directory shard's answers, and its senders' ends,
// from other processes: whatever a LocateReply's fields (negative and
// huge sizes, inline bytes that do not match, no sender or a foreign one,
// epochs and attempts at the limits, any error), the protocol does not
// panic, never streams from a negative offset or for a negative size,
// ends once, and says nothing after it ended.
func FuzzFetchProtocol(f *testing.F) {
	f.Add([]byte{0, 1, 0, 0, 0, 2, 3, 1, 1})
	f.Add([]byte{0, 0, 2, 1, 1, 4, 5, 0, 2, 0, 0, 3, 3, 1})
	f.Add([]byte{1, 0, 4, 4, 4, 0, 2, 2, 2, 0, 5, 5, 5, 6})
	f.Fuzz(func(t *testing.T, data []byte) {
		now := time.Unix(1_700_000_000, 0)
		self := &messages.NodeRef{NodeId: "me", Address: "h:1", ActorId: "me/store"}
		var p *FetchProtocol
		into := len(data) > 0 && data[0]%2 == 1
		if into {
			p = NewFetchIntoProtocol(FetchConfig{Self: self, Grace: time.Second}, "x", 64, now.Add(time.Minute))
		} else {
			p = NewFetchProtocol(FetchConfig{Self: self, Grace: time.Second}, "x", now.Add(time.Minute))
		}
		model := &fetchModel{st: ObjectState{Size: -1}}
		ended := false
		var check func(out FetchOutput)
		check = func(out FetchOutput) {
			if ended && (out.Done || out.Stream != nil || len(out.Sends) > 0 || out.Store.Kind != 0) {
				t.Fatalf("%v: output after the end: %+v", p, out)
			}
			if s := out.Stream; s != nil && (s.Offset < 0 || s.Size < 0 || s.Offset > max(s.Size, 0) || s.Sender.GetNodeId() == "") {
				t.Fatalf("%v: a stream at %d of %d bytes from %v", p, s.Offset, s.Size, s.Sender)
			}
			if out.Done && out.Err == nil && !ended {
				// Success only with the bytes: whole in the store, or in
				// the caller's buffer.
				switch {
				case into && !out.Local && (out.Size > 64 || out.Size < 0 || (len(out.Inline) > 0 && int64(len(out.Inline)) != out.Size)):
					t.Fatalf("%v: a fetch into 64 bytes succeeded with %d inline bytes for size %d", p, len(out.Inline), out.Size)
				case !into && !model.st.Done && !model.st.Pinned && model.st.Err == nil:
					t.Fatalf("%v: a fetch succeeded with the copy %+v", p, model.st)
				}
			}
			ended = ended || out.Done
			if out.Store.Kind != 0 && !ended {
				check(p.Step(now, FetchStoreDone{Result: model.apply(out.Store), State: model.st})) // as the shell does, at once
			}
		}
		check(p.Step(now, FetchStart{State: model.st}))
		senders := []*messages.NodeRef{nil, {NodeId: "peer", Address: "p:1", ActorId: "peer/store", DataAddress: "p:2"}, self, {}, {NodeId: strings.Repeat("n", 4097)}}
		sizes := []int64{8, -1, 0, 1 << 62, 64, 65}
		for i := 1; i+4 < len(data) && i < 256; i += 5 {
			c, v, s, a := data[i], data[i+1], data[i+2], data[i+3]
			now = now.Add(time.Duration(data[i+4]) * time.Millisecond)
			switch c % 6 {
			case 0, 1:
				loc := &messages.LocateReply{ObjectId: "x", Size: sizes[int(v)%len(sizes)], Sender: senders[int(s)%len(senders)],
					SenderState: messages.LocationState(a % 4), Epoch: uint64(a) << 40, Attempt: p.Attempt()}
				if a&0x10 != 0 {
					loc.Attempt = uint64(a)
				}
				if c&0x40 != 0 {
					loc.HasInline, loc.InlineData = true, make([]byte, int(v)%70)
				}
				if c&0x80 != 0 {
					loc.Error = messages.Errorf(messages.ErrorCode(a%13), "e")
				}
				check(p.Step(now, FetchLocated{Reply: proto.CloneOf(loc), State: model.st}))
			case 2:
				check(p.Step(now, FetchStreamEnded{Stream: p.Stream() - uint64(a%2), Err: messages.Errorf(messages.ErrorCode(v%13), "e"), State: model.st}))
			case 3:
				if into {
					check(p.Step(now, FetchIntoStreamEnded{Stream: p.Stream(), UpTo: int64(v), Err: nil}))
				} else {
					model.st.Written = min(int64(v), max(model.st.Size, 0))
					check(p.Step(now, FetchStreamEnded{Stream: p.Stream(), Err: nil, State: model.st}))
				}
			case 4:
				check(p.Step(time.Time{}, FetchSenderFailed{Node: senders[int(s)%len(senders)].GetNodeId()}))
			default:
				check(p.Step(now, FetchTimed{Timer: FetchTimer{Attempt: p.Attempt(), Kind: FetchTimerKind(v%3 + 1)}, State: model.st}))
			}
		}
		check(p.Step(time.Time{}, FetchStop{}))
		if !ended && !p.Done() {
			t.Fatalf("%v: Stop did not end the fetch", p)
		}
	})
}
