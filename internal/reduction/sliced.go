package reduction

import (
	"errors"
	"slices"

	"github.com/hoplite-go/hoplite/internal/reduction/plan"
	"github.com/hoplite-go/hoplite/messages"
)

// ShapeSliced is the AllReduce shape that reduce-scatters, then
// all-gathers, through the store (see slicedRun).
const ShapeSliced = "sliced"

// slicedRun is the state of a sliced AllReduce: a reduce-scatter, then an
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
// participant that fails after the chains started ends the sliced run
// instead: the AllReduce goes on as reduce-then-broadcast over the
// sources that still exist (see replan), its source among them if
// another member holds a whole copy of it, and its reply names them.
// Before the chains, the run waits for such a copy of a failed
// participant's source, or for the shard's word that none is left.
type slicedRun struct {
	*core

	n       int
	slices  []plan.Slice
	running bool
	started map[int]bool    // positions that reported their output exists
	gathers []string        // node ids with a gather, the creator's first
	gpos    map[string]int  // node id -> its gather's position
	done    map[string]bool // node id -> its gather finished
	sent    map[int]bool    // positions whose task was sent listed
	allSent bool            // every position's task went out in the participants' shares
	gnode   map[int]string  // gather position -> node id
	fp      uint64          // the target's fingerprint, from the creator's gather
	// ring: the all-gather relays each slice around the participants
	// (every participant a node of its own; see relayPos).
	ring bool
}

func newSliced(c *core, n int, cut []plan.Slice) *slicedRun {
	return &slicedRun{core: c, n: n, slices: cut, started: map[int]bool{}, gpos: map[string]int{}, done: map[string]bool{},
		sent: map[int]bool{}, gnode: map[int]string{}}
}

// member is the participant (index into the request's sources) at chain
// index c of slice k.
func (s *slicedRun) member(k, c int) int { return (k + 1 + c) % s.n }

// relayPos is the position of slice k's j-th relay (1 <= j < n), on
// participant k+j: after the n·n chain positions and the n gathers'.
func (s *slicedRun) relayPos(k, j int) int { return s.n*s.n + s.n + k*(s.n-1) + j - 1 }

// fillPlan fills the plan's positions: slice 0's chain, parent the next
// link, the root last, which holds every participant once; slice k's
// chain is the same rotated by k (member). All n chains, n² positions
// of about 75 bytes, made the reply to an AllReduce of 256 sources
// carry 4.9 MB, through the actor plane to the caller.
func (s *slicedRun) fillPlan() {
	s.plan.Shape, s.plan.Degree, s.plan.Slices = ShapeSliced, 1, int32(s.n)
	for c := 0; c < s.n; c++ {
		parent := int32(c + 1)
		if c == s.n-1 {
			parent = -1
		}
		s.plan.Positions = append(s.plan.Positions, &messages.ReducePosition{Position: int32(c), Parent: parent,
			ObjectId: s.req.GetSourceIds()[s.member(0, c)], Arrival: -1})
	}
}

// arrived is an arrival of a sliced AllReduce: the chains start
// once every source is there.
func (s *slicedRun) arrived() effects {
	if s.running || len(s.sources) < s.n {
		return effects{}
	}
	s.running = true
	for _, pp := range s.plan.Positions {
		src := s.sources[pp.GetObjectId()]
		pp.NodeId, pp.Arrival = src.node.GetNodeId(), int32(src.arrival)
	}
	// The creator of the target: the caller's node if it holds a source
	// (its copy is the pinned one, as a Put's), else the first source's.
	var nodes []*messages.NodeRef
	for _, id := range s.req.GetSourceIds() {
		n := s.sources[id].node
		if !slices.ContainsFunc(nodes, func(m *messages.NodeRef) bool { return m.GetNodeId() == n.GetNodeId() }) {
			nodes = append(nodes, n)
		}
	}
	if i := slices.IndexFunc(nodes, func(m *messages.NodeRef) bool { return m.GetNodeId() == s.start.GetNodeId() }); i > 0 {
		nodes[0], nodes[i] = nodes[i], nodes[0]
	}
	for g, n := range nodes {
		s.gathers = append(s.gathers, n.GetNodeId())
		s.gpos[n.GetNodeId()] = s.n*s.n + g
		s.gnode[s.n*s.n+g] = n.GetNodeId()
		s.nodes[n.GetNodeId()] = n
	}
	// Every task at once: a reader of an intermediate that does not exist
	// yet waits for it on its node (see objstore.Store.OpenObject), so no
	// link waits for its predecessor's report and no gather for the
	// roots'. Every output is generation 1's: there are no repairs.
	var fx effects
	s.ring = len(nodes) == s.n && s.n > 2 && !s.cfg.NoRingGather
	s.plan.RingGather = s.ring
	if s.ring && !s.cfg.ListRingTasks && !s.cfg.UnbatchedTasks && s.n <= MaxRingSlices {
		// Each participant's share stated, in the order of its first
		// position (participant 1 holds position 0): the node lists its
		// tasks itself (ExpandRing), and the coordinator's uplink carries
		// n shares, not 2n² tasks.
		s.allSent = true
		for c := 1; c <= s.n; c++ {
			fx.Rings = append(fx.Rings, s.ringShare(c%s.n))
		}
		return fx
	}
	for p := 0; p < s.n*s.n; p++ {
		s.send(p, &fx)
	}
	if s.ring {
		for k := 0; k < s.n; k++ {
			for j := 1; j < s.n; j++ {
				s.relaySend(k, j, &fx)
			}
		}
	}
	for _, n := range s.gathers {
		fx.Tasks = append(fx.Tasks, s.gatherTask(n))
	}
	return fx
}

// ringShare is participant i's share of a ring (see ExpandRing, which
// lists from it what send, relaySend and gatherTask list).
func (s *slicedRun) ringShare(i int) ringShare {
	src := s.req.GetSourceIds()[i]
	node := s.sources[src].node
	sh := &messages.SlicedRingShare{ReduceId: s.id, TargetId: s.req.GetTargetId(), Op: s.req.GetOp(), Dtype: s.req.GetDtype(),
		Size: s.size, Slices: int32(s.n), Index: int32(i), SourceId: src, Node: node,
		Predecessor:    s.sources[s.req.GetSourceIds()[(i-1+s.n)%s.n]].node,
		GatherPosition: int32(s.gpos[node.GetNodeId()]), Root: node.GetNodeId() == s.gathers[0], Bandwidth: s.B}
	return ringShare{Node: node, Share: sh}
}

// ringShare is a SlicedRingShare and the node it goes to.
type ringShare struct {
	Node  *messages.NodeRef
	Share *messages.SlicedRingShare
}

// isSent says whether position p's task went out: listed (sent), or in
// a share, which states every chain, relay and gather position at once.
func (s *slicedRun) isSent(p int) bool {
	if !s.allSent {
		return s.sent[p]
	}
	_, gather := s.gnode[p]
	return p >= 0 && p < s.n*s.n || gather || p >= s.relayPos(0, 1) && p <= s.relayPos(s.n-1, s.n-1)
}

// anySent says whether any position's task went out.
func (s *slicedRun) anySent() bool { return s.allSent || len(s.sent) > 0 }

// send sends chain position p its task.
func (s *slicedRun) send(p int, fx *effects) {
	k, c := p/s.n, p%s.n
	id := s.req.GetSourceIds()[s.member(k, c)]
	node := s.sources[id].node
	task := &messages.ReduceTask{ReduceId: s.id, TargetId: s.req.GetTargetId(), Op: s.req.GetOp(), Dtype: s.req.GetDtype(),
		Size: s.slices[k].Len, Position: int32(p), SourceId: id, Sliced: true, SourceOffset: s.slices[k].Off,
		OutputId: InternalID(s.id, p, 1), Generation: 1, Slices: int32(s.n), Bandwidth: s.B,
		Quiet: c < s.n-1} // a chain's root reports (with its link measured), the rest only failures
	if c > 0 {
		prev := s.sources[s.req.GetSourceIds()[s.member(k, c-1)]].node
		task.Children = []*messages.ReduceInput{{Node: prev, ObjectId: InternalID(s.id, p-1, 1)}}
	}
	s.sent[p] = true
	s.nodes[node.GetNodeId()] = node
	fx.Tasks = append(fx.Tasks, Task{Node: node, Task: task})
}

// relaySend sends slice k's j-th relay its task: copy the slice from
// the participant before it (the root, for the first).
func (s *slicedRun) relaySend(k, j int, fx *effects) {
	p := s.relayPos(k, j)
	node := s.sources[s.req.GetSourceIds()[(k+j)%s.n]].node
	prev := s.sources[s.req.GetSourceIds()[(k+j-1)%s.n]].node
	from := InternalID(s.id, k*s.n+s.n-1, 1) // the root's output
	if j > 1 {
		from = InternalID(s.id, s.relayPos(k, j-1), 1)
	}
	task := &messages.ReduceTask{ReduceId: s.id, TargetId: s.req.GetTargetId(), Op: s.req.GetOp(), Dtype: s.req.GetDtype(),
		Size: s.slices[k].Len, Position: int32(p), Relay: true, OutputId: InternalID(s.id, p, 1), Generation: 1,
		Slices: int32(s.n), Bandwidth: s.B, Children: []*messages.ReduceInput{{Node: prev, ObjectId: from}}, Quiet: true}
	s.sent[p] = true
	fx.Tasks = append(fx.Tasks, Task{Node: node, Task: task})
}

// gatherTask is node's gather: every slice from its chain's root, in
// order, or in a ring from this node's own copy of it (the root's output
// or a relay's); the first gather is the creator's (Root).
func (s *slicedRun) gatherTask(node string) Task {
	p := s.gpos[node]
	task := &messages.ReduceTask{ReduceId: s.id, TargetId: s.req.GetTargetId(), Op: s.req.GetOp(), Dtype: s.req.GetDtype(),
		Size: s.size, Position: int32(p), Root: node == s.gathers[0], Gather: true, OutputId: s.req.GetTargetId(), Generation: 1,
		Slices: int32(s.n), Bandwidth: s.B}
	// In a ring, this node is participant i (its only one).
	i := slices.IndexFunc(s.req.GetSourceIds(), func(id string) bool { return s.sources[id].node.GetNodeId() == node })
	for k := 0; k < s.n; k++ {
		in := &messages.ReduceInput{Node: s.sources[s.req.GetSourceIds()[k]].node, ObjectId: InternalID(s.id, k*s.n+s.n-1, 1),
			Offset: s.slices[k].Off}
		if s.ring && i != k {
			in.Node, in.ObjectId = s.nodes[node], InternalID(s.id, s.relayPos(k, (i-k+s.n)%s.n), 1)
		}
		task.Children = append(task.Children, in)
	}
	s.sent[p] = true
	return Task{Node: s.nodes[node], Task: task}
}

// goneSource reports the source, and its node, whose copy a report of
// chain position p says is not there (NOT_FOUND): evicted or dropped
// after the directory located it (see Reduction.slicedSourceGone). Only
// a chain position opens an application object; a relay's or a gather's
// inputs, and a chain's input from its predecessor, are the run's own.
func (s *slicedRun) goneSource(reduceID string, p, gen int, err error) (id, node string, ok bool) {
	if s.over || s.reply != nil || !s.running || reduceID != s.id || p < 0 || p >= s.n*s.n || !s.isSent(p) || gen != 1 ||
		!errors.Is(err, messages.ErrNotFound) {
		return "", "", false
	}
	id = s.req.GetSourceIds()[s.member(p/s.n, p%s.n)]
	src := s.sources[id]
	if src == nil {
		return "", "", false
	}
	return id, src.node.GetNodeId(), true
}

func (s *slicedRun) taskStarted(m *messages.ReduceTaskStarted) effects {
	p := int(m.GetPosition())
	if s.over || m.GetReduceId() != s.id || !s.isSent(p) || m.GetGeneration() != 1 || s.started[p] {
		return effects{}
	}
	if err := messages.ErrOrNil(m.GetError()); err != nil {
		fx := s.fail(messages.Errorf(messages.AsError(err).GetCode(), "allreduce: sliced position %d: %v", p, err))
		if node, ok := s.gnode[p]; ok && node == s.gathers[0] && errors.Is(err, messages.ErrUnavailable) {
			return s.targetNotCreated(fx) // the creator's gather registers the target
		}
		return fx
	}
	s.started[p] = true
	return effects{}
}

func (s *slicedRun) taskDone(m *messages.ReduceTaskDone) effects {
	p := int(m.GetPosition())
	if s.over || m.GetReduceId() != s.id || !s.isSent(p) || m.GetGeneration() != 1 {
		return effects{}
	}
	if err := messages.ErrOrNil(m.GetError()); err != nil {
		return s.fail(messages.Errorf(messages.AsError(err).GetCode(), "allreduce: sliced position %d: %v", p, err))
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
	s.reply = s.success(s.req.GetSourceIds())
	var fx effects
	// The creator's copy first: it ends the reservation, and the others
	// are copies of a known object. One sender, one shard: in order. Every
	// gather's node completes its copy on its commit (until then a Get
	// there could return a run a participant's failure abandons), and the
	// AllReduce answers once each says its copy is whole: a participant's
	// Get of the result, sent after its commit, answers then.
	for i, id := range s.gathers {
		fx.Commit = append(fx.Commit, Task{Node: s.nodes[id], Task: &messages.ReduceTask{ReduceId: s.id, Position: int32(s.gpos[id]), Generation: 1}})
		fx.Publish = append(fx.Publish, &messages.PublishLocation{ObjectId: s.req.GetTargetId(), Node: s.nodes[id],
			State: messages.LocationState_COMPLETE, Size: s.size, Fingerprint: s.fp, Creator: i == 0,
			ProducedBy: s.id, ReducedIds: s.reply.GetReducedIds()})
		s.askFetch(s.nodes[id], &fx)
	}
	fx.merge(s.maybeFinish())
	return fx
}

// copies are the nodes whose gather may hold a copy of the target
// that the directory does not know (only the creator's is registered
// before the end), which a failed AllReduce must drop itself: a gather
// worker keeps a complete copy when its coordinator stops, as the root
// keeps the target, because that stop overtakes the release that says
// whether the AllReduce succeeded.
func (s *slicedRun) copies() []*messages.NodeRef {
	var out []*messages.NodeRef
	for _, id := range s.gathers {
		if s.isSent(s.gpos[id]) {
			out = append(out, s.nodes[id])
		}
	}
	return out
}

// fail is the core's failure, and drops the copies of the target that
// gathers may hold (see copies).
func (s *slicedRun) fail(err *messages.Error) effects {
	fx := s.core.fail(err)
	fx.Drop = s.copies()
	return fx
}
