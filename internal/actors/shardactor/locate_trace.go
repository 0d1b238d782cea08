package shardactor

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/hoplite-go/hoplite/internal/tracing"
	"github.com/hoplite-go/hoplite/messages"
)

// maxLocateSpans bounds the traced Locates a shard waits to answer; one
// more is traced only up to its receipt.
const maxLocateSpans = 4096

// locateKey names a Locate by what its answer echoes.
type locateKey struct {
	object  string
	attempt uint64
}

// locateSpans are the spans of the traced Locates a shard has not
// answered yet: a Locate parked until a sender is free ends its span
// when its answer goes, naming the sender it got.
type locateSpans map[locateKey]locateSpan

// locateSpan is a traced Locate's span and its receiver (a CancelLocate
// names the object and the receiver).
type locateSpan struct {
	span     trace.Span
	receiver string
	replyTo  any // an AbandonLocate names it
}

// traceLocate starts the span of a traced Locate (one without trace_parent
// costs nothing).
func (s *Shard) traceLocate(m *messages.Locate, replyTo any) {
	if m.GetTraceParent() == "" {
		return
	}
	_, span := tracing.Start(m.GetTraceParent(), tracing.Locate, attribute.String("hoplite.object", m.GetObjectId()),
		attribute.String("hoplite.receiver", m.GetReceiver().GetNodeId()), attribute.Int64("hoplite.attempt", int64(m.GetAttempt())))
	if len(s.locates) >= maxLocateSpans {
		span.SetAttributes(attribute.Bool("hoplite.untracked", true))
		span.End()
		return
	}
	if s.locates == nil {
		s.locates = locateSpans{}
	}
	k := locateKey{m.GetObjectId(), m.GetAttempt()}
	if old, ok := s.locates[k]; ok {
		old.span.End()
	}
	s.locates[k] = locateSpan{span, m.GetReceiver().GetNodeId(), replyTo}
}

// tracedAnswer ends the span of the Locate msg answers, if it is an
// answer to a traced one.
func (s *Shard) tracedAnswer(msg any) {
	if len(s.locates) == 0 {
		return
	}
	r, ok := msg.(*messages.LocateReply)
	if !ok {
		return
	}
	k := locateKey{r.GetObjectId(), r.GetAttempt()}
	open, ok := s.locates[k]
	if !ok {
		return
	}
	span := open.span
	delete(s.locates, k)
	if snd := r.GetSender(); snd != nil {
		span.SetAttributes(attribute.String("hoplite.sender", snd.GetNodeId()))
	}
	span.SetAttributes(attribute.Bool("hoplite.inline", r.GetHasInline()))
	tracing.End(span, messages.ErrOrNil(r.GetError()))
}

// endLocateSpans ends the open Locate spans of object by receiver ("":
// every one): the shard stops, or the receiver withdrew its Locate.
func (s *Shard) endLocateSpans(object, receiver, why string) {
	for k, open := range s.locates {
		if object == "" || k.object == object && open.receiver == receiver {
			open.span.SetAttributes(attribute.String("hoplite.ended", why))
			open.span.End()
			delete(s.locates, k)
		}
	}
}

// abandonLocateSpans ends the spans of the Locates of object whose
// caller hung up.
func (s *Shard) abandonLocateSpans(object string, replyTo any) {
	for k, open := range s.locates {
		if k.object == object && open.replyTo == replyTo {
			open.span.SetAttributes(attribute.String("hoplite.ended", "abandoned"))
			open.span.End()
			delete(s.locates, k)
		}
	}
}
