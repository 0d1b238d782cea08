package shardactor

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/internal/inlineindex"
	"github.com/hoplite-go/hoplite/messages"
)

// inlineIndexes holds the inlineindex.Index of every running shard of this
// process, by its PID: a shard registers its table's when the table
// starts and withdraws it, cleared, before it stops serving, so a Locate
// that finds no index here asks the shard. (A map of a comparable key
// under a lock: a lookup builds no key string.)
var inlineIndexes = struct {
	sync.RWMutex
	m map[pidKey]*inlineindex.Index
}{m: map[pidKey]*inlineindex.Index{}}

type pidKey struct{ address, id string }

func keyOf(pid *actor.PID) pidKey { return pidKey{pid.GetAddress(), pid.GetId()} }

func lookupInline(pid *actor.PID) *inlineindex.Index {
	inlineIndexes.RLock()
	defer inlineIndexes.RUnlock()
	return inlineIndexes.m[keyOf(pid)]
}

// quickLocates counts the Locates answered from an index (QuickLocates).
var quickLocates atomic.Uint64

// QuickLocates is how many Locates this process's shards answered from their
// tables' inlineindex.Index, without the shard's actor: for tests and
// benchmarks that check the path was taken.
func QuickLocates() uint64 { return quickLocates.Load() }

// openInline makes the index of the table the shard is about to start
// and registers it.
func (s *Shard) openInline(self *actor.PID) *inlineindex.Index {
	x := inlineindex.New()
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

// quickLocate answers l for the shard pid of this process from its
// table's published inline objects, without the shard: the bytes, with
// the receiver's copy recorded for the table (InlineObject.Answer), as
// the table's own inline answer (inlineReply). nil: the table answers l
// (the object is not published, l names a sender that failed it or no
// receiver, the uplink's budget is spent, or the shard is not running).
func quickLocate(pid *actor.PID, l *messages.Locate) *messages.LocateReply {
	r := lookupInline(pid).AnswerLocate(l, time.Now())
	if r != nil {
		quickLocates.Add(1)
	}
	return r
}

// TryServeLocate answers an encoded Locate that arrived on the data plane
// if the object's shard publishes it (quickLocate): on the connection's
// goroutine, without the shard, a context or a wait. ok false: for
// ServeLocate.
//
// The reply is appended to dst[:0] (protobuf's encoding of the
// LocateReply, written by hand: proto.Marshal would allocate a buffer
// for each answer and copy the object's bytes into it).
//
// Only the object id is read before the index is asked: a Locate of
// anything else (a streamed object's, every one ServeLocate answers) is
// decoded once, there, not twice.
func TryServeLocate(system *actor.ActorSystem, shardFor func(id string) *actor.PID, req, dst []byte) (reply []byte, ok bool) {
	id, ok := locateObjectID(req)
	if !ok || id == "" {
		return nil, false // ServeLocate's to refuse
	}
	pid := shardFor(id)
	if pid == nil || pid.GetAddress() != system.Address() {
		return nil, false
	}
	o := lookupInline(pid).Lookup(id)
	if o == nil {
		return nil, false
	}
	var l messages.Locate
	if proto.Unmarshal(req, &l) != nil {
		return nil, false
	}
	r := o.AnswerLocate(&l, time.Now())
	if r == nil {
		return nil, false
	}
	quickLocates.Add(1)
	return appendInlineReply(dst[:0], r), true
}

// locateObjectID reads an encoded Locate's object_id as protobuf would
// (the last occurrence wins) without decoding the rest; ok false: b is
// not well-formed protobuf.
func locateObjectID(b []byte) (id string, ok bool) {
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return "", false
		}
		b = b[n:]
		if num == 1 && typ == protowire.BytesType {
			v, m := protowire.ConsumeString(b)
			if m < 0 {
				return "", false
			}
			id, b = v, b[m:]
			continue
		}
		m := protowire.ConsumeFieldValue(num, typ, b)
		if m < 0 {
			return "", false
		}
		b = b[m:]
	}
	return id, true
}

// appendInlineReply appends r's encoding to b: what proto.Marshal makes of
// an answer from the index (object_id, size, fingerprint, has_inline, inline_data
// and attempt; zero values omitted, fields in number order).
func appendInlineReply(b []byte, r *messages.LocateReply) []byte {
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
