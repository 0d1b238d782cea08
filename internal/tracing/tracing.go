// Package tracing carries OpenTelemetry spans through Hoplite's actor
// messages: a request's trace_parent field holds the W3C traceparent of
// the span that sent it, and the actor that serves it starts its own span
// as that span's child. Spans go to the global TracerProvider, a no-op
// until a program (or `hoplite node --otlp-endpoint`) installs one, so
// tracing costs nothing when it is off.
package tracing

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// Scope is the instrumentation scope of every Hoplite span.
const Scope = "github.com/hoplite-go/hoplite"

// Span names, one per kind of work.
const (
	Get         = "hoplite.Get"
	Put         = "hoplite.Put"
	Delete      = "hoplite.Delete"
	Reduce      = "hoplite.Reduce"
	AllReduce   = "hoplite.AllReduce"
	Fetch       = "hoplite.fetch"    // a store node's fetch of its copy
	Locate      = "hoplite.Locate"   // a directory shard's answer to a Locate
	Transfer    = "hoplite.transfer" // one stream from one sender
	Coordinate  = "hoplite.reduce.coordinate"
	Position    = "hoplite.reduce.position" // one position of a Reduce's tree
	RepairEvent = "repair"                  // an event on the coordinator's span
)

// traceParent is the W3C header's name, the carrier's one key.
const traceParent = "traceparent"

var propagator = propagation.TraceContext{}

// Tracer is Hoplite's tracer from the global provider.
func Tracer() trace.Tracer { return otel.Tracer(Scope) }

// Parent is the traceparent of ctx's span, or "" when ctx has no
// sampled span (nothing to continue: the message goes untraced).
func Parent(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return ""
	}
	c := propagation.MapCarrier{}
	propagator.Inject(ctx, c)
	return c[traceParent]
}

// FromParent is a context whose remote span is the one parent names; a
// malformed or empty parent gives ctx unchanged (a hostile field costs a
// parse, never an error).
func FromParent(ctx context.Context, parent string) context.Context {
	if parent == "" || len(parent) > 128 {
		return ctx
	}
	return propagator.Extract(ctx, propagation.MapCarrier{traceParent: parent})
}

// Start starts a span named name as the child of parent (a traceparent
// from a message). Without a parent and a recording provider the span is
// a root; with the default no-op provider it records nothing.
func Start(parent, name string, attrs ...attribute.KeyValue) (context.Context, trace.Span) {
	return Tracer().Start(FromParent(context.Background(), parent), name, trace.WithAttributes(attrs...))
}

// Child starts a span named name under span (a span this process holds).
func Child(span trace.Span, name string, attrs ...attribute.KeyValue) trace.Span {
	_, s := Tracer().Start(trace.ContextWithSpan(context.Background(), span), name, trace.WithAttributes(attrs...))
	return s
}

// ParentOf is span's traceparent, for the messages it sends ("" when the
// span is not recording: untraced work sends no field).
func ParentOf(span trace.Span) string {
	if span == nil || !span.SpanContext().IsValid() {
		return ""
	}
	return Parent(trace.ContextWithSpan(context.Background(), span))
}

// End ends span, recording err (nil: success) on it; a nil span is none.
func End(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil {
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	}
	span.End()
}
