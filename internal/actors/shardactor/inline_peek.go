package shardactor

import (
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"sync"
	"sync/atomic"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/messages"
)

// inlineIndexes holds the InlineIndex of every running shard of this
// process, by its PID: a shard registers its table's when the table
// starts and withdraws it, cleared, before it stops serving, so a Locate
// that finds no index here asks the shard. (A map of a comparable key
// under a lock: a lookup builds no key string.)
var inlineIndexes = struct {
	sync.RWMutex
	m map[pidKey]*directory.InlineIndex
}{m: map[pidKey]*directory.InlineIndex{}}

type pidKey struct{ address, id string }

func keyOf(pid *actor.PID) pidKey { return pidKey{pid.GetAddress(), pid.GetId()} }

func lookupInline(pid *actor.PID) *directory.InlineIndex {
	inlineIndexes.RLock()
	defer inlineIndexes.RUnlock()
	return inlineIndexes.m[keyOf(pid)]
}

// peeks counts the Locates answered from an index (Peeked).
var peeks atomic.Uint64

// Peeked is how many inline_only Locates this process answered with the
// bytes from a shard's InlineIndex, without the shard: for tests and
// benchmarks that check the path was taken.
func Peeked() uint64 { return peeks.Load() }

// openInline makes the index of the table the shard is about to start
// and registers it.
func (s *Shard) openInline(self *actor.PID) *directory.InlineIndex {
	x := directory.NewInlineIndex()
	s.inline = x
	inlineIndexes.Lock()
	inlineIndexes.m[keyOf(self)] = x
	inlineIndexes.Unlock()
	return x
}

// closeInline withdraws the table's index: the table stops serving.
// Called first when the shard stops or restarts, before any answer or
// hand-over of that turn.
func (s *Shard) closeInline(self *actor.PID) {
	if s.inline == nil {
		return
	}
	inlineIndexes.Lock()
	if inlineIndexes.m[keyOf(self)] == s.inline {
		delete(inlineIndexes.m, keyOf(self))
	}
	inlineIndexes.Unlock()
	s.inline.Close()
	s.inline = nil
}

// peekInline answers an inline_only Locate for the shard pid of this
// process from its table's index: the bytes if the table publishes id
// and its uplink has room for them, else a reply with neither bytes nor
// error (the receiver asks the table in full). Nothing is recorded and
// nothing parks.
func peekInline(pid *actor.PID, l *messages.Locate) *messages.LocateReply {
	miss := &messages.LocateReply{ObjectId: l.GetObjectId(), Attempt: l.GetAttempt()}
	o := lookupInline(pid).Lookup(l.GetObjectId())
	if o == nil || !o.Answer(time.Now()) {
		return miss
	}
	peeks.Add(1)
	return &messages.LocateReply{ObjectId: o.ID, Size: o.Size, Fingerprint: o.Fingerprint, HasInline: true,
		InlineData: o.Data, Attempt: l.GetAttempt()}
}

// inlineOnlyField is Locate.inline_only's field number.
const inlineOnlyField = 10

// asksInlineOnly reports whether the encoded Locate b sets inline_only,
// without decoding it: a request that does not is left for ServeLocate.
// A malformed b is ServeLocate's to refuse.
func asksInlineOnly(b []byte) bool {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return false
		}
		b = b[n:]
		if num == inlineOnlyField && typ == protowire.VarintType {
			v, m := protowire.ConsumeVarint(b)
			return m > 0 && v != 0
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return false
		}
		b = b[m:]
	}
	return false
}

// Quick says how TryServeLocate took a Locate.
type Quick int

const (
	// NotQuick: not an inline_only Locate; ServeLocate answers it.
	NotQuick Quick = iota
	// QuickInline: answered with the inline bytes.
	QuickInline
	// QuickNotInline: answered with neither bytes nor error (the asker
	// asks in full), or refused (the error says why).
	QuickNotInline
)

// TryServeLocate answers an encoded Locate that arrived on the data plane
// if it asks only for published inline bytes (inline_only): on the
// connection's goroutine, without the shard, a context or a wait, as
// ServeLocate would. NotQuick: any other Locate, for ServeLocate.
//
// The reply is appended to dst[:0] (protobuf's encoding of the
// LocateReply, written by hand: proto.Marshal would allocate a buffer
// for each answer and copy the object's bytes into it).
func TryServeLocate(system *actor.ActorSystem, shardFor func(id string) *actor.PID, req, dst []byte) (reply []byte, how Quick, err error) {
	if !asksInlineOnly(req) {
		return nil, NotQuick, nil
	}
	var l messages.Locate
	if err := proto.Unmarshal(req, &l); err != nil {
		return nil, QuickNotInline, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "malformed Locate on the data plane: %v", err)
	}
	if !l.GetInlineOnly() {
		return nil, NotQuick, nil // the field repeated, the last one unset: as protobuf reads it
	}
	id := l.GetObjectId()
	if id == "" {
		return nil, QuickNotInline, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "Locate without an object id")
	}
	pid := shardFor(id)
	if pid == nil || pid.GetAddress() != system.Address() {
		return nil, QuickNotInline, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "the directory shard of %q is not on this member (%s)", id, pid.GetAddress())
	}
	r := peekInline(pid, &l)
	how = QuickNotInline
	if r.GetHasInline() {
		how = QuickInline
	}
	return appendPeekReply(dst[:0], r), how, nil
}

// appendPeekReply appends r's encoding to b: what proto.Marshal makes of
// a peek's answer (object_id, size, fingerprint, has_inline, inline_data
// and attempt; zero values omitted, fields in number order).
func appendPeekReply(b []byte, r *messages.LocateReply) []byte {
	if v := r.GetObjectId(); v != "" {
		b = protowire.AppendTag(b, 1, protowire.BytesType)
		b = protowire.AppendString(b, v)
	}
	if v := r.GetSize(); v != 0 {
		b = protowire.AppendTag(b, 3, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(v))
	}
	if v := r.GetFingerprint(); v != 0 {
		b = protowire.AppendTag(b, 4, protowire.Fixed64Type)
		b = protowire.AppendFixed64(b, v)
	}
	if r.GetHasInline() {
		b = protowire.AppendTag(b, 5, protowire.VarintType)
		b = protowire.AppendVarint(b, 1)
	}
	if v := r.GetInlineData(); len(v) > 0 {
		b = protowire.AppendTag(b, inlineDataField, protowire.BytesType)
		b = protowire.AppendBytes(b, v)
	}
	if v := r.GetAttempt(); v != 0 {
		b = protowire.AppendTag(b, 10, protowire.VarintType)
		b = protowire.AppendVarint(b, v)
	}
	return b
}
