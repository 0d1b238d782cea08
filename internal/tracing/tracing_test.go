package tracing

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/trace"

	"github.com/hoplite-go/hoplite/internal/tracing/spantest"
)

// A span's traceparent survives the trip through a message field, and a
// hostile field gives an untraced context instead of an error.
func TestParentRoundTrip(t *testing.T) {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)
	p := Parent(ctx)
	if p != "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01" {
		t.Fatalf("Parent = %q", p)
	}
	got := trace.SpanContextFromContext(FromParent(context.Background(), p))
	if got.TraceID() != tid || got.SpanID() != sid || !got.IsRemote() {
		t.Fatalf("FromParent(%q) = %v", p, got)
	}
	for _, bad := range []string{"", "garbage", "00-zz-yy-01", string(make([]byte, 4096))} {
		if sc := trace.SpanContextFromContext(FromParent(context.Background(), bad)); sc.IsValid() {
			t.Errorf("FromParent(%.20q) = %v, want no span", bad, sc)
		}
	}
	if p := Parent(context.Background()); p != "" {
		t.Errorf("Parent of an untraced context = %q, want empty", p)
	}
	// The default provider is a no-op: its spans send no field.
	_, span := Start("", Get)
	if p := ParentOf(span); p != "" {
		t.Errorf("ParentOf a no-op span = %q, want empty", p)
	}
	End(span, nil)
	End(nil, nil)
}

// With no provider installed, Hoplite's spans without a parent are the
// shared no-op span and cost no allocation; a parent from a message
// still passes through; once a program installs a provider, spans
// record, and with the placeholder put back (which then delegates to
// that provider) they still go to it.
func TestSpansWithTracingOffCostNothing(t *testing.T) {
	if !Off() {
		t.Fatal("Off() = false with no provider installed")
	}
	attrs := attribute.String("hoplite.object", "x")
	if n := testing.AllocsPerRun(100, func() {
		_, span := Start("", Get, attrs)
		End(Child(span, Transfer), nil)
		_, c := StartIn(context.Background(), Put)
		End(c, nil)
	}); n != 0 {
		t.Errorf("spans with tracing off: %v allocations, want 0", n)
	}
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	_, span := Start(parent, Get)
	if got := span.SpanContext().TraceID().String(); got != "4bf92f3577b34da6a3ce929d0e0e4736" {
		t.Errorf("a span off with a parent is in trace %s, want the parent's", got)
	}

	t.Run("installed", func(t *testing.T) {
		exp := spantest.Install(t)
		if Off() {
			t.Fatal("Off() = true with a provider installed")
		}
		_, span := Start("", Get, attrs)
		End(Child(span, Transfer), nil)
		End(span, nil)
		_, c := StartIn(context.Background(), Put)
		End(c, nil)
		if got := len(exp.GetSpans()); got != 3 {
			t.Fatalf("%d spans recorded, want 3", got)
		}
	})
	// spantest put the placeholder back; it now delegates to the provider
	// the subtest installed, so Hoplite's spans are not dropped as off.
	if Off() {
		t.Error("Off() = true with the placeholder delegating to an installed provider")
	}
}
