package directory

import (
	"fmt"
	"testing"

	"github.com/hoplite-go/hoplite/messages"
)

// BenchmarkLocateInline is the shard's part of a small Get: a Locate of
// an inline (1 KiB) object, answered with its bytes and the receiver
// recorded as a copy, then that copy's eviction (Unpublish), so that
// every Locate finds the receiver without one. 64 receivers take turns.
//
//	go test -run x -bench LocateInline -count 5 ./internal/directory/
func BenchmarkLocateInline(b *testing.B) {
	tb := NewLocationTable(TableConfig{})
	tb.onCreate(&messages.CreateObject{ObjectId: "x", Size: 1024, HasInline: true, InlineData: make([]byte, 1024), Creator: node(0)}, replyTo("c"))
	var receivers []*messages.NodeRef
	var replies []replyTo
	for i := range 64 {
		receivers = append(receivers, node(i+1))
		replies = append(replies, replyTo(fmt.Sprintf("r%d", i+1)))
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		r := receivers[i%len(receivers)]
		out := tb.onLocate(&messages.Locate{ObjectId: "x", Receiver: r, TimeoutMs: 1000}, replies[i%len(replies)], t0)
		if len(out.Sends) != 1 {
			b.Fatalf("Locate of an inline object sent %v, want its answer", out.Sends)
		}
		tb.onUnpublish(&messages.UnpublishLocation{ObjectId: "x", Node: r})
	}
}
