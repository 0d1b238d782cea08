package cluster

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

	"github.com/hoplite-go/hoplite/internal/tracing"
)

// installTracer makes the global provider record into an in-memory
// exporter for the test, and puts the no-op one back after.
func installTracer(t *testing.T) *tracetest.InMemoryExporter {
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

// spanTree waits until want(spans) holds for the spans recorded so far
// (spans end on their own actors' time, some after the call returned).
func spanTree(t *testing.T, exp *tracetest.InMemoryExporter, what string, want func(tracetest.SpanStubs) error) tracetest.SpanStubs {
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

// byName is the spans named name.
func byName(spans tracetest.SpanStubs, name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range spans {
		if s.Name == name {
			out = append(out, s)
		}
	}
	return out
}

// childrenOf is the spans named name whose parent is parent.
func childrenOf(spans tracetest.SpanStubs, parent tracetest.SpanStub, name string) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range byName(spans, name) {
		if s.Parent.SpanID() == parent.SpanContext.SpanID() && s.SpanContext.TraceID() == parent.SpanContext.TraceID() {
			out = append(out, s)
		}
	}
	return out
}

func attr(s tracetest.SpanStub, key string) attribute.Value {
	for _, kv := range s.Attributes {
		if string(kv.Key) == key {
			return kv.Value
		}
	}
	return attribute.Value{}
}

// A cluster.Dial client's Put and Get, whose bytes move on the data
// plane, continue the caller's trace on the members: the member's fetch
// of the Put's bytes from the client and the Get's fetch are children of
// the client's spans.
func TestTraceOfADialClient(t *testing.T) {
	exp := installTracer(t)
	ms := joinMembers(t, 2, nil) // on TCP: a Dial client reaches their data plane
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, err := Dial(ctx, ms[0].Address())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	data := make([]byte, 1<<20)
	ctx, root := tracing.Tracer().Start(ctx, "test.dial")
	if err := c.Put(ctx, "dialed", data); err != nil {
		t.Fatal(err)
	}
	// Put on the other member, so the client's member fetches it for the
	// client's Get.
	if err := ms[1].Client().Put(ctx, "elsewhere", data); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, "elsewhere"); err != nil {
		t.Fatal(err)
	}
	root.End()
	spanTree(t, exp, "the Dial client's trace", func(spans tracetest.SpanStubs) error {
		roots := byName(spans, "test.dial")
		if len(roots) != 1 {
			return fmt.Errorf("%d test spans", len(roots))
		}
		puts := childrenOf(spans, roots[0], tracing.Put)
		if len(puts) != 2 {
			return fmt.Errorf("%d Put spans under the caller's, want 2", len(puts))
		}
		var in []tracetest.SpanStub
		for _, p := range puts {
			in = append(in, childrenOf(spans, p, tracing.Transfer)...)
		}
		if len(in) != 1 || !attr(in[0], "hoplite.put").AsBool() {
			return fmt.Errorf("%d transfers of the Dial client's Put's bytes under its Put", len(in))
		}
		gets := childrenOf(spans, roots[0], tracing.Get)
		if len(gets) != 1 || len(childrenOf(spans, gets[0], tracing.Fetch)) != 1 {
			return fmt.Errorf("%d Get spans under the caller's, or no fetch under it", len(gets))
		}
		return nil
	})
}
