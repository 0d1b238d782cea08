// Package memberview is one member's membership state, a pure core: the
// view the member actor steps with the provider's topology, the
// handshakes' outcomes, delivered failure notices and graceful leaves,
// and the shard placement every member computes from the live members.
package memberview

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/internal/rendezvous"
	"github.com/hoplite-go/hoplite/messages"
)

// peerState is what the handshake said about a peer.
type peerState int

const (
	peerUnknown      peerState = iota // in the topology, no hello answered yet
	peerCompatible                    // same protocol version and shard count
	peerIncompatible                  // excluded: logged once
)

// peer is one other member as this member knows it.
type peer struct {
	id, address string
	state       peerState
	why         string // incompatibility
	store       *messages.NodeRef
	inTopology  bool
	dead        bool   // a failure notice about it was delivered here, or it left
	deadBy      string // whose notice ("left" after a leave), for diagnostics (Describe)
	leaving     bool   // it announced a graceful leave
}

// View is one member's membership state: a pure core (no actors, no
// clocks, no I/O) stepped by the topology that Proto.Actor's cluster
// provider reports, the handshake outcomes, delivered failure notices and
// graceful leaves. Out come the live members (sorted by id: every member
// computes the same list from the same inputs), the shard owners, the
// store nodes a rebuilt shard asks to republish, and the revoke overlay.
type View struct {
	self        string
	selfAddress string
	selfStore   *messages.NodeRef
	shards      int
	selfLeaving bool
	peers       map[string]*peer
	// now is the time of the event being applied (the shell sets it).
	now time.Time
	// quarantine holds addresses whose member failed, until when a new
	// incarnation there is not used (see AddressQuarantine).
	quarantine map[string]time.Time
}

// AddressQuarantine is how long a new incarnation at the address of a
// member that failed is kept out of the view. Proto.Actor remote keys its
// endpoints by address: a send to the dead member opens an endpoint whose
// connection attempt fails and which, 2 s later (a fixed retry sleep),
// terminates the endpoint, and with it every watch made through it, even
// of actors of a new incarnation that started at the same address
// meanwhile (they would look failed). After the quarantine those
// endpoints are gone and the new incarnation gets fresh ones.
const AddressQuarantine = 3 * time.Second

// New is the view of member self, whose actor system listens at address
// and whose store node is store, placing shards directory shards.
func New(self, address string, store *messages.NodeRef, shards int) *View {
	return &View{self: self, selfAddress: address, selfStore: store, shards: shards, peers: map[string]*peer{},
		quarantine: map[string]time.Time{}}
}

// Event is what a View steps on: Tick, Topology, Hello, Failed, Blame,
// Leave, Leaving or Departed.
type Event interface{ memberviewEvent() }

type (
	// Tick: time has come; quarantines due by now end. The member actor
	// steps one as each message arrives, and its other events at the
	// same now.
	Tick struct{}
	// Topology is the provider's current member list. A member that
	// left it is forgotten once it is also known dead.
	Topology struct{ Members []Member }
	// Hello is a handshake outcome (a reply to our hello, or a hello we
	// received).
	Hello struct {
		ID, Address string
		Store       *messages.NodeRef
		Compatible  bool
		Why         string
	}
	// Failed is a delivered failure notice about member ID, which the
	// notice's originator knew at Address ("" if it did not say).
	Failed struct{ ID, Address string }
	// Blame records whose notice member ID's failure was (Describe shows
	// it), if the view still knows the member.
	Blame struct{ ID, By string }
	// Leave: this member leaves; it is out of Live from now on.
	Leave struct{}
	// Leaving is a peer's graceful leave.
	Leaving struct{ ID string }
	// Departed is the end of a leave peer ID announced.
	Departed struct{ ID string }
)

func (Tick) memberviewEvent()     {}
func (Topology) memberviewEvent() {}
func (Hello) memberviewEvent()    {}
func (Failed) memberviewEvent()   {}
func (Blame) memberviewEvent()    {}
func (Leave) memberviewEvent()    {}
func (Leaving) memberviewEvent()  {}
func (Departed) memberviewEvent() {}

// Output is what a step changed. Its Box is empty: the member actor
// sends the hellos and reconciles its shells itself, reading the view.
type Output struct {
	outbox.Box
	// Joined and Left are the members that appeared in a Topology and
	// those that left it (never self).
	Joined, Left []string
	// Changed: a Failed, Leaving or Departed changed the view; for a
	// Hello, the peer became incompatible just now (to log it once).
	Changed bool
}

// Step takes one event at now (the one contract of the cores,
// outbox.Core): the time first, then the event, so that a quarantine
// ends at the first step at or after its end.
func (v *View) Step(now time.Time, ev Event) Output {
	v.setNow(now)
	var o Output
	switch e := ev.(type) {
	case Topology:
		o.Joined, o.Left = v.topology(e.Members)
	case Hello:
		o.Changed = v.hello(e.ID, e.Address, e.Store, e.Compatible, e.Why)
	case Failed:
		o.Changed = v.failed(e.ID, e.Address)
	case Blame:
		v.blame(e.ID, e.By)
	case Leave:
		v.selfLeaving = true
	case Leaving:
		o.Changed = v.leaving(e.ID)
	case Departed:
		o.Changed = v.departed(e.ID)
	}
	return o
}

// setNow sets the time of the event that follows.
func (v *View) setNow(now time.Time) {
	v.now = now
	for addr, until := range v.quarantine {
		if !now.Before(until) {
			delete(v.quarantine, addr)
		}
	}
}

// quarantined: p lives at an address whose previous member failed less
// than AddressQuarantine ago.
func (v *View) quarantined(p *peer) bool {
	until, ok := v.quarantine[p.address]
	return ok && v.now.Before(until)
}

// usable: a compatible, live, non-quarantined peer.
func (v *View) usable(p *peer) bool {
	return p.state == peerCompatible && !p.dead && !v.quarantined(p)
}

func (v *View) peer(id string) *peer {
	p := v.peers[id]
	if p == nil {
		p = &peer{id: id}
		v.peers[id] = p
	}
	return p
}

// Member is one entry of a protoactor ClusterTopology.
type Member struct{ ID, Address string }

// topology applies the provider's current member list (Topology). It
// returns the members that appeared and those that left it.
func (v *View) topology(members []Member) (joined, left []string) {
	now := map[string]string{}
	for _, m := range members {
		if m.ID != "" && m.ID != v.self {
			now[m.ID] = m.Address
		}
	}
	for id, p := range v.peers {
		if _, ok := now[id]; !ok && p.inTopology {
			p.inTopology = false
			left = append(left, id)
		}
	}
	for id, addr := range now {
		p := v.peer(id)
		if !p.inTopology {
			joined = append(joined, id)
		}
		p.inTopology, p.address = true, addr
	}
	v.gc()
	slices.Sort(joined)
	slices.Sort(left)
	return joined, left
}

// gc forgets peers that are gone from the topology and dead (or were never
// more than a hello from a member that did not stay).
func (v *View) gc() {
	for id, p := range v.peers {
		if !p.inTopology && (p.dead || p.state != peerCompatible) {
			delete(v.peers, id)
		}
	}
}

// NeedsHello lists the peers in the topology whose handshake is open.
func (v *View) NeedsHello() []Peer {
	var out []Peer
	for _, p := range v.peers {
		if p.inTopology && p.state == peerUnknown && !p.dead && !v.quarantined(p) {
			out = append(out, p.snapshot())
		}
	}
	slices.SortFunc(out, func(a, b Peer) int { return cmp.Compare(a.ID, b.ID) })
	return out
}

// Peer is what a view holds about one other member, as a copy.
type Peer struct {
	ID, Address string
	// Store is its store node as its handshake named it (nil before).
	Store *messages.NodeRef
	// Incompatible: its handshake excluded it.
	Incompatible bool
	// Dead: a failure notice about it was delivered here, or it left.
	Dead bool
	// Leaving: it announced a graceful leave.
	Leaving bool
}

func (p *peer) snapshot() Peer {
	return Peer{ID: p.id, Address: p.address, Store: p.store, Incompatible: p.state == peerIncompatible, Dead: p.dead, Leaving: p.leaving}
}

// Peer is what the view holds about member id, if it knows it.
func (v *View) Peer(id string) (Peer, bool) {
	p := v.peers[id]
	if p == nil {
		return Peer{}, false
	}
	return p.snapshot(), true
}

// Peers is what the view holds about every member it knows, by id.
func (v *View) Peers() map[string]Peer {
	out := make(map[string]Peer, len(v.peers))
	for id, p := range v.peers {
		out[id] = p.snapshot()
	}
	return out
}

func (v *View) blame(id, by string) {
	if p := v.peers[id]; p != nil {
		p.deadBy = by
	}
}

// SelfLeaving says whether this member leaves (a Leave).
func (v *View) SelfLeaving() bool { return v.selfLeaving }

// Quarantining says whether an address of a failed member is still kept
// out of the view (AddressQuarantine).
func (v *View) Quarantining() bool { return len(v.quarantine) > 0 }

// hello records a handshake outcome (Hello). It reports whether the
// peer became incompatible just now.
func (v *View) hello(id, address string, store *messages.NodeRef, compatible bool, why string) (newlyIncompatible bool) {
	if id == "" || id == v.self {
		return false
	}
	if p := v.peers[id]; p != nil && p.address != "" && address != "" && address != p.address {
		// A member of that name at another address is another member
		// (embedded clusters name their members alike; a process's id
		// holds its address): not this one's to record.
		return false
	}
	p := v.peer(id)
	if p.address == "" {
		p.address = address
	}
	if !compatible {
		first := p.state != peerIncompatible
		p.state, p.why = peerIncompatible, why
		return first
	}
	if p.state == peerIncompatible {
		return false // one bad answer is enough
	}
	p.state = peerCompatible
	if store != nil {
		p.store = store
	}
	return false
}

// failed records a delivered failure notice (Failed). It reports
// whether it changed anything. A notice naming the member at another
// address than this view knows it at is not about this member: embedded
// clusters name their members node-0, node-1, … in every process, and a
// late notice of another process's cluster reaches this member through a
// loopback port that cluster's member held before. The revoke actor's
// admission refuses most of them, but only by what it knew when the
// notice came (at a member's start, before the handshakes, it knows no
// peer, and the topology that names one can arrive between admission and
// delivery): this is the check that sees the view's own knowledge, so no
// interleaving lets such a notice mark a live member dead.
func (v *View) failed(id, address string) bool {
	p := v.peers[id]
	if p == nil || p.dead {
		return false
	}
	if address != "" && p.address != "" && address != p.address {
		return false
	}
	p.dead = true
	if p.address != "" {
		v.quarantine[p.address] = v.now.Add(AddressQuarantine)
	}
	v.gc()
	return true
}

// leaving records a peer's graceful leave (Leaving).
func (v *View) leaving(id string) bool {
	p := v.peers[id]
	if p == nil || p.leaving {
		return false
	}
	p.leaving = true
	return true
}

// departed records the end of a leave peer id announced: it is gone as
// a failed member is (out of the overlay and the stores, its address
// quarantined for the same reason), though no notice was spread. It
// reports whether it changed anything: only a peer that announced its
// leave departs.
func (v *View) departed(id string) bool {
	p := v.peers[id]
	if p == nil || p.dead || !p.leaving {
		return false
	}
	p.dead, p.deadBy = true, "left"
	if p.address != "" {
		v.quarantine[p.address] = v.now.Add(AddressQuarantine)
	}
	v.gc()
	return true
}

// Live is the placement membership: self (unless leaving) and every
// compatible peer in the topology that is neither dead nor leaving,
// sorted by member id.
func (v *View) Live() []string {
	var out []string
	if !v.selfLeaving {
		out = append(out, v.self)
	}
	for id, p := range v.peers {
		if p.inTopology && v.usable(p) && !p.leaving {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// Describe says, for each known peer, what this view holds about it.
func (v *View) Describe() map[string]string {
	out := make(map[string]string, len(v.peers))
	for id, p := range v.peers {
		state := [...]string{"no hello answered", "compatible", "incompatible: " + p.why}[p.state]
		dead := fmt.Sprint(p.dead)
		if p.dead && p.deadBy != "" {
			dead += " (" + p.deadBy + ")"
		}
		out[id] = fmt.Sprintf("%s, in topology %v, dead %s, leaving %v, quarantined %v, store %s", state, p.inTopology, dead, p.leaving, v.quarantined(p),
			cmp.Or(p.store.GetActorId(), "unknown"))
	}
	return out
}

// Reachable is the revoke overlay: self and every compatible peer not
// known dead (leaving members still hear of failures until they are gone).
func (v *View) Reachable() []string {
	out := []string{v.self}
	for id, p := range v.peers {
		if v.usable(p) {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// Stores are the store nodes a shard asks to republish when it starts:
// self and every compatible peer not known dead, leaving ones included
// (their copies still serve until they are gone).
func (v *View) Stores() []*messages.NodeRef {
	out := []*messages.NodeRef{v.selfStore}
	for _, p := range v.peers {
		if v.usable(p) && p.store != nil {
			out = append(out, p.store)
		}
	}
	slices.SortFunc(out, func(a, b *messages.NodeRef) int { return cmp.Compare(a.GetNodeId(), b.GetNodeId()) })
	return out
}

// Address is a member's actor system address ("" if unknown).
func (v *View) Address(id string) string {
	if id == v.self {
		return v.selfAddress
	}
	if p := v.peers[id]; p != nil {
		return p.address
	}
	return ""
}

// Store is a member's store node as its handshake named it (nil if
// unknown): its actor id names the incarnation's actors.
func (v *View) Store(id string) *messages.NodeRef {
	if id == v.self {
		return v.selfStore
	}
	if p := v.peers[id]; p != nil {
		return p.store
	}
	return nil
}

// Compatibility counts the peers in the topology by handshake outcome.
func (v *View) Compatibility() (compatible, incompatible, unknown int, reasons []string) {
	for _, p := range v.peers {
		if !p.inTopology || p.dead {
			continue
		}
		switch p.state {
		case peerCompatible:
			compatible++
		case peerIncompatible:
			incompatible++
			reasons = append(reasons, p.why)
		default:
			unknown++
		}
	}
	slices.Sort(reasons)
	return compatible, incompatible, unknown, reasons
}

// ShardOwners places every shard on a live member by rendezvous (highest
// random weight) hashing: shard j goes to the member with the highest
// weight(member, j). Every member computes the same placement from the
// same member list, and a member that fails or leaves moves only its own
// shards: the survivors keep theirs, with their parked requests and the
// reduce coordinators under them (placing shard j on live[j mod n], the
// first plan, moved almost every shard on every membership change, so a
// member killed mid-reduce also killed the Reduce's coordinator). A member
// that joins takes about 1/n of the shards. With nobody live, no shard has
// an owner ("").
func ShardOwners(live []string, shards int) []string {
	out := make([]string, shards)
	if len(live) == 0 {
		return out
	}
	seeds := make([]uint64, len(live))
	for i, id := range live {
		seeds[i] = rendezvous.Seed(id)
	}
	for j := range out {
		best, bestW := 0, uint64(0)
		for i, seed := range seeds {
			if w := rendezvous.Weight(seed, uint64(j)); i == 0 || w > bestW || w == bestW && live[i] < live[best] {
				best, bestW = i, w
			}
		}
		out[j] = live[best]
	}
	return out
}

// MovedShards lists the shards whose owner differs between two placements.
func MovedShards(before, after []string) []int32 {
	var out []int32
	for j := range after {
		if j >= len(before) || before[j] != after[j] {
			out = append(out, int32(j))
		}
	}
	return out
}
