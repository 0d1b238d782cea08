package directory

import (
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/reduction/plan"
	"github.com/hoplite-go/hoplite/messages"
)

// Under FanOutAuto a receiver handed a sender is told the chunk for the
// depth of the tree the receivers expected form (LocateReply.chunk): the
// link's for a broadcast to a few, the smallest (plan.PipelineFloor) for
// a chain of a thousand; a table whose fan-out is fixed leaves the chunk to the
// receiver, and so does a Reduce's target.
func TestLocateReplyCarriesTheTreesChunk(t *testing.T) {
	const S = 32 << 20
	now := time.Unix(1000, 0)
	B := 400e6 / 8 * 1448 / 1514
	for _, c := range []struct {
		name      string
		fanOut    int
		receivers int
		want      int64
	}{
		{"auto, 8", FanOutAuto, 7, int64(plan.ChunkForObject(B, S))},
		{"auto, 1024", FanOutAuto, 1023, plan.MinPipelineChunk},
		{"auto, 64", FanOutAuto, 63, int64(plan.BroadcastChunk(63, 1, B, S))},
		{"fixed chain", 1, 1023, 0},
		{"fixed fan-out 2", 2, 1023, 0},
	} {
		cfg := DefaultTableConfig()
		cfg.FanOut, cfg.InlineUplink, cfg.Intake, cfg.Receivers = c.fanOut, B, 1/2.1e-9, c.receivers
		cfg.Burst = 128 << 10 * 1448 / 1514 // the testbed's shaper: a chain to 1,024
		tb := NewLocationTable(cfg)
		tb.onCreate(&messages.CreateObject{ObjectId: "x", Size: S, Creator: cycleNode("c")}, nil)
		tb.onPublish(&messages.PublishLocation{ObjectId: "x", Node: cycleNode("c"), State: messages.LocationState_COMPLETE, Size: S, Creator: true})
		for _, r := range []string{"r1", "r2", "r3"} {
			var reply *messages.LocateReply
			for _, s := range tb.onLocate(&messages.Locate{ObjectId: "x", Receiver: cycleNode(r), TimeoutMs: 60_000}, r, now).Sends {
				if m, ok := s.Msg.(*messages.LocateReply); ok && s.To == r {
					reply = m
				}
			}
			if reply == nil || reply.GetSender() == nil {
				t.Fatalf("%s: %s got no sender: %v", c.name, r, reply)
			}
			if got := reply.GetChunk(); got != c.want {
				t.Errorf("%s: %s told chunk %d, want %d", c.name, r, got, c.want)
			}
		}
	}
	// A Reduce's target (an AllReduce's result, broadcast while its
	// reduce still streams over the same uplinks, in the chunk for the
	// reduce's depth) is told the chunk for its broadcast's depth too.
	cfg := DefaultTableConfig()
	cfg.FanOut, cfg.InlineUplink, cfg.Intake, cfg.Receivers = FanOutAuto, B, 1/2.1e-9, 1023
	tb := NewLocationTable(cfg)
	tb.onCreate(&messages.CreateObject{ObjectId: "x", Size: S, Creator: cycleNode("c")}, nil)
	tb.onPublish(&messages.PublishLocation{ObjectId: "x", Node: cycleNode("c"), State: messages.LocationState_COMPLETE, Size: S, Creator: true})
	tb.entries["x"].target.reservedBy = "run-1"
	told := false
	for _, s := range tb.onLocate(&messages.Locate{ObjectId: "x", Receiver: cycleNode("r1"), TimeoutMs: 60_000}, "r1", now).Sends {
		if m, ok := s.Msg.(*messages.LocateReply); ok && m.GetSender() != nil {
			told = true
			if want := int64(plan.BroadcastChunk(1023, plan.ChooseBroadcastFanOut(1023, plan.BroadcastLink{L: cfg.Latency, B: B, Intake: cfg.Intake}, S), B, S)); m.GetChunk() != want || want >= int64(plan.ChunkForObject(B, S)) {
				t.Errorf("a Reduce's target: told chunk %d, want the depth's %d (under the link's %d)", m.GetChunk(), want, plan.ChunkForObject(B, S))
			}
		}
	}
	if !told {
		t.Errorf("a Reduce's target: no sender handed out")
	}
	if c64 := plan.BroadcastChunk(63, 1, B, S); c64 >= plan.ChunkForObject(B, S) || c64 <= plan.MinChunk/2 {
		t.Errorf("a chain of 63 moves in %d bytes: want between MinChunk and the link's %d", c64, plan.ChunkForObject(B, S))
	}
}
