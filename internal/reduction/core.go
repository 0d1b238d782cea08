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
	id    string
	start *messages.NodeRef // the caller's node
	req   *messages.Reduce
	// isSource holds req's source ids, made at the first lookup: a
	// Reduce of n sources looks one up at each of its n arrivals.
	isSource map[string]bool
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
	// subs counts the Subscribes sent for each source, and ended the
	// answers that ended one (LocationUpdate.ended, see
	// Subscribe.once_below): a source with as many of each has no
	// subscription at its shard, and needs no Unsubscribe (see followed).
	subs, ended map[string]int
	// unfollowed counts the subscribed sources none of whose
	// subscriptions stands: refollow has nothing to look for without one.
	unfollowed int
}

// subscription is a Subscribe to source id's shard. With onceBelow > 0
// the shard may end it with an answer that carries the source's bytes.
func (r *core) subscription(id string, onceBelow int64) *messages.Subscribe {
	if r.subs[id] > 0 && !r.followed(id) {
		r.unfollowed--
	}
	r.subs[id]++
	return &messages.Subscribe{ObjectId: id, LocatedBefore: r.seen[id], OnceBelow: onceBelow}
}

// followed reports whether source id may have a subscription at its
// shard: a Subscribe sent that no ended answer accounts for. A shard
// ends a Subscribe with once_below only when it keeps no subscription of
// this Reduction's to the source (none before, none after), and marks
// only that answer ended, so as many ended answers as Subscribes mean
// that none stands, whatever order they took.
func (r *core) followed(id string) bool { return r.subs[id] > r.ended[id] }

// endedOne takes an answer that ended a subscription to source id. More
// than were sent (a shard that answered one Subscribe twice) count for
// none.
func (r *core) endedOne(id string) {
	if !r.followed(id) {
		return
	}
	r.ended[id]++
	if !r.followed(id) {
		r.unfollowed++
	}
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

// names says whether id is one of the request's sources.
func (c *core) names(id string) bool {
	if c.isSource == nil {
		c.isSource = make(map[string]bool, len(c.req.GetSourceIds()))
		for _, s := range c.req.GetSourceIds() {
			c.isSource[s] = true
		}
	}
	return c.isSource[id]
}
