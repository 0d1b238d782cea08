package reduction

import (
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/messages"
)

// core is what every shape of a Reduce shares: the request and its
// deadline, the sources as they arrive, the plan the reply carries, the
// nodes that run tasks, the participants' Gets of an AllReduce's result,
// and the answer; and the output every step returns (out).
type core struct {
	id       string
	start    *messages.NodeRef // the caller's node
	req      *messages.Reduce
	cfg      Config
	deadline time.Time
	L        time.Duration
	B        float64

	size     int64 // -1 until the first source arrives
	sources  map[string]*source
	arrivals []string
	gone     map[string]bool // deleted sources
	plan     *messages.ReducePlan
	watched  map[string]bool
	nodes    map[string]*messages.NodeRef
	// all_reduce: the participants' Gets of the result. Each node is asked
	// once (a repaired target rewinds under a running Get); a repair that
	// brings in a new participant asks it when the new root starts; a
	// participant that fails is no longer waited for.
	asked    map[string]bool // node id -> a Get was sent
	fetching map[string]bool // node id -> its Get is still running
	reply    *messages.ReduceReply
	over     bool
	// completedBy says what fixed a knee policy's count, once it did
	// (ReduceReply.completed_by).
	completedBy string

	begun time.Time // when the Reduce started (for ReduceDone's Elapsed)
	// lost: sources of an AllReduce whose node died, or that the
	// directory reported lost (no copy left), until a new copy arrives
	// (see allReduceLost).
	lost map[string]bool
	// failed: nodes whose failure this Reduction applied. A node id names
	// one incarnation of a member, never reused (messages.NodeRef), so a
	// location naming one of these was sent before the failure (a shard
	// that had not heard of it yet, a resubscription that crossed it)
	// and is stale: taking it made a lost source possible again, and put
	// it on a dead node.
	failed map[string]bool
	// seen: sources a location of which arrived. A resubscription to one
	// that is missing again says so (Subscribe.located_before): a shard
	// that restarted or moved knows nothing of a source whose copies went
	// before, and answers LOST only then, instead of leaving the Reduce
	// to wait for it until its deadline.
	seen map[string]bool
}

// watch asks the shell to watch n, once.
func (r *core) watch(n *messages.NodeRef, fx *effects) {
	if n != nil && !r.watched[n.GetNodeId()] {
		r.watched[n.GetNodeId()] = true
		fx.Watch = append(fx.Watch, n)
	}
}

// possible is how many sources may still take part: not deleted, not
// lost.
func (r *core) possible() int {
	n := 0
	for _, id := range r.req.GetSourceIds() {
		if !r.gone[id] && !r.lost[id] {
			n++
		}
	}
	return n
}

// setNum lowers the number of sources to reduce. The request is copied,
// not changed: the shell's StartReduce holds it.
func (r *core) setNum(num int) {
	req := proto.Clone(r.req).(*messages.Reduce)
	req.NumObjects = int32(num)
	r.req = req
}
