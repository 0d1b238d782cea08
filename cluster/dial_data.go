package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/member"
	"github.com/hoplite-go/hoplite/internal/membername"
	"github.com/hoplite-go/hoplite/internal/tracing"
	"github.com/hoplite-go/hoplite/internal/transport"
	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/storenode"
)

// dataChunk is the most a data frame of the client's streams carries:
// about 5 ms of a link of a few GB/s, as a member's streams of large
// objects use.
const dataChunk = 4 << 20

var _ storenode.DataPath = (*dataPath)(nil)

// dataAddress is the data address of the store node node, as the
// member handshakes reported it.
func (p *dataPath) dataAddress(node *actor.PID) (string, error) {
	p.c.ep.mu.Lock()
	addr := p.c.ep.data[member.PIDKey(node)]
	p.c.ep.mu.Unlock()
	if addr == "" {
		return "", messages.Errorf(messages.ErrorCode_UNAVAILABLE, "%s: no data address known", membername.Actor(node))
	}
	return addr, nil
}

// Put implements storenode.DataPath.
func (p *dataPath) Put(ctx context.Context, node *actor.PID, id string, data *storenode.PutData) (bool, error) {
	served, err := p.tcp.Serve(fmt.Sprintf("put-%d", p.seq.Add(1)), putSource{id: id, data: data})
	if err != nil {
		// Local, not the member's: failing over would not help.
		return false, messages.Errorf(messages.ErrorCode_RESOURCE_EXHAUSTED, "put of %q: the client cannot serve it on the data plane: %v", id, err)
	}
	defer p.tcp.Unserve(served)
	res, err := p.c.request(ctx, node, &messages.PutFrom{ObjectId: id, Size: data.Size(), SegmentSize: data.SegmentSize(), DataAddress: served, TimeoutMs: actorutil.TimeoutMs(ctx),
		TraceParent: tracing.Parent(ctx)})
	if err != nil {
		return false, err
	}
	r, ok := res.(*messages.PutReply)
	if !ok {
		return false, messages.Errorf(messages.ErrorCode_INTERNAL, "unexpected reply %s to PutFrom", actorutil.TypeName(res))
	}
	return !messages.IsUndeliveredBy(r.GetError(), node), messages.ErrOrNil(r.GetError())
}

// putSource serves the one object a Put sends (or its segments).
type putSource struct {
	id   string
	data *storenode.PutData
}

func (s putSource) OpenObject(ctx context.Context, name string) (transport.ObjectReader, error) {
	return s.data.Open(ctx, s.id, name)
}

// Get implements storenode.DataPath.
func (p *dataPath) Get(ctx context.Context, node *actor.PID, id string, sink storenode.Sink) (bool, error) {
	res, err := p.c.request(ctx, node, &messages.Get{ObjectId: id, Prefetch: true, TimeoutMs: actorutil.TimeoutMs(ctx), TraceParent: tracing.Parent(ctx)})
	if err != nil {
		return false, err
	}
	r, ok := res.(*messages.GetReply)
	if !ok {
		return false, messages.Errorf(messages.ErrorCode_INTERNAL, "unexpected reply %s to Get", actorutil.TypeName(res))
	}
	if e := r.GetError(); e != nil {
		return !messages.IsUndeliveredBy(e, node), e
	}
	addr, err := p.dataAddress(node)
	if err != nil {
		return false, err
	}
	s, err := p.tcp.Open(ctx, "", addr, id, sink.Offset(), dataChunk)
	if err != nil {
		return streamFailed(id, err)
	}
	defer s.Close()
	size := s.Size()
	if err := sink.Begin(size); err != nil {
		return true, err
	}
	for sink.Offset() < size {
		if b := sink.Buffer(); b != nil {
			var n int
			if n, err = s.NextInto(ctx, b); err == nil {
				sink.Advance(n)
			}
		} else {
			var chunk []byte
			if chunk, err = s.Next(ctx); err == nil {
				if err := sink.Write(chunk); err != nil {
					return true, err
				}
			}
		}
		if errors.Is(err, io.EOF) {
			err = messages.Errorf(messages.ErrorCode_UNAVAILABLE, "object %q: the stream from %s ended at %d of %d bytes", id, addr, sink.Offset(), size)
		}
		if err != nil {
			return streamFailed(id, err)
		}
	}
	return true, nil
}

// streamFailed classifies a failed stream from the member's store for
// the Client's retry: a copy that left the store between the Get's
// answer and the stream (evicted) is asked for again there, as a race;
// an unreachable data plane moves to another member.
func streamFailed(id string, err error) (bool, error) {
	e := messages.AsError(err)
	if e.GetCode() == messages.ErrorCode_NOT_FOUND {
		return true, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "object %q left the member's store before its stream opened: %s", id, e.GetMessage())
	}
	return false, e
}
