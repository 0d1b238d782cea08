package coordactor

import (
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/tracing"
	"github.com/hoplite-go/hoplite/messages"
)

// beginSpan starts the Reduce's span, the child of its caller's (a
// Reduce without trace_parent gets a root span, which records only when
// a provider is installed).
func (c *Coordinator) beginSpan() {
	req := c.start.GetReduce()
	name := tracing.Coordinate
	_, c.span = tracing.Start(req.GetTraceParent(), name, attribute.String("hoplite.reduce", c.id),
		attribute.String("hoplite.target", req.GetTargetId()), attribute.Int("hoplite.sources", len(req.GetSourceIds())),
		attribute.Int("hoplite.num_objects", int(req.GetNumObjects())), attribute.Bool("hoplite.all_reduce", req.GetAllReduce()))
}

// endSpan ends it with the answer's error (once).
func (c *Coordinator) endSpan(err error) {
	if c.span != nil {
		tracing.End(c.span, err)
		c.span = nil
	}
}

// spanEvent records a repair, a re-plan or another recovery event on the
// Reduce's span.
func (c *Coordinator) spanEvent(name string, attrs ...attribute.KeyValue) {
	if c.recording() {
		c.span.AddEvent(name, trace.WithAttributes(attrs...))
	}
}

// traced is a task with the Reduce's span as its parent, so that each
// tree position's span is the Reduce's child; untraced, the task itself.
// The task is copied, not changed: the core keeps its tasks and may send
// one again while a store node in this process reads it.
func (c *Coordinator) traced(m proto.Message) proto.Message {
	tp := tracing.ParentOf(c.span)
	if tp == "" {
		return m
	}
	switch t := m.(type) {
	case *messages.ReduceTask:
		if t.GetTraceParent() != tp {
			t = proto.CloneOf(t)
			t.TraceParent = tp
		}
		return t
	case *messages.ReduceTaskBatch:
		b := proto.CloneOf(t)
		for _, task := range b.GetTasks() {
			task.TraceParent = tp
		}
		if b.GetRing() != nil {
			b.Ring.TraceParent = tp // ExpandRing gives it every task
		}
		return b
	}
	return m
}

// eventName names an event for the span: its type.
func eventName(e any) string { return "hoplite." + actorutil.TypeName(e) }

// recording says whether the Reduce's span records (tracing is on): only
// then are its events and attributes worth building.
func (c *Coordinator) recording() bool { return c.span != nil && c.span.IsRecording() }
