// Package spantest records the spans a test's calls make and asks them
// questions: the helpers the trace tests of the member and of its
// clients share.
package spantest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
)

// Install makes the global provider record into an in-memory exporter
// for the test, and puts the previous one back after.
func Install(t *testing.T) *tracetest.InMemoryExporter {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(tp)
	t.Cleanup(func() {
		otel.SetTracerProvider(prev)
		_ = tp.Shutdown(context.Background())
	})
	return exp
}

// Tree waits until want(spans) holds for the spans recorded so far
// (spans end on their own actors' time, some after the call returned),
// for 10 s at most, and fails the test naming what, want's error and
// the spans otherwise.
func Tree(t *testing.T, exp *tracetest.InMemoryExporter, what string, want func(tracetest.SpanStubs) error) tracetest.SpanStubs {
	t.Helper()
	end := time.Now().Add(10 * time.Second)
	for {
		spans := exp.GetSpans()
		err := want(spans)
		if err == nil {
			return spans
		}
		if time.Now().After(end) {
			var names []string
			for _, s := range spans {
				names = append(names, fmt.Sprintf("%s(%s<-%s)", s.Name, s.SpanContext.SpanID(), s.Parent.SpanID()))
			}
			t.Fatalf("%s: %v; spans recorded: %s", what, err, strings.Join(names, " "))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// ByName is the spans named name.
func ByName(spans tracetest.SpanStubs, name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// ChildrenOf is the spans named name whose parent is parent.
func ChildrenOf(spans tracetest.SpanStubs, parent tracetest.SpanStub, name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range ByName(spans, name) {
		if s.Parent.SpanID() == parent.SpanContext.SpanID() && s.SpanContext.TraceID() == parent.SpanContext.TraceID() {
			out = append(out, s)
		}
	}
	return out
}

// Attr is span s's attribute key (the zero Value if it has none).
func Attr(s tracetest.SpanStub, key string) attribute.Value {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}
