package reduction

import (
	"fmt"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/internal/storeproto"
	"github.com/hoplite-go/hoplite/messages"
)

// ringSends runs a sliced AllReduce of n sources, each on a node of its
// own, the creator's node start, until its tasks go out, and returns the
// batches each node got, in the order sent.
func ringSends(t *testing.T, n int, size int64, dtype messages.DType, start int, cfg Config) (order []string, batches map[string]*messages.ReduceTaskBatch) {
	t.Helper()
	cfg.AllReduceShape = ShapeSliced
	req := allReduceRequest(ids("s", n))
	req.Dtype = dtype
	r := newRed(req, cfg)
	r.start = node(start)
	r.Step(t0, Begin{})
	var fx Effects
	for i := 0; i < n; i++ {
		fx = r.Step(t0, located(fmt.Sprintf("s%d", i), size, node(i)))
	}
	if !r.plan.GetRingGather() {
		t.Fatalf("n %d: the run is not a ring", n)
	}
	// The plan holds slice 0's chain: every participant once, each on its
	// node, parent the next link; not the n² positions of every chain.
	seen := map[string]bool{}
	for c, pos := range r.plan.GetPositions() {
		want := int32(c + 1)
		if c == n-1 {
			want = -1
		}
		i := (c + 1) % n
		if pos.GetPosition() != int32(c) || pos.GetParent() != want || pos.GetObjectId() != fmt.Sprintf("s%d", i) ||
			pos.GetNodeId() != node(i).GetNodeId() || seen[pos.GetObjectId()] {
			t.Fatalf("n %d: plan position %d: %v", n, c, pos)
		}
		seen[pos.GetObjectId()] = true
	}
	if len(seen) != n {
		t.Fatalf("n %d: the plan lists %d positions, want %d", n, len(r.plan.GetPositions()), n)
	}
	batches = map[string]*messages.ReduceTaskBatch{}
	for _, s := range fx.Sends {
		if b, ok := s.Msg.(*messages.ReduceTaskBatch); ok {
			id := s.To.(*messages.NodeRef).GetNodeId()
			order = append(order, id)
			batches[id] = b
		}
	}
	return order, batches
}

// TestRingShareListsTheSameTasks: a ring participant's share, expanded
// on its node, is exactly the tasks the coordinator lists for it
// otherwise (Config.ListRingTasks), in the same order, the nodes served
// in the same order; and the shares cost the coordinator's uplink a
// few hundred bytes a participant where the listed tasks cost about 2n
// times that.
func TestRingShareListsTheSameTasks(t *testing.T) {
	for _, c := range []struct {
		n, start int
		size     int64
		dtype    messages.DType
	}{
		{3, 0, bigSize, messages.DType_FLOAT32},
		{4, 2, int64(4*(1<<15)+3) * 8, messages.DType_INT64}, // slices of uneven length
		{5, 4, 5 * 1001 * 4, messages.DType_INT32},
		{8, 1, bigSize, messages.DType_FLOAT64},
		{13, 7, 13*4096*4 + 12, messages.DType_FLOAT32},
	} {
		t.Run(fmt.Sprint(c.n), func(t *testing.T) {
			order, stated := ringSends(t, c.n, c.size, c.dtype, c.start, Config{})
			listedOrder, listed := ringSends(t, c.n, c.size, c.dtype, c.start, Config{ListRingTasks: true})
			if fmt.Sprint(order) != fmt.Sprint(listedOrder) || len(order) != c.n {
				t.Fatalf("nodes served %v, listed %v", order, listedOrder)
			}
			statedBytes, listedBytes := 0, 0
			for _, id := range order {
				sb, lb := stated[id], listed[id]
				if sb.GetRing() == nil || len(sb.GetTasks()) != 0 || lb.GetRing() != nil {
					t.Fatalf("%s: stated %d tasks and share %v; listed share %v", id, len(sb.GetTasks()), sb.GetRing(), lb.GetRing())
				}
				got, err := BatchTasks(sb)
				if err != nil {
					t.Fatalf("%s: %v", id, err)
				}
				want := lb.GetTasks()
				if len(got) != len(want) || len(want) != 2*c.n {
					t.Fatalf("%s: %d tasks from the share, %d listed, want %d", id, len(got), len(want), 2*c.n)
				}
				for i := range want {
					if !proto.Equal(got[i], want[i]) {
						t.Fatalf("%s: task %d from the share\n%v\nlisted\n%v", id, i, got[i], want[i])
					}
					if err := storeproto.CheckTask(got[i]); err != nil {
						t.Fatalf("%s: task %d refused: %v", id, i, err)
					}
				}
				statedBytes += proto.Size(sb)
				listedBytes += proto.Size(lb)
			}
			// A share is O(1), the listed tasks O(n) a participant.
			if per := statedBytes / c.n; per > 400 {
				t.Fatalf("%d bytes a share", per)
			}
			if listedBytes < c.n*statedBytes/2 {
				t.Fatalf("listed %d bytes, stated %d: want the listed ones about 2n times larger", listedBytes, statedBytes)
			}
		})
	}
}

// TestExpandRingRefusesWhatNamesNoRun: a share from the network that
// names no sliced ring is refused whole, with INVALID_ARGUMENT, and
// lists nothing; nothing it says makes its node allocate more than 2n
// tasks of at most MaxRingSlices participants.
func TestExpandRingRefusesWhatNamesNoRun(t *testing.T) {
	good := func() *messages.SlicedRingShare {
		return &messages.SlicedRingShare{ReduceId: testReduceID, TargetId: testTarget, Dtype: messages.DType_FLOAT32, Size: 4 * 1024,
			Slices: 4, Index: 1, SourceId: "s1", Node: node(1), Predecessor: node(0), GatherPosition: 16 + 2, Bandwidth: 1e8, TimeoutMs: 100}
	}
	if ts, err := ExpandRing(good()); err != nil || len(ts) != 8 {
		t.Fatalf("the good share: %d tasks, %v", len(ts), err)
	}
	for name, bad := range map[string]func(*messages.SlicedRingShare){
		"two participants":      func(s *messages.SlicedRingShare) { s.Slices, s.GatherPosition = 2, 4 },
		"too many participants": func(s *messages.SlicedRingShare) { s.Slices = MaxRingSlices + 1 },
		"negative count":        func(s *messages.SlicedRingShare) { s.Slices = -5 },
		"negative index":        func(s *messages.SlicedRingShare) { s.Index = -1 },
		"index past n":          func(s *messages.SlicedRingShare) { s.Index = 4 },
		"gather in the chains":  func(s *messages.SlicedRingShare) { s.GatherPosition = 3 },
		"gather past the n":     func(s *messages.SlicedRingShare) { s.GatherPosition = 20 },
		"no reduce id":          func(s *messages.SlicedRingShare) { s.ReduceId = "" },
		"no target":             func(s *messages.SlicedRingShare) { s.TargetId = "" },
		"no source":             func(s *messages.SlicedRingShare) { s.SourceId = "" },
		"no node":               func(s *messages.SlicedRingShare) { s.Node = nil },
		"no predecessor":        func(s *messages.SlicedRingShare) { s.Predecessor = &messages.NodeRef{} },
		"no dtype":              func(s *messages.SlicedRingShare) { s.Dtype = messages.DType_DTYPE_UNSPECIFIED },
		"unknown dtype":         func(s *messages.SlicedRingShare) { s.Dtype = 99 },
		"size not of elements":  func(s *messages.SlicedRingShare) { s.Size = 4*1024 + 1 },
		"fewer elements than n": func(s *messages.SlicedRingShare) { s.Size = 12 },
		"negative size":         func(s *messages.SlicedRingShare) { s.Size = -4096 },
	} {
		s := good()
		bad(s)
		ts, err := ExpandRing(s)
		if err == nil || err.GetCode() != messages.ErrorCode_INVALID_ARGUMENT || ts != nil {
			t.Errorf("%s: %d tasks, error %v; want INVALID_ARGUMENT and none", name, len(ts), err)
		}
		listed := &messages.ReduceTask{ReduceId: testReduceID, Position: 1, Generation: 1, OutputId: "o", SourceId: "s"}
		if ts, err := BatchTasks(&messages.ReduceTaskBatch{Tasks: []*messages.ReduceTask{listed}, Ring: s}); err == nil || len(ts) != 1 || ts[0] != listed {
			t.Errorf("%s in a batch: %d tasks, error %v; want the listed task and the error", name, len(ts), err)
		}
	}
}

// FuzzExpandRing: whatever bytes arrive as a share, ExpandRing never
// panics, and a share it takes lists 2n distinct positions of one run,
// each a task its node accepts (storeproto.CheckTask).
func FuzzExpandRing(f *testing.F) {
	seed := &messages.SlicedRingShare{ReduceId: testReduceID, TargetId: testTarget, Dtype: messages.DType_FLOAT32, Size: 4 * 1024,
		Slices: 4, Index: 1, SourceId: "s1", Node: node(1), Predecessor: node(0), GatherPosition: 18}
	b, _ := proto.Marshal(seed)
	f.Add(b)
	seed.Slices, seed.GatherPosition, seed.Index = 3, 9, 2
	b, _ = proto.Marshal(seed)
	f.Add(b)
	f.Fuzz(func(t *testing.T, data []byte) {
		var sh messages.SlicedRingShare
		if proto.Unmarshal(data, &sh) != nil {
			return
		}
		ts, err := ExpandRing(&sh)
		if err != nil {
			return
		}
		n := int(sh.GetSlices())
		if len(ts) != 2*n {
			t.Fatalf("%d tasks for %d participants", len(ts), n)
		}
		seen := map[int32]bool{}
		for _, tk := range ts {
			if seen[tk.GetPosition()] || tk.GetReduceId() != sh.GetReduceId() {
				t.Fatalf("position %d twice, or of run %q", tk.GetPosition(), tk.GetReduceId())
			}
			seen[tk.GetPosition()] = true
			if err := storeproto.CheckTask(tk); err != nil {
				t.Fatalf("task %d refused: %v", tk.GetPosition(), err)
			}
		}
	})
}
