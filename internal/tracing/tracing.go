// Package tracing carries OpenTelemetry spans through Hoplite's actor
// messages: a request's trace_parent field holds the W3C traceparent of
// the span that sent it, and the actor that serves it starts its own span
// as that span's child. Spans go to the global TracerProvider, a no-op
// until a program (or `hoplite node --otlp-endpoint`) installs one, so
// tracing costs nothing when it is off.
package tracing

import (
	"context"
	"reflect"
	"slices"
	"sync/atomic"

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
func Tracer() trace.Tracer { return current().tracer }

// Off says no program installed a TracerProvider: spans started now
// record nothing and carry only their parent's context. Hoplite's own
// spans without a parent are then one shared no-op span, which costs
// no allocation; through the global no-op tracer each cost three or
// four, on every Get, Put and Delete.
func Off() bool { return current().off }

// providerState is what Hoplite derived from one global provider.
type providerState struct {
	provider trace.TracerProvider
	tracer   trace.Tracer
	off      bool
}

var state atomic.Pointer[providerState]

// current is the state of the global provider now: it is derived again
// whenever the global provider changes (otel.SetTracerProvider).
func current() *providerState {
	p := otel.GetTracerProvider()
	if s := state.Load(); s != nil && s.provider == p {
		return s
	}
	t := p.Tracer(Scope)
	s := &providerState{provider: p, tracer: t, off: isGlobalDefault(p) && isGlobalDefault(t)}
	// A provider of a type that cannot be compared is derived every call
	// (comparing it with == would panic).
	if reflect.TypeOf(p).Comparable() {
		state.Store(s)
	}
	return s
}

// isGlobalDefault says v is otel's own placeholder (a provider or tracer
// of its internal global package): a placeholder provider whose tracer is
// a placeholder too has no delegate, so nothing is installed. A provider
// installed and later replaced by the placeholder again delegates to the
// first, and hands out that provider's tracers.
func isGlobalDefault(v any) bool {
	t := reflect.TypeOf(v)
	return t != nil && t.Kind() == reflect.Pointer && t.Elem().PkgPath() == "go.opentelemetry.io/otel/internal/global"
}

// noSpan is the shared no-op span (trace's own, which has no fields).
var noSpan = trace.SpanFromContext(context.Background())

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
	s := current()
	if parent == "" && s.off {
		return context.Background(), noSpan
	}
	// A clone, so that attrs stays on the caller's stack when tracing is off.
	return s.tracer.Start(FromParent(context.Background(), parent), name, trace.WithAttributes(slices.Clone(attrs)...))
}

// Child starts a span named name under span (a span this process holds).
func Child(span trace.Span, name string, attrs ...attribute.KeyValue) trace.Span {
	s := current()
	if s.off && (span == nil || !span.SpanContext().IsValid()) {
		return noSpan
	}
	_, c := s.tracer.Start(trace.ContextWithSpan(context.Background(), span), name, trace.WithAttributes(slices.Clone(attrs)...))
	return c
}

// StartIn starts a span named name as the child of ctx's span, with
// opts; with tracing off and no span in ctx it is the shared no-op span
// and ctx unchanged.
func StartIn(ctx context.Context, name string, opts ...trace.SpanStartOption) (context.Context, trace.Span) {
	s := current()
	if s.off && !trace.SpanContextFromContext(ctx).IsValid() {
		return ctx, noSpan
	}
	return s.tracer.Start(ctx, name, slices.Clone(opts)...)
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
