package directory

import (
	"cmp"
	"slices"
	"time"
)

// A striped broadcast splits an object into k stripes (byte ranges) and
// hands each receiver one sender per stripe. Every receiver is interior
// in one stripe's tree, where its copy serves up to k receivers, and a
// leaf in the others, where it serves none: each stripe's tree is about
// log_k N deep and every member uploads about k·S/k = S (the two-tree
// broadcast of Sanders, Speck and Träff, with k trees). A single sender
// per receiver cannot have both: a chain uploads S a member but is N−1
// deep, a tree of fan-out k is log_k N deep but its interior members
// upload k·S.
//
// StripeTrees is the shard's core for it, receiver-driven as the
// LocationTable is: a receiver asks (Join, or Relocate after its sender
// failed), is handed the shallowest copy of each stripe that has room,
// relays what it receives (a partial copy counts), resumes from its own
// offset, and is never handed a copy fed through itself. A receiver
// becomes interior in the stripe that needs copies with room most when
// it first asks. Two rules keep the trees balanced when receivers come
// one after another: the creator serves each stripe to one receiver,
// and a leaf does not take a stripe's last free place while a receiver
// that would be interior there is still expected (it waits, at most
// StripeConfig.Hold); past Hold, or once every receiver expected has
// asked, a waiting receiver takes the copy with room, or the least
// loaded one.

// StripeConfig configures StripeTrees.
type StripeConfig struct {
	// Stripes is k, the number of stripes (at least 2).
	Stripes int
	// Receivers is how many receivers are expected: while fewer have
	// asked, a stripe's last free place is kept for an interior one.
	Receivers int
	// Hold is the longest a receiver waits for a stripe's place before
	// it takes the least loaded copy.
	Hold time.Duration
}

// StripeAssignment hands Receiver a Sender for one Stripe.
type StripeAssignment struct {
	Receiver string
	Stripe   int
	Sender   string
}

// stripeCopy is one member's copy of one stripe.
type stripeCopy struct {
	from    string // its sender ("" for the creator's, or while it waits)
	serving int    // receivers it streams to
	depth   int    // hops from the creator when it was handed its sender
	whole   bool
}

type stripeWait struct {
	receiver string
	since    time.Time
}

// StripeTrees assigns a striped broadcast's senders (see above). It is
// a pure core: time is passed in, and it keeps no goroutine.
type StripeTrees struct {
	cfg     StripeConfig
	creator string
	class   map[string]int // receiver -> the stripe it is interior in
	copies  []map[string]*stripeCopy
	waiting [][]stripeWait
	dead    map[string]bool
	joined  int
	// interior counts the receivers interior in each stripe that asked;
	// room is how many more receivers each stripe's live copies serve.
	interior []int
	room     []int
}

// NewStripeTrees starts the trees of a broadcast whose creator holds
// the whole object.
func NewStripeTrees(cfg StripeConfig, creator string) *StripeTrees {
	cfg.Stripes = max(cfg.Stripes, 2)
	t := &StripeTrees{cfg: cfg, creator: creator, class: map[string]int{}, dead: map[string]bool{},
		copies: make([]map[string]*stripeCopy, cfg.Stripes), waiting: make([][]stripeWait, cfg.Stripes),
		interior: make([]int, cfg.Stripes), room: make([]int, cfg.Stripes)}
	for j := range t.copies {
		t.copies[j] = map[string]*stripeCopy{creator: {whole: true}}
		t.room[j] = 1
	}
	return t
}

// Stripes is k.
func (t *StripeTrees) Stripes() int { return t.cfg.Stripes }

// StripeRange is stripe j's byte range [off, off+n) of an object of
// size bytes cut into k stripes (the last takes the remainder).
func StripeRange(size int64, k, j int) (off, n int64) {
	per := size / int64(k)
	off = per * int64(j)
	if j == k-1 {
		return off, size - off
	}
	return off, per
}

// capacity is how many receivers c's copy of stripe j serves: one for
// the creator, k for an interior copy, none for a leaf's.
func (t *StripeTrees) capacity(node string, j int) int {
	if node == t.creator {
		return 1
	}
	if t.class[node] == j {
		return t.cfg.Stripes
	}
	return 0
}

// free is how many more receivers stripe j's live copies have room for.
func (t *StripeTrees) free(j int) int { return t.room[j] }

// serve changes how many receivers node's copy of stripe j serves by
// delta, and the stripe's room with it.
func (t *StripeTrees) serve(j int, node string, c *stripeCopy, delta int) {
	before := max(t.capacity(node, j)-c.serving, 0)
	c.serving += delta
	t.room[j] += max(t.capacity(node, j)-c.serving, 0) - before
}

// interiorLeft is how many receivers interior in stripe j are still
// expected to ask: of the receivers expected, every k-th from the j-th.
func (t *StripeTrees) interiorLeft(j int) int {
	k, m := t.cfg.Stripes, t.cfg.Receivers
	expected := 0
	if m > j {
		expected = (m - j + k - 1) / k
	}
	return max(expected-t.interior[j], 0)
}

// Join is a receiver's first ask: it is given its interior stripe and
// a sender for every stripe that has one for it now (the rest come
// from a later step, when a copy with room appears or the wait ends).
func (t *StripeTrees) Join(now time.Time, receiver string) []StripeAssignment {
	if receiver == t.creator || t.dead[receiver] {
		return nil
	}
	if _, ok := t.class[receiver]; ok {
		return nil // asked already: its waits stand
	}
	// Round robin: the receivers expected are interior in each stripe
	// in equal numbers, known ahead (interiorLeft).
	best := t.joined % t.cfg.Stripes
	t.interior[best]++
	t.class[receiver] = best
	t.joined++
	// Interior first, ahead of the leaves waiting there: its places are
	// what they wait for, and the last free place is its.
	for j := range t.copies {
		w := stripeWait{receiver: receiver, since: now}
		if j == best {
			t.waiting[j] = slices.Insert(t.waiting[j], 0, w)
		} else {
			t.waiting[j] = append(t.waiting[j], w)
		}
	}
	return t.serveAll(now)
}

// Relocate is a receiver's ask for a new sender of stripe j after its
// sender failed: its copy, partial or not, stays (its own receivers keep
// reading it), and it resumes from its offset at the new sender.
func (t *StripeTrees) Relocate(now time.Time, receiver string, j int, failed string) []StripeAssignment {
	if j < 0 || j >= t.cfg.Stripes || t.dead[receiver] {
		return nil
	}
	if failed != "" && failed != t.creator {
		t.Failed(failed)
	}
	c := t.copies[j][receiver]
	if c == nil || c.whole || c.from == "" {
		return nil // no sender yet (it waits), or nothing left to read
	}
	if up := t.copies[j][c.from]; up != nil && c.from != failed {
		t.serve(j, c.from, up, -1)
	}
	c.from = ""
	// Waited long enough already: the places kept for interior receivers
	// still to come are not its to wait for, and with no copy that has
	// room it takes the least loaded one at once.
	t.waiting[j] = append(t.waiting[j], stripeWait{receiver: receiver, since: now.Add(-t.cfg.Hold)})
	return t.serveAll(now)
}

// Done records that receiver's copy of stripe j is whole: it reads
// from nobody, and no failure above it concerns it. Its sender's place
// stays taken: a place is a share of the sender's upload, S/k, not a
// stream at a time.
func (t *StripeTrees) Done(receiver string, j int) {
	if j < 0 || j >= t.cfg.Stripes {
		return
	}
	if c := t.copies[j][receiver]; c != nil {
		c.whole = true
	}
}

// Failed records that node died: its copies serve nobody. Its receivers
// learn it from their streams and Relocate.
func (t *StripeTrees) Failed(node string) {
	if node == t.creator || t.dead[node] {
		return
	}
	t.dead[node] = true
	if _, ok := t.class[node]; !ok {
		t.cfg.Receivers-- // it will not ask
	}
	for j := range t.copies {
		if c := t.copies[j][node]; c != nil {
			if up := t.copies[j][c.from]; up != nil && !c.whole {
				t.serve(j, c.from, up, -1)
			}
			t.room[j] -= max(t.capacity(node, j)-c.serving, 0)
		}
		delete(t.copies[j], node)
		t.waiting[j] = slices.DeleteFunc(t.waiting[j], func(w stripeWait) bool { return w.receiver == node })
	}
}

// Tick hands the receivers that waited Hold a sender (the least loaded
// copy when none has room), and returns when it next needs a Tick (the
// zero time: no wait).
func (t *StripeTrees) Tick(now time.Time) ([]StripeAssignment, time.Time) {
	out := t.serveAll(now)
	var next time.Time
	for j := range t.waiting {
		for _, w := range t.waiting[j] {
			if at := w.since.Add(t.cfg.Hold); next.IsZero() || at.Before(next) {
				next = at
			}
		}
	}
	return out, next
}

// serveAll hands the waiting receivers of every stripe a sender where
// one has room, in the order they asked, until none more can be.
func (t *StripeTrees) serveAll(now time.Time) []StripeAssignment {
	var out []StripeAssignment
	for progress := true; progress; {
		progress = false
		for j := range t.waiting {
			kept := t.waiting[j][:0]
			for _, w := range t.waiting[j] {
				if a, ok := t.place(now, w, j); ok {
					out = append(out, a)
					progress = true
					continue
				}
				kept = append(kept, w)
			}
			t.waiting[j] = kept
		}
	}
	return out
}

// place hands w a sender of stripe j, if one may be handed now.
func (t *StripeTrees) place(now time.Time, w stripeWait, j int) (StripeAssignment, bool) {
	r := w.receiver
	interior := t.class[r] == j
	overdue := !now.Before(w.since.Add(t.cfg.Hold))
	if !interior && !overdue && t.free(j) <= t.interiorLeft(j) {
		// Every place is an interior receiver's still to come: taken by a
		// leaf, the interior ones would hang deeper and deeper (a chain).
		return StripeAssignment{}, false
	}
	sender := t.pick(j, r, !interior, false)
	if sender == "" && overdue {
		sender = t.pick(j, r, !interior, true)
	}
	if sender == "" {
		return StripeAssignment{}, false
	}
	up := t.copies[j][sender]
	t.serve(j, sender, up, 1)
	c := t.copies[j][r]
	if c == nil {
		c = &stripeCopy{}
		t.copies[j][r] = c
		t.room[j] += t.capacity(r, j)
	}
	c.from, c.depth = sender, up.depth+1
	return StripeAssignment{Receiver: r, Stripe: j, Sender: sender}, true
}

// pick is the live copy of stripe j with room that is not fed through
// r: for an interior receiver the shallowest (the interior copies form
// a tree of k children a copy, log_k of their number deep), for a leaf
// the deepest (it takes the places the interior ones will not need),
// fewest served first. With over, the one serving fewest of those with
// none, shallowest first (r waited past Hold, or lost its sender, and
// no copy has room).
func (t *StripeTrees) pick(j int, r string, leaf, over bool) string {
	best := ""
	var bestC *stripeCopy
	for id, c := range t.copies[j] {
		if id == r || t.dead[id] || (!over && c.serving >= t.capacity(id, j)) {
			continue
		}
		if !c.whole && c.from == "" && id != t.creator {
			continue // waits for its own sender
		}
		if bestC != nil {
			depth := cmp.Compare(c.depth, bestC.depth)
			if leaf && !over {
				depth = -depth
			}
			load, bestLoad := t.load(id), t.load(best)
			if over && load != bestLoad {
				if load > bestLoad {
					continue
				}
			} else if k := cmp.Or(depth, cmp.Compare(c.serving, bestC.serving), cmp.Compare(id, best)); k > 0 {
				continue
			}
		}
		if t.feeds(j, r, id) {
			continue
		}
		best, bestC = id, c
	}
	return best
}

// load is how many stripes' receivers node serves in all.
func (t *StripeTrees) load(node string) int {
	n := 0
	for j := range t.copies {
		if c := t.copies[j][node]; c != nil {
			n += c.serving
		}
	}
	return n
}

// feeds says r's copy of stripe j is upstream of node's: handing r
// node's copy would close a cycle.
func (t *StripeTrees) feeds(j int, r, node string) bool {
	for cur, hops := node, 0; cur != "" && hops <= len(t.copies[j]); hops++ {
		if cur == r {
			return true
		}
		c := t.copies[j][cur]
		if c == nil || c.whole {
			return false
		}
		cur = c.from
	}
	return false
}

// Depth is the most hops a live copy of any stripe is from the creator
// along its senders (a copy whose sender died counts to there).
func (t *StripeTrees) Depth() int {
	d := 0
	for j := range t.copies {
		for id := range t.copies[j] {
			hops := 0
			for cur := id; cur != t.creator && hops <= len(t.copies[j]); hops++ {
				c := t.copies[j][cur]
				if c == nil || c.from == "" {
					break
				}
				cur = c.from
			}
			d = max(d, hops)
		}
	}
	return d
}

// Sender is receiver's sender of stripe j ("" for none).
func (t *StripeTrees) Sender(receiver string, j int) string {
	if c := t.copies[j][receiver]; c != nil {
		return c.from
	}
	return ""
}

// Waiting is how many (receiver, stripe) asks have no sender yet.
func (t *StripeTrees) Waiting() int {
	n := 0
	for _, w := range t.waiting {
		n += len(w)
	}
	return n
}
