// Package coordinator is the public side of Reduce planning: the shapes a
// Reduce can take, the cost model that chooses among them, and the Plan a
// caller can inspect, before a Reduce (Choose) or after one (FromReply,
// on the plan a ReduceReply carries).
//
// A Reduce's coordinator chooses its plan once the first source arrives
// and tells the sources' size S. Sources under the inline limit are
// reduced in the coordinator (Inline). Others go up a tree whose degree d
// minimises the modelled time T(d) (Cost) given the link's latency L and
// bandwidth B (DAry; degree 1 is a chain). An AllReduce of every source,
// whose slices would be large enough, may instead be Sliced: a
// reduce-scatter along one rotated chain per slice, then an all-gather,
// when the model prices that below a reduce followed by a broadcast.
//
//	p, err := coordinator.Choose(coordinator.Input{Sources: 8, Size: 64 << 20,
//		Latency: 200 * time.Microsecond, Bandwidth: 1.25e9})
//	// p.Shape == coordinator.DAry, p.Degree == 1 (a chain): the
//	// pipeline moves each byte across each link once.
//
// Choose runs the coordinator's own core (internal/reduction) up to the
// first arrival, so it answers exactly what a member with those
// estimates would choose (a shard made by package actors spawns the
// actor that runs it).
package coordinator

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hoplite-go/hoplite/internal/bufalloc"
	"github.com/hoplite-go/hoplite/internal/reduction"
	"github.com/hoplite-go/hoplite/internal/reduction/plan"
	"github.com/hoplite-go/hoplite/messages"
)

// Shape is the form a Reduce takes.
type Shape string

// The shapes a Reduce can take, named as a ReduceReply's plan names them.
const (
	// Inline reduces sources smaller than the inline limit in the
	// coordinator itself: no tree, no transfer but the sources' bytes.
	Inline Shape = "inline"
	// DAry is a tree of the degree the cost model chooses (1: a chain).
	DAry Shape = "d-ary"
	// ChainLeaf is a binary tree whose leaves are chains (chosen only by
	// configuration, never by the cost model).
	ChainLeaf Shape = "chain-leaf"
	// Sliced is an AllReduce as a reduce-scatter and an all-gather over
	// one rotated chain per slice.
	Sliced Shape = "sliced"
)

// Input is what a plan rests on.
type Input struct {
	// Sources is how many sources are reduced (a Reduce's num_objects).
	Sources int
	// Size is each source's size in bytes (S).
	Size int64
	// Latency (L) and Bandwidth (B, bytes per second) are the link's
	// estimates; a Bandwidth of 0 is not measured yet, for which the
	// model builds a chain.
	Latency   time.Duration
	Bandwidth float64
	// AllReduce: every source's node receives the result (see
	// messages.Reduce.all_reduce), which may make the plan Sliced.
	AllReduce bool
	// DType is the sources' element type (default FLOAT32); a sliced
	// plan cuts at element boundaries.
	DType messages.DType
	// InlineLimit is the members' inline limit (default 64 KiB, the
	// members' default).
	InlineLimit int64
	// Paced says the members pace their streams at a stated link rate
	// (cluster.MemberConfig.LinkRate), which prices a sliced AllReduce
	// with less contention.
	Paced bool
}

// Plan is a Reduce's plan.
type Plan struct {
	Shape Shape
	// Degree is the tree's degree (1: a chain; 0 for Inline and Sliced).
	Degree int
	// Parents holds each tree position's parent (-1 for the root); the
	// k-th source to arrive takes position k. Empty for Inline and Sliced.
	Parents []int
	// Slices is how many slices a Sliced plan cuts each source into.
	Slices int
	// Costs is the modelled time T(d) of every candidate degree, and
	// ShapeCosts that of a Sliced AllReduce against a reduce followed by
	// a broadcast; both empty while the bandwidth is not measured.
	Costs      map[int]time.Duration
	ShapeCosts map[Shape]time.Duration
	// The estimates the plan rests on.
	Latency   time.Duration
	Bandwidth float64
	Size      int64
}

// Choose returns the plan a Reduce's coordinator chooses for in: it runs
// the coordinator's core on a Reduce of in.Sources sources up to its first
// arrival, which fixes the plan.
func Choose(in Input) (Plan, error) {
	if in.Sources < 1 || in.Size < 0 {
		return Plan{}, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "coordinator: %d sources of %d bytes", in.Sources, in.Size)
	}
	dtype := in.DType
	if dtype == messages.DType_DTYPE_UNSPECIFIED {
		dtype = messages.DType_FLOAT32
	}
	ids := make([]string, in.Sources)
	for i := range ids {
		ids[i] = "s" + strconv.Itoa(i)
	}
	req := &messages.Reduce{TargetId: "t", SourceIds: ids, NumObjects: int32(in.Sources), Op: messages.ReduceOp_SUM,
		Dtype: dtype, AllReduce: in.AllReduce}
	cfg := reduction.Config{InlineLimit: in.InlineLimit, Paced: in.Paced, MinSlice: bufalloc.HugeMin}
	if cfg.InlineLimit == 0 {
		cfg.InlineLimit = 64 << 10
	}
	// The core takes time as a value: any fixed instant will do.
	now := time.Unix(0, 0)
	r := reduction.NewReduction("plan", req, cfg, now, time.Hour, in.Latency, in.Bandwidth)
	r.Step(now, reduction.Begin{})
	u := &messages.LocationUpdate{ObjectId: ids[0], Size: in.Size, Node: &messages.NodeRef{NodeId: "n0"},
		State: messages.LocationState_COMPLETE}
	if in.Size < cfg.InlineLimit {
		// A source under the limit arrives with its bytes, as the
		// directory holds them; only then is it reduced inline.
		u.HasInline, u.InlineData = true, make([]byte, in.Size)
	}
	r.Step(now, u)
	p := r.Plan()
	if p == nil {
		return Plan{}, messages.Errorf(messages.ErrorCode_INTERNAL, "coordinator: no plan after the first arrival")
	}
	return FromReply(p), nil
}

// FromReply reads the plan a Reduce carried out, as its reply reports it
// (messages.ReduceReply.plan).
func FromReply(p *messages.ReducePlan) Plan {
	out := Plan{Shape: Shape(p.GetShape()), Degree: int(p.GetDegree()), Slices: int(p.GetSlices()),
		Latency: time.Duration(p.GetLatencyNs()), Bandwidth: p.GetBandwidth(), Size: p.GetObjectSize()}
	for _, pos := range p.GetPositions() {
		out.Parents = append(out.Parents, int(pos.GetParent()))
	}
	for _, c := range p.GetCosts() {
		if out.Costs == nil {
			out.Costs = map[int]time.Duration{}
		}
		out.Costs[int(c.GetDegree())] = time.Duration(c.GetCostUs()) * time.Microsecond
	}
	for _, c := range p.GetShapeCosts() {
		if out.ShapeCosts == nil {
			out.ShapeCosts = map[Shape]time.Duration{}
		}
		out.ShapeCosts[Shape(c.GetShape())] = time.Duration(c.GetCostUs()) * time.Microsecond
	}
	return out
}

// Cost is the cost model's time T(d) for a tree of degree d over n
// sources of S bytes on a link of latency L and bandwidth B (bytes per
// second): n·L + S/B for a chain (d = 1), whose pipeline moves each byte
// across each link once, and L·log_d(n) + d·S/B for d > 1, whose nodes
// each receive d objects. A B of 0 prices any S > 0 at the largest
// Duration.
func Cost(n, d int, L time.Duration, B float64, S int64) time.Duration {
	return plan.Cost(n, d, L, B, S)
}

// String is the plan in one line: its shape and degree, and the costs it
// chose among.
func (p Plan) String() string {
	var b strings.Builder
	b.WriteString(string(p.Shape))
	switch {
	case p.Shape == Sliced:
		fmt.Fprintf(&b, " (%d slices)", p.Slices)
	case p.Degree == 1:
		b.WriteString(" chain")
	case p.Degree > 1:
		fmt.Fprintf(&b, " degree %d", p.Degree)
	}
	for _, d := range slices.Sorted(maps.Keys(p.Costs)) {
		fmt.Fprintf(&b, " T(%d)=%v", d, p.Costs[d].Round(time.Microsecond))
	}
	return b.String()
}
