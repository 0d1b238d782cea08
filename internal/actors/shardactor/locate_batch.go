package shardactor

import (
	"context"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/internal/transport"
	"github.com/hoplite-go/hoplite/messages"
)

// ServeLocateBatch answers a Locate deputy's LocateBatch that arrived on
// the data plane (messages.ControlLocateBatch), from the published
// inline objects of the object's shard on this member: one copy of the
// bytes for every Locate it answers (inlineindex.Object.AnswerBatch), on
// the connection's goroutine. The Locates it does not answer so (the
// object not published here, its uplink's budget spent, a Locate the
// table must see) are listed as direct: the deputy sends each alone, as
// a Locate sent straight, which ServeLocate answers. A batch that is not
// well formed (empty, over messages.MaxLocateBatch, of several objects)
// is INVALID_ARGUMENT; a shard not on this member is UNAVAILABLE.
func ServeLocateBatch(system *actor.ActorSystem, shardFor func(id string) *actor.PID, req []byte) ([]byte, error) {
	var b messages.LocateBatch
	if err := proto.Unmarshal(req, &b); err != nil {
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "malformed LocateBatch: %v", err)
	}
	ls := b.GetLocates()
	if len(ls) == 0 || len(ls) > messages.MaxLocateBatch {
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "a LocateBatch of %d Locates: want 1..%d", len(ls), messages.MaxLocateBatch)
	}
	id := ls[0].GetObjectId()
	if id == "" {
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "a LocateBatch without an object id")
	}
	for _, l := range ls[1:] {
		if l.GetObjectId() != id {
			return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "a LocateBatch of %q and %q: want one object", id, l.GetObjectId())
		}
	}
	pid := shardFor(id)
	if pid == nil || pid.GetAddress() != system.Address() {
		return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "the directory shard of %q is not on this member (%s)", id, pid.GetAddress())
	}
	o := lookupInline(pid).Lookup(id)
	answered := o.AnswerBatch(ls, time.Now())
	reply := &messages.LocateBatchReply{Replies: make([]*messages.LocateReply, len(ls))}
	for i, l := range ls {
		if !answered[i] {
			reply.Direct = append(reply.Direct, uint32(i))
			reply.Replies[i] = &messages.LocateReply{}
			continue
		}
		quickLocates.Add(1)
		reply.InlineData = o.Data
		reply.Replies[i] = &messages.LocateReply{ObjectId: o.ID, Size: o.Size, Fingerprint: o.Fingerprint, HasInline: true,
			Attempt: l.GetAttempt()}
	}
	out, err := proto.Marshal(reply)
	if err != nil {
		return nil, messages.Errorf(messages.ErrorCode_INTERNAL, "encode LocateBatchReply: %v", err)
	}
	return out, nil
}

// CallLocateBatch sends a Locate deputy's batch ls (Locates of one
// object) to the member whose data address is addr (the other end is
// ServeLocateBatch). replies[i] answers ls[i], with the inline bytes set
// (shared, read-only, among the answers); direct[i] says ls[i] was not
// answered and must be asked alone. An answer that does not match its
// batch is UNAVAILABLE, as a malformed LocateReply is.
func CallLocateBatch(ctx context.Context, caller transport.Caller, addr string, ls []*messages.Locate) (replies []*messages.LocateReply, direct []bool, err error) {
	req, err := proto.Marshal(&messages.LocateBatch{Locates: ls})
	if err != nil {
		return nil, nil, messages.Errorf(messages.ErrorCode_INTERNAL, "encode LocateBatch: %v", err)
	}
	b, err := caller.Call(ctx, addr, messages.ControlLocateBatch, req)
	if err != nil {
		return nil, nil, err
	}
	return decodeLocateBatchReply(b, ls)
}

// decodeLocateBatchReply decodes b, the answer to the batch ls, and
// checks it answers ls: one reply a Locate, each of its object and
// attempt, direct indexes in range, an inline answer's bytes of its size.
func decodeLocateBatchReply(b []byte, ls []*messages.Locate) (replies []*messages.LocateReply, direct []bool, err error) {
	var r messages.LocateBatchReply
	if err := proto.Unmarshal(b, &r); err != nil {
		return nil, nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "malformed LocateBatchReply: %v", err)
	}
	if len(r.GetReplies()) != len(ls) {
		return nil, nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "a LocateBatchReply of %d answers to %d Locates", len(r.GetReplies()), len(ls))
	}
	direct = make([]bool, len(ls))
	for _, i := range r.GetDirect() {
		if int(i) >= len(ls) || direct[i] {
			return nil, nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "a LocateBatchReply lists Locate %d as direct, of %d", i, len(ls))
		}
		direct[i] = true
	}
	replies = r.GetReplies()
	for i, rep := range replies {
		if direct[i] {
			replies[i] = nil
			continue
		}
		if rep.GetObjectId() != ls[i].GetObjectId() || rep.GetAttempt() != ls[i].GetAttempt() || !rep.GetHasInline() ||
			len(rep.GetInlineData()) != 0 || rep.GetSize() != int64(len(r.GetInlineData())) {
			return nil, nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "a LocateBatchReply's answer %d does not answer its Locate of %q", i, ls[i].GetObjectId())
		}
		rep.InlineData = r.GetInlineData()
	}
	return replies, direct, nil
}
