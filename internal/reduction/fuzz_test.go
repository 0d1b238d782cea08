package reduction

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/internal/storeproto"
	"github.com/hoplite-go/hoplite/internal/testutil"
	"github.com/hoplite-go/hoplite/messages"
)

// fuzzInput reads a fuzz target's bytes as a program (testutil.FuzzInput).
type fuzzInput = testutil.FuzzInput

// hostileInt is a size, offset, position or count a peer may send.
func hostileInt(c byte) int64 {
	return testutil.HostileInt(c, 16, 1<<20, 1<<31-1, 1)
}

// hostileNode is a NodeRef a peer may name: four real nodes, nil, one
// without an id, one at another address, one with a 4 KiB id.
func hostileNode(c byte) *messages.NodeRef {
	switch c % 8 {
	case 4:
		return nil
	case 5:
		return &messages.NodeRef{Address: "x:1", ActorId: "y"}
	case 6:
		return &messages.NodeRef{NodeId: "n1", Address: "elsewhere:1", ActorId: "n1/store"}
	case 7:
		return &messages.NodeRef{NodeId: strings.Repeat("n", 4097), Address: "evil:1", ActorId: "$1"}
	}
	return node(int(c % 4))
}

// fuzzSources are the sources of a fuzzed Reduce; fuzzIDs what its
// reports name.
var (
	fuzzSources = []string{"s0", "s1", "s2", "s3"}
	fuzzIDs     = append([]string{testTarget, "", strings.Repeat("z", 4097)}, fuzzSources...)
)

// fuzzReduction starts a valid Reduce of a shape the input picks.
func fuzzReduction(in *fuzzInput) *Reduction {
	c := in.Byte()
	req := request(fuzzSources, 1+int(c%4))
	req.AllReduce = c&0x10 != 0
	if c&0x20 != 0 {
		req.NumObjects = 0
		req.Knee = &messages.ReduceKnee{MinPercent: 50, MaxObjects: int32(in.Byte() % 5)}
		if ValidateReduce(req, 1024) != nil {
			req.Knee.MaxObjects = 0
		}
	}
	cfg := Config{InlineLimit: []int64{testInline, 1, 1 << 30}[int(c>>6)%3]}
	switch in.Byte() % 4 {
	case 1:
		cfg.Shape = ShapeChainLeaf
	case 2:
		cfg.AllReduceShape, cfg.MinSlice = ShapeSliced, 1
	case 3:
		cfg.ForceDegree = 1
	}
	return newRed(req, cfg)
}

// A Reduce's coordinator takes location updates, task reports and store
// answers from any peer: whatever their fields (ids of other Reduces,
// negative and huge positions, generations and sizes, nil and foreign
// nodes, reports in any order), no step panics, the Reduce answers its
// requester at most once, and its deadline ends it.
func FuzzReduction(f *testing.F) {
	f.Add([]byte{0x01, 0, 0x80, 3, 5, 0, 0x80, 4, 5, 1, 0x81, 0, 0, 0, 0x82, 0, 0, 0})
	f.Add([]byte{0x13, 2, 0x80, 3, 4, 0, 0x80, 4, 4, 1, 0x80, 5, 4, 2, 0x80, 6, 4, 3, 0x83, 1, 0, 0, 0x85, 0})
	f.Add([]byte{0x22, 3, 0, 0x80, 3, 5, 0, 0x80, 4, 5, 1, 0x84, 0, 0x86, 0})
	f.Add([]byte{0x40, 1, 0x80, 3, 3, 0, 0x81, 1, 1, 1, 0x82, 1, 2, 2, 0x87, 9})
	f.Fuzz(func(t *testing.T, data []byte) {
		in := testutil.NewFuzzInput(data)
		r := fuzzReduction(in)
		now := t0
		replies := 0
		check := func(fx Effects) {
			for _, s := range fx.Sends {
				if _, ok := s.To.(Requester); ok {
					if _, ok := s.Msg.(*messages.ReduceReply); ok {
						replies++
					}
				}
				if s.To == nil || s.Msg == nil {
					t.Fatalf("a send of %v to %v", s.Msg, s.To)
				}
				// A task a peer's report shaped is still one a store
				// node can run.
				switch m := s.Msg.(type) {
				case *messages.ReduceTask:
					if err := storeproto.CheckTask(m); err != nil {
						t.Fatalf("sent %v: %v", m, err)
					}
				case *messages.ReduceTaskBatch:
					for _, task := range m.GetTasks() {
						if err := storeproto.CheckTask(task); err != nil {
							t.Fatalf("sent %v: %v", task, err)
						}
					}
				}
			}
			if replies > 1 {
				t.Fatalf("the Reduce answered its requester %d times", replies)
			}
		}
		check(r.Step(now, Begin{}))
		for i := 0; in.More() && i < 64; i++ {
			now = now.Add(time.Duration(in.Byte()) * time.Millisecond)
			check(fuzzStep(r, in, now))
		}
		check(r.Step(r.Deadline(), DeadlineTimer{}))
		if !r.Over() {
			t.Fatalf("the Reduce runs on past its deadline: %v", r.Waiting())
		}
		if replies != 1 {
			t.Fatalf("the Reduce answered its requester %d times, want once", replies)
		}
	})
}

// fuzzStep hands the Reduction one report built from the input.
func fuzzStep(r *Reduction, in *fuzzInput, now time.Time) Effects {
	kind := in.Byte()
	var raw []byte
	if kind&0x80 == 0 {
		raw = in.Bytes() // the report as a peer encoded it
	}
	id := fuzzIDs[int(in.Byte())%len(fuzzIDs)]
	v := hostileInt(in.Byte())
	n := hostileNode(in.Byte())
	rid := testReduceID
	if kind&0x40 != 0 {
		rid = "other#1"
	}
	switch kind % 8 {
	case 0:
		u := &messages.LocationUpdate{}
		if proto.Unmarshal(raw, u) != nil || raw == nil {
			u = &messages.LocationUpdate{ObjectId: id, Size: v, Node: n, State: messages.LocationState(v & 3)}
			if kind&0x20 != 0 {
				u.HasInline, u.InlineData = true, make([]byte, min(max(v, 0), 64))
			}
			if kind&0x10 != 0 {
				u.Deleted = true
			}
			if kind&0x08 != 0 {
				u.Error = messages.Errorf(messages.ErrorCode(v&15), "e")
			}
		}
		return r.Step(now, u)
	case 1:
		m := &messages.ReduceTaskStarted{}
		if proto.Unmarshal(raw, m) != nil || raw == nil {
			m = &messages.ReduceTaskStarted{ReduceId: rid, Position: int32(v), Generation: int32(in.Byte()) - 1}
			if kind&0x20 != 0 {
				m.Error = messages.Errorf(messages.ErrorCode(v&15), "e")
			}
		}
		return r.Step(now, m)
	case 2:
		m := &messages.ReduceTaskDone{}
		if proto.Unmarshal(raw, m) != nil || raw == nil {
			m = &messages.ReduceTaskDone{ReduceId: rid, Position: int32(v), Generation: int32(in.Byte()) - 1,
				MeasuredBytes: v, MeasuredNs: v, Fingerprint: uint64(v)}
			if kind&0x20 != 0 {
				m.Error = messages.Errorf(messages.ErrorCode(v&15), "e")
			}
		}
		return r.Step(now, m)
	case 3:
		m := &messages.StoreReducedReply{}
		if proto.Unmarshal(raw, m) != nil || raw == nil {
			m = &messages.StoreReducedReply{ReduceId: rid}
			if kind&0x20 != 0 {
				m.Error = messages.Errorf(messages.ErrorCode(v&15), "e")
			}
		}
		return r.Step(now, m)
	case 4:
		return r.Step(now, NodeFailed{Node: n.GetNodeId()})
	case 5:
		var err error
		if kind&0x20 != 0 {
			err = messages.Errorf(messages.ErrorCode(v&15), "e")
		}
		return r.Step(now, Fetched{Node: n.GetNodeId(), Err: err})
	case 6:
		return r.Step(now, KneeTimer{})
	}
	return r.Step(now, ResubscribeTimer{})
}
