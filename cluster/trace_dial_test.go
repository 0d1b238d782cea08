package cluster

import (
	"context"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/hoplite-go/hoplite/internal/tracing"
	"github.com/hoplite-go/hoplite/internal/tracing/spantest"
)

// A cluster.Dial client's Put and Get, whose bytes move on the data
// plane, continue the caller's trace on the members: the member's fetch
// of the Put's bytes from the client and the Get's fetch are children of
// the client's spans.
func TestTraceOfADialClient(t *testing.T) {
	exp := spantest.Install(t)
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
	spantest.Tree(t, exp, "the Dial client's trace", func(spans tracetest.SpanStubs) error {
		roots := spantest.ByName(spans, "test.dial")
		if len(roots) != 1 {
			return fmt.Errorf("%d test spans", len(roots))
		}
		puts := spantest.ChildrenOf(spans, roots[0], tracing.Put)
		if len(puts) != 2 {
			return fmt.Errorf("%d Put spans under the caller's, want 2", len(puts))
		}
		var in []tracetest.SpanStub
		for _, p := range puts {
			in = append(in, spantest.ChildrenOf(spans, p, tracing.Transfer)...)
		}
		if len(in) != 1 || !spantest.Attr(in[0], "hoplite.put").AsBool() {
			return fmt.Errorf("%d transfers of the Dial client's Put's bytes under its Put", len(in))
		}
		gets := spantest.ChildrenOf(spans, roots[0], tracing.Get)
		if len(gets) != 1 || len(spantest.ChildrenOf(spans, gets[0], tracing.Fetch)) != 1 {
			return fmt.Errorf("%d Get spans under the caller's, or no fetch under it", len(gets))
		}
		return nil
	})
}
