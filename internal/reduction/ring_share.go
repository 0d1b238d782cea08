package reduction

import (
	"github.com/hoplite-go/hoplite/internal/reduction/kernel"
	"github.com/hoplite-go/hoplite/internal/reduction/plan"
	"github.com/hoplite-go/hoplite/messages"
)

// MaxRingSlices is the most participants a SlicedRingShare may name:
// its positions must number in an int32 (2n², about 2·10⁹ at 32,768),
// and a node lists 2n of them. A ring of more is sent listed.
const MaxRingSlices = 1 << 15

// BatchTasks lists the tasks of a batch: its listed ones, then its ring
// share's (ExpandRing). A share that cannot be expanded is an
// INVALID_ARGUMENT naming it; the listed tasks still come back.
func BatchTasks(b *messages.ReduceTaskBatch) ([]*messages.ReduceTask, *messages.Error) {
	if b.GetRing() == nil {
		return b.GetTasks(), nil
	}
	ring, err := ExpandRing(b.GetRing())
	if err != nil {
		return b.GetTasks(), err
	}
	return append(append(make([]*messages.ReduceTask, 0, len(b.GetTasks())+len(ring)), b.GetTasks()...), ring...), nil
}

// ExpandRing lists a ring participant's tasks from its share, in the
// order the coordinator lists them (see slicedRun.arrived): its chain
// position of every slice, its relay of every slice but its own, its
// gather. Every task of a share is what slicedRun would send listed;
// the bytes are untrusted, so a share that names no such run (fewer than
// 3 or more than MaxRingSlices participants, an index or a gather
// outside them, a size that does not cut into n slices of the dtype) is
// refused whole.
func ExpandRing(sh *messages.SlicedRingShare) ([]*messages.ReduceTask, *messages.Error) {
	bad := func(format string, args ...any) *messages.Error {
		return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "sliced ring share: "+format, args...)
	}
	n, i := int(sh.GetSlices()), int(sh.GetIndex())
	if n < 3 || n > MaxRingSlices {
		return nil, bad("%d participants (3 to %d)", n, MaxRingSlices)
	}
	if i < 0 || i >= n {
		return nil, bad("participant %d of %d", i, n)
	}
	if g := int(sh.GetGatherPosition()); g < n*n || g >= n*n+n {
		return nil, bad("gather position %d of %d participants", g, n)
	}
	if sh.GetReduceId() == "" || sh.GetTargetId() == "" || sh.GetSourceId() == "" || sh.GetNode().GetNodeId() == "" || sh.GetPredecessor().GetNodeId() == "" {
		return nil, bad("no reduce id, target, source or node")
	}
	width, err := kernel.Width(sh.GetDtype())
	if err != nil {
		return nil, bad("%v", err)
	}
	cut := plan.Slices(sh.GetSize(), n, width)
	if cut == nil {
		return nil, bad("%d bytes do not cut into %d slices of %d-byte elements", sh.GetSize(), n, width)
	}
	id := sh.GetReduceId()
	task := func(p int, size int64) *messages.ReduceTask {
		return &messages.ReduceTask{ReduceId: id, TargetId: sh.GetTargetId(), Op: sh.GetOp(), Dtype: sh.GetDtype(), Size: size,
			Position: int32(p), OutputId: InternalID(id, p, 1), Generation: 1, Slices: int32(n), Bandwidth: sh.GetBandwidth(),
			TimeoutMs: sh.GetTimeoutMs(), TraceParent: sh.GetTraceParent()}
	}
	out := make([]*messages.ReduceTask, 0, 2*n)
	// Chain index c of slice k is participant (k+1+c) mod n.
	for k := 0; k < n; k++ {
		c := ((i-k-1)%n + n) % n
		p := k*n + c
		t := task(p, cut[k].Len)
		t.SourceId, t.Sliced, t.SourceOffset, t.Quiet = sh.GetSourceId(), true, cut[k].Off, c < n-1
		if c > 0 {
			t.Children = []*messages.ReduceInput{{Node: sh.GetPredecessor(), ObjectId: InternalID(id, p-1, 1)}}
		}
		out = append(out, t)
	}
	// Slice k's j-th relay is on participant k+j: this one's j is i-k.
	relayPos := func(k, j int) int { return n*n + n + k*(n-1) + j - 1 }
	for k := 0; k < n; k++ {
		j := (i - k + n) % n
		if j == 0 {
			continue
		}
		t := task(relayPos(k, j), cut[k].Len)
		from := InternalID(id, k*n+n-1, 1) // the root's output
		if j > 1 {
			from = InternalID(id, relayPos(k, j-1), 1)
		}
		t.Relay, t.Quiet = true, true
		t.Children = []*messages.ReduceInput{{Node: sh.GetPredecessor(), ObjectId: from}}
		out = append(out, t)
	}
	g := task(int(sh.GetGatherPosition()), sh.GetSize())
	g.Root, g.Gather, g.OutputId = sh.GetRoot(), true, sh.GetTargetId()
	g.Children = make([]*messages.ReduceInput, 0, n)
	for k := 0; k < n; k++ {
		in := &messages.ReduceInput{Node: sh.GetNode(), ObjectId: InternalID(id, k*n+n-1, 1), Offset: cut[k].Off}
		if k != i {
			in.ObjectId = InternalID(id, relayPos(k, (i-k+n)%n), 1)
		}
		g.Children = append(g.Children, in)
	}
	return append(out, g), nil
}
