package tracing

import (
	"context"
	"testing"

	"go.opentelemetry.io/otel/trace"
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
