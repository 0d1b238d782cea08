package coordinator

import (
	"slices"

	"github.com/hoplite-go/hoplite/coordinator/plan"
	"github.com/hoplite-go/hoplite/messages"
)

// ShapeSliced is the AllReduce shape that reduce-scatters, then
// all-gathers, through the store (see sliced).
const ShapeSliced = "sliced"

// sliced is the state of a sliced AllReduce: a reduce-scatter, then an
// all-gather, both made of ordinary tree positions.
//
// The object is cut into n slices, n the number of sources, on element
// bounds (plan.Slices). Participant i is the node of the i-th source in
// the request. Slice k is reduced by a chain over every participant,
// rotated so that its root is participant k: chain index c holds
// participant (k+1+c) mod n, so every participant is the leaf of one
// chain, the root of one, and a middle link of the others, and sends and
// receives (n-1)/n of the object, as in a ring. Each chain position
// reduces its source's slice in place (ReduceTask.sliced) with its
// predecessor's output into an internal object. Every participant's
// gather position, sent with the chains, copies the n reduced slices into
// its copy of the target as the roots produce them (ReduceTask.gather),
// so the all-gather overlaps the reduce-scatter; the creator's gather
// creates the target in the directory, reserved for this Reduce, as a
// partial copy. Once every gather is done the coordinator publishes the
// complete copies (the creator's first, which ends the reservation) and
// answers: until then the reservation stands, so a failed AllReduce's
// release of the target drops every copy.
//
// The order of a float SUM or PROD differs from a tree's: element j of
// slice k is s[k] op (s[k-1] op (... op s[k+1])), the sources indexed by
// their place in the request, mod n.
//
// When every participant is a node of its own, the all-gather goes around
// the ring as well (ring): slice k's root is followed by n-1 relay
// positions (ReduceTask.relay) on participants k+1, ..., k-1, each
// copying its predecessor's copy of the slice as it arrives, and every
// gather copies its slices from its own node (the root's output or a
// relay's). Every byte a participant receives then comes from its
// predecessor, whose paced link alone feeds it. Fetched by each gather
// from each root instead, n-1 senders fed every downlink unpaced as a
// whole: on the testbed (8 hosts, 400 Mbit/s) some downlinks queued
// half a megabyte on average over a run (peaks of 1.7 MB, 35 ms) while
// others idled, and each chain paid those queues at every hop.
//
// There is no repair inside the shape: its chains need every source. A
// participant that fails, before the chains start or after, ends the
// sliced run instead: the AllReduce goes on as reduce-then-broadcast
// over the sources that still exist (see replan), and its reply names
// them.
type sliced struct {
	n       int
	slices  []plan.Slice
	running bool
	started map[int]bool    // positions that reported their output exists
	gathers []string        // node ids with a gather, the creator's first
	gpos    map[string]int  // node id -> its gather's position
	done    map[string]bool // node id -> its gather finished
	sent    map[int]bool    // positions whose task was sent
	gnode   map[int]string  // gather position -> node id
	fp      uint64          // the target's fingerprint, from the creator's gather
	// ring: the all-gather relays each slice around the participants
	// (every participant a node of its own; see relayPos).
	ring bool
}

func newSliced(n int, cut []plan.Slice) *sliced {
	return &sliced{n: n, slices: cut, started: map[int]bool{}, gpos: map[string]int{}, done: map[string]bool{},
		sent: map[int]bool{}, gnode: map[int]string{}}
}

// member is the participant (index into the request's sources) at chain
// index c of slice k.
func (s *sliced) member(k, c int) int { return (k + 1 + c) % s.n }

// relayPos is the position of slice k's j-th relay (1 <= j < n), on
// participant k+j: after the n·n chain positions and the n gathers'.
func (s *sliced) relayPos(k, j int) int { return s.n*s.n + s.n + k*(s.n-1) + j - 1 }

// slicedPlan fills the plan's positions: every chain, parent the next
// link, the root last.
func (r *Reduction) slicedPlan() {
	s := r.sliced
	r.plan.Shape, r.plan.Degree, r.plan.Slices = ShapeSliced, 1, int32(s.n)
	for k := 0; k < s.n; k++ {
		for c := 0; c < s.n; c++ {
			parent := int32(k*s.n + c + 1)
			if c == s.n-1 {
				parent = -1
			}
			r.plan.Positions = append(r.plan.Positions, &messages.ReducePosition{Position: int32(k*s.n + c), Parent: parent,
				ObjectId: r.req.GetSourceIds()[s.member(k, c)], Arrival: -1})
		}
	}
}

// slicedArrived is an arrival of a sliced AllReduce: the chains start
// once every source is there.
func (r *Reduction) slicedArrived() effects {
	s := r.sliced
	if s.running || len(r.sources) < s.n {
		return effects{}
	}
	s.running = true
	for _, pp := range r.plan.Positions {
		src := r.sources[pp.GetObjectId()]
		pp.NodeId, pp.Arrival = src.node.GetNodeId(), int32(src.arrival)
	}
	// The creator of the target: the caller's node if it holds a source
	// (its copy is the pinned one, as a Put's), else the first source's.
	var nodes []*messages.NodeRef
	for _, id := range r.req.GetSourceIds() {
		n := r.sources[id].node
		if !slices.ContainsFunc(nodes, func(m *messages.NodeRef) bool { return m.GetNodeId() == n.GetNodeId() }) {
			nodes = append(nodes, n)
		}
	}
	if i := slices.IndexFunc(nodes, func(m *messages.NodeRef) bool { return m.GetNodeId() == r.start.GetNodeId() }); i > 0 {
		nodes[0], nodes[i] = nodes[i], nodes[0]
	}
	for g, n := range nodes {
		s.gathers = append(s.gathers, n.GetNodeId())
		s.gpos[n.GetNodeId()] = s.n*s.n + g
		s.gnode[s.n*s.n+g] = n.GetNodeId()
		r.nodes[n.GetNodeId()] = n
	}
	// Every task at once: a reader of an intermediate that does not exist
	// yet waits for it on its node (see storenode.Store.OpenObject), so no
	// link waits for its predecessor's report and no gather for the
	// roots'. Every output is generation 1's: there are no repairs.
	var fx effects
	for p := 0; p < s.n*s.n; p++ {
		r.slicedSend(p, &fx)
	}
	s.ring = len(nodes) == s.n && s.n > 2 && !r.cfg.NoRingGather
	r.plan.RingGather = s.ring
	if s.ring {
		for k := 0; k < s.n; k++ {
			for j := 1; j < s.n; j++ {
				r.relaySend(k, j, &fx)
			}
		}
	}
	for _, n := range s.gathers {
		fx.Tasks = append(fx.Tasks, r.gatherTask(n))
	}
	return fx
}

// slicedSend sends chain position p its task.
func (r *Reduction) slicedSend(p int, fx *effects) {
	s := r.sliced
	k, c := p/s.n, p%s.n
	id := r.req.GetSourceIds()[s.member(k, c)]
	node := r.sources[id].node
	task := &messages.ReduceTask{ReduceId: r.id, TargetId: r.req.GetTargetId(), Op: r.req.GetOp(), Dtype: r.req.GetDtype(),
		Size: s.slices[k].Len, Position: int32(p), SourceId: id, Sliced: true, SourceOffset: s.slices[k].Off,
		OutputId: InternalID(r.id, p, 1), Generation: 1, Slices: int32(s.n), Bandwidth: r.B}
	if c > 0 {
		prev := r.sources[r.req.GetSourceIds()[s.member(k, c-1)]].node
		task.Children = []*messages.ReduceInput{{Node: prev, ObjectId: InternalID(r.id, p-1, 1)}}
	}
	s.sent[p] = true
	r.gen[p] = 1
	r.nodes[node.GetNodeId()] = node
	fx.Tasks = append(fx.Tasks, Task{Node: node, Task: task})
}

// relaySend sends slice k's j-th relay its task: copy the slice from
// the participant before it (the root, for the first).
func (r *Reduction) relaySend(k, j int, fx *effects) {
	s := r.sliced
	p := s.relayPos(k, j)
	node := r.sources[r.req.GetSourceIds()[(k+j)%s.n]].node
	prev := r.sources[r.req.GetSourceIds()[(k+j-1)%s.n]].node
	from := InternalID(r.id, k*s.n+s.n-1, 1) // the root's output
	if j > 1 {
		from = InternalID(r.id, s.relayPos(k, j-1), 1)
	}
	task := &messages.ReduceTask{ReduceId: r.id, TargetId: r.req.GetTargetId(), Op: r.req.GetOp(), Dtype: r.req.GetDtype(),
		Size: s.slices[k].Len, Position: int32(p), Relay: true, OutputId: InternalID(r.id, p, 1), Generation: 1,
		Slices: int32(s.n), Bandwidth: r.B, Children: []*messages.ReduceInput{{Node: prev, ObjectId: from}}}
	s.sent[p] = true
	r.gen[p] = 1
	fx.Tasks = append(fx.Tasks, Task{Node: node, Task: task})
}

// gatherTask is node's gather: every slice from its chain's root, in
// order, or in a ring from this node's own copy of it (the root's output
// or a relay's); the first gather is the creator's (Root).
func (r *Reduction) gatherTask(node string) Task {
	s := r.sliced
	p := s.gpos[node]
	task := &messages.ReduceTask{ReduceId: r.id, TargetId: r.req.GetTargetId(), Op: r.req.GetOp(), Dtype: r.req.GetDtype(),
		Size: r.size, Position: int32(p), Root: node == s.gathers[0], Gather: true, OutputId: r.req.GetTargetId(), Generation: 1,
		Slices: int32(s.n), Bandwidth: r.B}
	// In a ring, this node is participant i (its only one).
	i := slices.IndexFunc(r.req.GetSourceIds(), func(id string) bool { return r.sources[id].node.GetNodeId() == node })
	for k := 0; k < s.n; k++ {
		in := &messages.ReduceInput{Node: r.sources[r.req.GetSourceIds()[k]].node, ObjectId: InternalID(r.id, k*s.n+s.n-1, 1),
			Offset: s.slices[k].Off}
		if s.ring && i != k {
			in.Node, in.ObjectId = r.nodes[node], InternalID(r.id, s.relayPos(k, (i-k+s.n)%s.n), 1)
		}
		task.Children = append(task.Children, in)
	}
	s.sent[p] = true
	r.gen[p] = 1
	return Task{Node: r.nodes[node], Task: task}
}

func (r *Reduction) slicedStarted(m *messages.ReduceTaskStarted) effects {
	s := r.sliced
	p := int(m.GetPosition())
	if !s.sent[p] || m.GetGeneration() != 1 || s.started[p] {
		return effects{}
	}
	if err := messages.ErrOrNil(m.GetError()); err != nil {
		return r.fail(messages.Errorf(messages.AsError(err).GetCode(), "allreduce: sliced position %d: %v", p, err))
	}
	s.started[p] = true
	return effects{}
}

func (r *Reduction) slicedDone(m *messages.ReduceTaskDone) effects {
	s := r.sliced
	p := int(m.GetPosition())
	if !s.sent[p] || m.GetGeneration() != 1 {
		return effects{}
	}
	if err := messages.ErrOrNil(m.GetError()); err != nil {
		return r.fail(messages.Errorf(messages.AsError(err).GetCode(), "allreduce: sliced position %d: %v", p, err))
	}
	node, ok := s.gnode[p]
	if !ok || s.done[node] {
		return effects{}
	}
	s.done[node] = true
	if node == s.gathers[0] {
		s.fp = m.GetFingerprint()
	}
	if len(s.done) < len(s.gathers) {
		return effects{}
	}
	r.reply = r.success(r.req.GetSourceIds())
	var fx effects
	// The creator's copy first: it ends the reservation, and the others
	// are copies of a known object. One sender, one shard: in order. Every
	// gather's node completes its copy on its commit (until then a Get
	// there could return a run a participant's failure abandons), and the
	// AllReduce answers once each says its copy is whole: a participant's
	// Get of the result, sent after its commit, answers then.
	for i, id := range s.gathers {
		fx.Commit = append(fx.Commit, Task{Node: r.nodes[id], Task: &messages.ReduceTask{ReduceId: r.id, Position: int32(s.gpos[id]), Generation: 1}})
		fx.Publish = append(fx.Publish, &messages.PublishLocation{ObjectId: r.req.GetTargetId(), Node: r.nodes[id],
			State: messages.LocationState_COMPLETE, Size: r.size, Fingerprint: s.fp, Creator: i == 0,
			ProducedBy: r.id, ReducedIds: r.reply.GetReducedIds()})
		r.askFetch(r.nodes[id], &fx)
	}
	fx.merge(r.maybeFinish())
	return fx
}

// slicedCopies are the nodes whose gather may hold a copy of the target
// that the directory does not know (only the creator's is registered
// before the end), which a failed AllReduce must drop itself: a gather
// worker keeps a complete copy when its coordinator stops, as the root
// keeps the target, because that stop overtakes the release that says
// whether the AllReduce succeeded.
func (r *Reduction) slicedCopies() []*messages.NodeRef {
	var out []*messages.NodeRef
	for _, id := range r.sliced.gathers {
		if r.sliced.sent[r.sliced.gpos[id]] {
			out = append(out, r.nodes[id])
		}
	}
	return out
}
