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

// BenchmarkLocateBroadcast is a shard's part of a broadcast of one
// streamed object (32 MiB) to n receivers that all ask at once: n
// Locates, each handed a sender (and recorded as a partial copy), with
// the fan-out the cost model chooses on the testbed's links. It reports
// the table's time per Locate: a cost that grows with n would be paid n
// times by the one shard a broadcast's receivers all ask.
//
//	go test -run x -bench LocateBroadcast -count 5 ./internal/directory/
func BenchmarkLocateBroadcast(b *testing.B) {
	const S = 32 << 20
	for _, n := range []int{64, 1024} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			var receivers []*messages.NodeRef
			var replies []replyTo
			for i := range n {
				receivers = append(receivers, node(i+1))
				replies = append(replies, replyTo(fmt.Sprintf("r%d", i+1)))
			}
			locates := 0
			for b.Loop() {
				cfg := DefaultTableConfig()
				cfg.FanOut, cfg.InlineUplink, cfg.Receivers = FanOutAuto, 400e6/8*1448/1514, n
				tb := NewLocationTable(cfg)
				tb.onCreate(&messages.CreateObject{ObjectId: "x", Size: S, Creator: node(0)}, replyTo("c"))
				tb.onPublish(&messages.PublishLocation{ObjectId: "x", Node: node(0), State: messages.LocationState_COMPLETE, Size: S, Creator: true})
				for i, r := range receivers {
					out := tb.onLocate(&messages.Locate{ObjectId: "x", Receiver: r, TimeoutMs: 60_000}, replies[i], t0)
					if len(out.Sends) == 0 {
						b.Fatalf("receiver %d got no answer", i)
					}
					locates++
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(locates), "ns/locate")
		})
	}
}
