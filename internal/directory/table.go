package directory

import (
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/messages"
)

// TableConfig bounds what a LocationTable remembers.
type TableConfig struct {
	// InlineLimit: objects strictly smaller than this many bytes are kept
	// inline in the directory and returned in the LocateReply (while the
	// shard's uplink is not their bottleneck: see AnswerWithBytes).
	InlineLimit int64
	// InlineUplink is the payload rate, in bytes per second, of the
	// uplink of the shard's host, which its inline answers' bytes take
	// (DefaultInlineUplink if 0).
	InlineUplink float64
	// MaxObjectIDLen rejects longer ids.
	MaxObjectIDLen int
	// TombstoneLimit is how many deleted ids are remembered so that a late
	// Put, Get or publication of them gets DELETED (oldest forgotten first).
	TombstoneLimit int
	// TransferLogLimit is how many transfers are recorded per object.
	TransferLogLimit int
	// MaxEntries bounds the entries a parked request may add: a Locate or
	// a waiting Query of an id the table does not hold yet is answered
	// RESOURCE_EXHAUSTED once the table has this many entries (known
	// objects count; Puts and Gets of objects it holds are never
	// refused). Without it, a peer parking requests for ids that never
	// appear, with deadlines of up to MaxTimeout, grew the table without
	// bound.
	MaxEntries int
	// MaxWaitersPerObject bounds the requests parked on one object (a
	// broadcast to that many receivers that all ask before any copy
	// exists); past it a Locate or Query is answered RESOURCE_EXHAUSTED.
	MaxWaitersPerObject int
	// MaxSubscribersPerObject bounds the subscribers that follow one
	// object (the Reduces that take it as a source at once); past it a
	// Subscribe is answered with a LocationUpdate whose error is
	// RESOURCE_EXHAUSTED.
	MaxSubscribersPerObject int
	// Amnesic marks the table of a shard that started over (rebuilt after
	// a crash or moved to another member): ids it does not know may have
	// existed, and may have been lost with the shard's old host. A Delete
	// of such an id succeeds (and leaves a tombstone, so a copy
	// republished later is dropped) instead of answering NOT_FOUND. Every
	// Delete waits until the store nodes have republished (Republished),
	// so that it names every copy to its caller.
	Amnesic bool
	// AwaitRepublish makes every Delete wait until the store nodes have
	// republished (Republished), as an amnesic table's do, in a table
	// that did not start over: a shard placed on a member starts empty
	// however it got there (the cluster's first placement, a member that
	// joined or rejoined, another that left), and the copies of objects
	// that exist are still on their way to it. Answered before they
	// arrive, a Delete found no entry and said NOT_FOUND of an object
	// that exists. A table that is never told Republished must leave it
	// unset.
	AwaitRepublish bool
	// Inline, if set, is where the table publishes the plain inline
	// objects it serves, for Locates answered without it, and learns the
	// copies those answers made (InlinePublisher). Nil: nothing is
	// published (the simulator's tables).
	Inline InlinePublisher
	// Keeper, if set, is where the table sends what no store node would
	// republish to its shard's next table (a *messages.Tombstones): ids it
	// marked lost and ids it deleted that no node held. A shard's keeper
	// is its member's store node (see carried.go).
	Keeper any
	// Instance numbers this table among the tables a shard starts over
	// with (the low 24 bits count): every epoch it issues
	// (LocateReply.epoch) carries it, above a count of its own. A shard
	// gives each of its tables a random one, so a table that started over
	// issues no epoch an earlier one did, and tells a copy fetched under
	// one of its own epochs from one fetched under an earlier table's
	// (see FetchDone, and SameTable).
	Instance uint32
	// FanOut is how many receivers one copy may stream to at once: 0 or
	// 1, one, and a broadcast whose receivers ask together forms a chain;
	// k > 1, a tree about log_k N deep. FanOutAuto chooses it for each
	// Locate by the cost model (plan.ChooseBroadcastFanOut) from the
	// receivers expected, the uplink (InlineUplink), Latency, Intake and
	// Burst, as a cluster's shards do; see fanout.go.
	FanOut int
	// Receivers is how many receivers a broadcast is expected to have
	// (a cluster's members but one); the fan-out FanOutAuto chooses takes
	// the larger of it and the receivers an object has now (its partial
	// copies and waiting Locates). 0: only those.
	Receivers int
	// Latency is the one-way latency of a chunk between two members, for
	// the fan-out FanOutAuto chooses (DefaultBroadcastLatency if 0).
	Latency time.Duration
	// Intake is the rate, in bytes per second, at which a receiver takes
	// a stream's bytes in (its CPU per byte, its downlink), for the
	// fan-out FanOutAuto chooses; 0: not known, no slower than the uplink.
	Intake float64
	// Burst is the bytes a member's link passes at once after it idled
	// (a shaper's token bucket), for the fan-out FanOutAuto chooses: a
	// hop's first chunk waits only for the rest. 0: none.
	Burst float64
	// CPU is the rate, in bytes per second, at which a receiver's CPU
	// takes bytes in, for the fan-out FanOutAuto chooses: a hop's first
	// chunk costs it that long even where Burst passes the chunk at once
	// (plan.BroadcastLink.CPU). 0: not known.
	CPU float64
	// LossGrace bounds how long an object whose last readable copy went
	// stays in doubt while a receiver's partial copy may be whole already,
	// its FetchDone on the way (DefaultLossGrace if 0; see doubt.go). The
	// shell may lengthen it as measured (SetLossGrace); it is the floor.
	LossGrace time.Duration
	// Senders, if set, chooses the sender of every Locate for a copy in
	// place of the broadcast tree (see Senders). Nil in production; the
	// baselines Hoplite is measured against set it (internal/experiments).
	Senders Senders
}

// Senders is a policy that chooses which copy a receiver fetches from:
// given the copies of the object (in no particular order) but the one
// the receiver must avoid (a sender that failed it), it returns the node of the one to fetch from,
// or false to wait for another copy. A copy fetched so claims no sender
// and is offered to no later receiver, whose sender the policy chooses
// too; and such a Locate of an inline object is answered with the bytes.
type Senders func(receiver string, copies []Copy) (node string, ok bool)

// Copy is what a Senders policy sees of one copy of an object.
type Copy struct {
	// Node is the node that holds the copy.
	Node string
	// Creator marks the copy of the node that Put the object.
	Creator bool
	// State is how much of the object the copy holds.
	State messages.LocationState
}

// epochCountBits is how many low bits of an epoch count a table's epochs
// (2^40: more than a table issues in years); the bits above are its
// Instance.
const epochCountBits = 40

// SameTable reports whether two epochs were issued by one table: then
// they differ only if the object's contents changed between them (a
// Reduce made its target again, or a failed one released it). Epochs of
// two tables say nothing of the sort: the shard started over in between,
// and an object's contents change only together with every copy the
// directory knows of.
func SameTable(a, b uint64) bool { return a>>epochCountBits == b>>epochCountBits }

// DefaultTableConfig returns the limits used when a field is zero.
func DefaultTableConfig() TableConfig {
	return TableConfig{InlineLimit: 64 << 10, InlineUplink: DefaultInlineUplink, MaxObjectIDLen: 1024, TombstoneLimit: 1 << 16, TransferLogLimit: 256,
		MaxEntries: 1 << 20, MaxWaitersPerObject: 1 << 14, MaxSubscribersPerObject: 1 << 14, LossGrace: DefaultLossGrace}
}

func (c TableConfig) withDefaults() TableConfig {
	d := DefaultTableConfig()
	if c.InlineLimit == 0 {
		c.InlineLimit = d.InlineLimit
	}
	if !(c.InlineUplink > 0) || math.IsInf(c.InlineUplink, 0) {
		c.InlineUplink = d.InlineUplink
	}
	if c.MaxObjectIDLen == 0 {
		c.MaxObjectIDLen = d.MaxObjectIDLen
	}
	if c.TombstoneLimit == 0 {
		c.TombstoneLimit = d.TombstoneLimit
	}
	if c.TransferLogLimit == 0 {
		c.TransferLogLimit = d.TransferLogLimit
	}
	if c.MaxEntries <= 0 {
		c.MaxEntries = d.MaxEntries
	}
	if c.MaxWaitersPerObject <= 0 {
		c.MaxWaitersPerObject = d.MaxWaitersPerObject
	}
	if c.MaxSubscribersPerObject <= 0 {
		c.MaxSubscribersPerObject = d.MaxSubscribersPerObject
	}
	if c.LossGrace <= 0 {
		c.LossGrace = d.LossGrace
	}
	if c.Latency <= 0 {
		c.Latency = DefaultBroadcastLatency
	}
	return c
}

type entry struct {
	id          string
	known       bool // created or published: size and fingerprint are set
	size        int64
	fingerprint uint64
	hasInline   bool
	inline      []byte
	// inlineQ is the inline answers' bytes still on the shard's uplink.
	inlineQ     inlineQueue
	locs        map[string]*location
	seq         uint64
	transfers   []*messages.Transfer
	waiters     []*waiter
	subscribers []subscriber
	// target is the entry's Reduce side: the Reduce that reserved,
	// created or committed the id, if any (reduce_targets.go).
	target reduceTarget
	// epoch names the entry's contents (see LocationTable.newEpoch):
	// copies of another epoch hold bytes that are no longer valid.
	epoch uint64
	// whole: a copy of these contents was complete once.
	whole bool
	// withdrawn is the creator whose copy went while its node lived (its
	// Put failed, or a receiver named it a failed sender) before any copy
	// was whole. Until a creator's or a whole copy is listed again, or
	// that node fails, the object is not lost (see doubt.go).
	withdrawn *messages.NodeRef
	// doubt is set while the object has no readable copy but a
	// receiver's partial copy may be whole already (see loss.go).
	doubt *lossDoubt
}

// LocationTable is the state of one directory shard. It is not safe for
// concurrent use: its shell steps it from one goroutine.
type LocationTable struct {
	cfg        TableConfig
	fan        *fanScratch // pickShallowest's, reused (a table has one owner)
	entries    map[string]*entry
	tombstones map[string]struct{}
	tombOrder  []string // FIFO of tombstones, bounded by TombstoneLimit
	// deletedFrom names, for each tombstone, the nodes that held a copy
	// when the id was deleted or published one since: a Delete of an id
	// already deleted asks them again (see deleteObject).
	deletedFrom map[string][]*messages.NodeRef
	// parkedDeletes are the Deletes an amnesic table (or one that awaits
	// the republication) holds until every store node has republished (see deleteObject); republished says
	// they have.
	parkedDeletes []parkedDelete
	republished   bool
	// amnesic: ids this table does not know may have existed (see
	// Amnesic); carry is what earlier tables of the shard passed on.
	amnesic bool
	carry   carried
	// lossGrace is the grace of a doubt that starts now (SetLossGrace).
	lossGrace time.Duration
	// lost remembers objects whose every copy died with its node, so a Get
	// fails at once with LOST instead of waiting for a copy that will not
	// come; a new Put, or a whole copy that the loss did not drop
	// (republished, or a fetch that completed), ends it. Bounded like the
	// tombstones.
	lost      map[string]lostMark
	lostOrder []lostRef // FIFO, bounded by TombstoneLimit
	lostSeq   uint64
	// nextDeadline is when a Tick may next have a parked request to
	// time out, or a doubt to settle (zero: neither). It may be early,
	// never late: a request answered before its deadline leaves it in
	// place, and that Tick finds nothing. A doubt that just began asks
	// for a Tick at once, long past, whose time its grace starts from
	// (see doubt.go).
	nextDeadline time.Time
	// armed is the Tick the table last asked for and has not had back
	// (zero: none pending).
	armed time.Time
	// epochs is how many epochs the table issued (see newEpoch).
	epochs uint64
	// runs are the Reduce runs this table reserved a target for,
	// bounded by TombstoneLimit (FIFO runOrder; see reservedHere).
	runs     map[string]struct{}
	runOrder []string
	// subsOf is the ids each subscriber key follows, so that a
	// subscriber that died is dropped everywhere (DropSubscriber).
	subsOf map[string]map[string]struct{}
}

// NewLocationTable returns an empty table.
func NewLocationTable(cfg TableConfig) *LocationTable {
	cfg = cfg.withDefaults()
	return &LocationTable{cfg: cfg, lossGrace: cfg.LossGrace, amnesic: cfg.Amnesic, entries: map[string]*entry{}, tombstones: map[string]struct{}{},
		deletedFrom: map[string][]*messages.NodeRef{},
		lost:        map[string]lostMark{}, runs: map[string]struct{}{}, subsOf: map[string]map[string]struct{}{}}
}

func (t *LocationTable) check(id string) *messages.Error {
	if err := ValidateObjectID(id, t.cfg.MaxObjectIDLen); err != nil {
		return err
	}
	if _, ok := t.tombstones[id]; ok {
		return messages.Errorf(messages.ErrorCode_DELETED, "object %q was deleted", id)
	}
	return nil
}

func nodeOK(n *messages.NodeRef) bool { return n != nil && n.GetNodeId() != "" }

func (t *LocationTable) entry(id string) *entry {
	e := t.entries[id]
	if e == nil {
		e = &entry{id: id, locs: map[string]*location{}, epoch: t.newEpoch()}
		t.entries[id] = e
	}
	return e
}

// newEpoch issues an epoch: a name for an entry's contents that no other
// entry, no earlier contents of the same id and no other table of the
// shard had (TableConfig.Instance). An entry gets one when it is
// made, and a new one whenever its contents may change: a Reduce creates
// its target again, a failed Reduce releases it, or the id is created
// anew after every copy went.
func (t *LocationTable) newEpoch() uint64 {
	t.epochs++
	return t.base() | t.epochs&(1<<epochCountBits-1)
}

func (t *LocationTable) base() uint64 { return uint64(t.cfg.Instance&(1<<24-1)) << epochCountBits }

// ownEpoch reports whether this table issued epoch ep.
func (t *LocationTable) ownEpoch(ep uint64) bool {
	n := ep &^ t.base()
	return SameTable(ep, t.base()) && n > 0 && n <= t.epochs
}

// forgetIfIdle drops an entry that holds nothing and nobody waits on, so
// Gets of ids that never appear leave no trace once they give up.
func (t *LocationTable) forgetIfIdle(e *entry) {
	if !e.known && !e.target.reserved() && len(e.waiters) == 0 && len(e.subscribers) == 0 {
		delete(t.entries, e.id)
	}
}

// Len is the number of entries, known or waited on (for tests and metrics).
func (t *LocationTable) Len() int { return len(t.entries) }

func (e *entry) info() *messages.ObjectInfo {
	info := &messages.ObjectInfo{ObjectId: e.id, Size: e.size, HasInline: e.hasInline}
	for _, loc := range e.locs {
		info.Locations = append(info.Locations, &messages.Location{Node: loc.node, State: loc.state,
			Serving: loc.servingTo != "", Creator: loc.creator})
	}
	slices.SortFunc(info.Locations, func(a, b *messages.Location) int {
		return strings.Compare(a.GetNode().GetNodeId(), b.GetNode().GetNodeId())
	})
	for _, tr := range e.transfers {
		info.Transfers = append(info.Transfers, proto.Clone(tr).(*messages.Transfer))
	}
	return info
}

// Known is the number of objects the table knows (created or published).
func (t *LocationTable) Known() int {
	n := 0
	for _, e := range t.entries {
		if e.known {
			n++
		}
	}
	return n
}

// ListLimit caps one page of List.
const ListLimit = 1000

// List answers one page of the objects this table knows (created or
// published), in id order after req's after id.
func (t *LocationTable) List(req *messages.ListObjects) *messages.ListObjectsReply {
	limit := int(req.GetLimit())
	if limit <= 0 || limit > ListLimit {
		limit = ListLimit
	}
	var ids []string
	for id, e := range t.entries {
		if e.known && id > req.GetAfter() {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	reply := &messages.ListObjectsReply{Shard: req.GetShard(), More: len(ids) > limit}
	for _, id := range ids[:min(limit, len(ids))] {
		e := t.entries[id]
		s := &messages.ObjectSummary{ObjectId: id, Size: e.size, Inline: e.hasInline}
		for _, loc := range e.locs {
			if loc.state == messages.LocationState_COMPLETE {
				s.CompleteCopies++
			} else {
				s.PartialCopies++
			}
		}
		reply.Objects = append(reply.Objects, s)
	}
	return reply
}

// String is for logs.
func (t *LocationTable) String() string {
	return fmt.Sprintf("LocationTable{entries: %d, tombstones: %d}", len(t.entries), len(t.tombstones))
}
