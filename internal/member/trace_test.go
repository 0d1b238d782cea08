package member

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/hoplite-go/hoplite/internal/tracing"
	"github.com/hoplite-go/hoplite/internal/tracing/spantest"
	"github.com/hoplite-go/hoplite/messages"
)

// A Get of an object another member holds is one trace: the caller's span,
// the client's Get, the fetch on the receiving member, the Locate at the
// object's shard (which names the sender it gave) and the transfer from
// that sender, each the child of the one before.
func TestTraceOfACrossMemberGet(t *testing.T) {
	exp := spantest.Install(t)
	l, err := StartLocal(Config{Nodes: 3})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Stop()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	data := make([]byte, 1<<20) // streamed, not inline
	for i := range data {
		data[i] = byte(i)
	}
	if err := l.Client(0).Put(ctx, "traced", data); err != nil {
		t.Fatal(err)
	}
	ctx, root := tracing.Tracer().Start(ctx, "test.get")
	got, err := l.Client(2).Get(ctx, "traced")
	root.End()
	if err != nil || len(got) != len(data) {
		t.Fatalf("Get: %d bytes, %v", len(got), err)
	}
	creator := l.Node(0).GetNodeId()
	spantest.Tree(t, exp, "the Get's trace", func(spans tracetest.SpanStubs) error {
		roots := spantest.ByName(spans, "test.get")
		if len(roots) != 1 {
			return fmt.Errorf("%d test spans", len(roots))
		}
		gets := spantest.ChildrenOf(spans, roots[0], tracing.Get)
		if len(gets) != 1 {
			return fmt.Errorf("%d Get spans under the caller's", len(gets))
		}
		fetches := spantest.ChildrenOf(spans, gets[0], tracing.Fetch)
		if len(fetches) != 1 {
			return fmt.Errorf("%d fetch spans under the Get", len(fetches))
		}
		if n := spantest.Attr(fetches[0], "hoplite.node").AsString(); n != l.Node(2).GetNodeId() {
			return fmt.Errorf("the fetch ran on %q, want the caller's member %q", n, l.Node(2).GetNodeId())
		}
		locates := spantest.ChildrenOf(spans, fetches[0], tracing.Locate)
		if len(locates) == 0 {
			return fmt.Errorf("no Locate span under the fetch")
		}
		if s := spantest.Attr(locates[0], "hoplite.sender").AsString(); s != creator {
			return fmt.Errorf("the Locate gave sender %q, want the creator %q", s, creator)
		}
		transfers := spantest.ChildrenOf(spans, fetches[0], tracing.Transfer)
		if len(transfers) == 0 {
			return fmt.Errorf("no transfer span under the fetch")
		}
		if s := spantest.Attr(transfers[0], "hoplite.sender").AsString(); s != creator {
			return fmt.Errorf("the transfer came from %q, want %q", s, creator)
		}
		return nil
	})
}

// A Reduce is one trace: the client's span, the coordinator's, and a
// span for each position of its tree, on the members that hold them.
func TestTraceOfAReduce(t *testing.T) {
	exp := spantest.Install(t)
	l, err := StartLocal(Config{Nodes: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Stop()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	const floats = 64 << 10 // 256 KiB each: a tree, not an inline Reduce
	var ids []string
	for i := range 4 {
		buf := make([]byte, 4*floats)
		for k := range floats {
			binary.LittleEndian.PutUint32(buf[4*k:], math.Float32bits(float32(i+1)))
		}
		ids = append(ids, fmt.Sprintf("src-%d", i))
		if err := l.Client(i).Put(ctx, ids[i], buf); err != nil {
			t.Fatal(err)
		}
	}
	ctx, root := tracing.Tracer().Start(ctx, "test.reduce")
	reply, err := l.Client(1).Reduce(ctx, "sum", ids, 4, messages.ReduceOp_SUM, messages.DType_FLOAT32)
	root.End()
	if err != nil {
		t.Fatal(err)
	}
	if shape := reply.GetPlan().GetShape(); shape == ShapeInline {
		t.Fatalf("the Reduce ran inline: the test wants a tree")
	}
	spantest.Tree(t, exp, "the Reduce's trace", func(spans tracetest.SpanStubs) error {
		roots := spantest.ByName(spans, "test.reduce")
		if len(roots) != 1 {
			return fmt.Errorf("%d test spans", len(roots))
		}
		reduces := spantest.ChildrenOf(spans, roots[0], tracing.Reduce)
		if len(reduces) != 1 {
			return fmt.Errorf("%d Reduce spans under the caller's", len(reduces))
		}
		coords := spantest.ChildrenOf(spans, reduces[0], tracing.Coordinate)
		if len(coords) != 1 {
			return fmt.Errorf("%d coordinator spans under the Reduce", len(coords))
		}
		if n := spantest.Attr(coords[0], "hoplite.reduced").AsInt64(); n != 4 {
			return fmt.Errorf("the coordinator's span says %d reduced, want 4", n)
		}
		// A leaf whose source is whole needs no worker: its parent reads
		// the source. Every other position runs on a member, in a span.
		positions := spantest.ChildrenOf(spans, coords[0], tracing.Position)
		nodes, seen := map[string]bool{}, map[int64]bool{}
		for _, p := range positions {
			nodes[spantest.Attr(p, "hoplite.node").AsString()] = true
			seen[spantest.Attr(p, "hoplite.position").AsInt64()] = true
		}
		if len(seen) < 2 || len(nodes) < 2 {
			return fmt.Errorf("%d positions on %d members under the coordinator, want a tree over several members", len(seen), len(nodes))
		}
		return nil
	})
}
