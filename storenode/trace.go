package storenode

import (
	"context"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/hoplite-go/hoplite/internal/tracing"
)

// startSpan starts a client call's span, the child of ctx's span: the
// store node, the directory and a Reduce's coordinator continue it from
// the trace_parent the call's message carries. size < 0: not known.
func startSpan(ctx context.Context, name, id string, size int64) (context.Context, trace.Span) {
	ctx, span := tracing.StartIn(ctx, name, clientKind)
	if span.IsRecording() { // attributes cost allocations: only when traced
		span.SetAttributes(attribute.String("hoplite.object", id))
		if size >= 0 {
			span.SetAttributes(attribute.Int64("hoplite.size", size))
		}
	}
	return ctx, span
}

// clientKind marks a client call's span, made once.
var clientKind = trace.WithSpanKind(trace.SpanKindClient)
