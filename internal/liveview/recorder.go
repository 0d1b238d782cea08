// Package liveview is Hoplite's live view of a cluster: a web page that
// draws broadcast trees as they form, reduce trees as sources arrive and
// as failures repair them, the members, their stores and failures, and a
// timeline of transfers, updated live.
//
// Three parts, all bounded:
//
//   - A Recorder per member keeps the member's last domain events (see
//     package events) in a ring and reports its status (store, measured L
//     and B, copies) when asked: a Batch. It costs a member one append per
//     event, none per chunk, and nothing else until somebody looks.
//   - A Hub, on the member a browser talks to, gathers the Batches of
//     every member (Peer.Fetch: a control request on the data plane
//     between members, a call in process in an embedded cluster) while at
//     least one browser is attached, into one ring of the cluster's
//     events. It corrects what one member cannot see: a barrier whose
//     primary's member failed (BarrierView), and a failure's directory
//     shard rebuilds, one entry for all of them (ShardsRebuilt).
//   - The Hub's handler serves the page (HTML, CSS and JavaScript embedded
//     in the binary) and the feed as server-sent events. Every client
//     reads the one shared ring from its own cursor: a client that falls
//     behind by more than the ring skips what it missed (counted), one
//     whose writes block past HubConfig.WriteTimeout is dropped (counted).
//     Neither ever holds up the gathering, let alone a member.
package liveview

import (
	"encoding/json"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/hoplite-go/hoplite/events"
	"github.com/hoplite-go/hoplite/messages"
)

// Entry is one event of the feed: what happened (Kind, the event's type
// name, and Data, its fields), where (Member, the member that published
// it) and when (At, Unix milliseconds). Seq numbers the entries of one
// ring: a Recorder's, or a Hub's.
type Entry struct {
	Seq    uint64          `json:"seq"`
	Member string          `json:"member"`
	At     int64           `json:"at"`
	Kind   string          `json:"kind"`
	Data   json.RawMessage `json:"data"`
}

// Status is one member as it stands: its incarnation, store, the
// network it measured, and the copies it holds (partial ones first, at
// most MaxCopies).
type Status struct {
	Member    string  `json:"member"`
	Address   string  `json:"address"`
	Data      string  `json:"data,omitempty"`
	At        int64   `json:"at"`
	Capacity  int64   `json:"capacity"`
	Used      int64   `json:"used"`
	Pinned    int64   `json:"pinned"`
	Objects   int     `json:"objects"`
	LatencyNs int64   `json:"latency_ns"`
	Bandwidth float64 `json:"bandwidth"`
	Copies    []Copy  `json:"copies,omitempty"`
	// Barriers are the barriers whose manager replica on this member
	// acts as primary, or did last (at most MaxBarriers). A Hub's state
	// frame lists every member's merged instead (BarrierView).
	Barriers []events.BarrierState `json:"barriers,omitempty"`
	// Health is set by the Hub: up (answered the last gathering),
	// unreachable (did not), failed (a member published its failure),
	// gone (left the view without a failure).
	Health string `json:"health,omitempty"`
}

// Copy is one object's copy in a member's store.
type Copy struct {
	ID       string `json:"id"`
	Size     int64  `json:"size"`
	Written  int64  `json:"written"`
	Complete bool   `json:"complete"`
	Pinned   bool   `json:"pinned"`
}

// MaxCopies bounds the copies one Status lists.
const MaxCopies = 256

// MaxBarriers bounds the barriers one Status lists: past it, a Recorder
// forgets closed barriers first, then those that changed longest ago.
const MaxBarriers = 64

// Batch is what a member answers a gathering: its status and its
// entries after the asked sequence number. Last is the highest sequence
// number it recorded (the next ask's since); Missed counts entries after
// since that its ring no longer held.
type Batch struct {
	Member  string  `json:"member"`
	Status  *Status `json:"status,omitempty"`
	Entries []Entry `json:"entries,omitempty"`
	Last    uint64  `json:"last"`
	Missed  uint64  `json:"missed,omitempty"`
}

// Request is a gathering's ask: the entries after Since.
type Request struct {
	Since uint64 `json:"since"`
}

// DefaultRecorderEntries is a Recorder's ring size by default.
const DefaultRecorderEntries = 1024

// maxBatchEntries bounds the entries of one Batch (a member far behind
// answers in several).
const maxBatchEntries = 512

// Recorder keeps one member's recent events and reports its status.
type Recorder struct {
	member string
	status func() Status

	mu   sync.Mutex
	ring []Entry // ring[(seq-1) % len]
	last uint64  // the last seq recorded
	// barriers are the last events.BarrierState of each barrier: a state,
	// not a history, kept beside the ring so that a busy barrier's steps
	// do not push the transfers out of it.
	barriers map[string]*events.BarrierState
}

// NewRecorder records member's events in a ring of capacity entries
// (DefaultRecorderEntries if 0); status, if set, reports the member's
// status when a Batch is taken.
func NewRecorder(member string, capacity int, status func() Status) *Recorder {
	if capacity <= 0 {
		capacity = DefaultRecorderEntries
	}
	return &Recorder{member: member, status: status, ring: make([]Entry, capacity), barriers: map[string]*events.BarrierState{}}
}

// observeBarrier keeps s as its barrier's state.
func (r *Recorder) observeBarrier(s *events.BarrierState) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.barriers[s.Barrier] = s
	if len(r.barriers) <= MaxBarriers {
		return
	}
	var victim *events.BarrierState
	for _, b := range r.barriers {
		if victim == nil || b.Closed && !victim.Closed || b.Closed == victim.Closed && b.At.Before(victim.At) {
			victim = b
		}
	}
	delete(r.barriers, victim.Barrier)
}

// barrierStatesLocked lists the barriers' states by name.
func (r *Recorder) barrierStatesLocked() []events.BarrierState {
	if len(r.barriers) == 0 {
		return nil
	}
	out := make([]events.BarrierState, 0, len(r.barriers))
	for _, b := range r.barriers {
		out = append(out, *b)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Barrier < out[j].Barrier })
	return out
}

// Observe records e if it is a domain event the view shows; subscribe it
// to the member's EventStream. It never blocks beyond the ring's lock.
func (r *Recorder) Observe(e any) {
	if s, ok := e.(*events.BarrierState); ok {
		r.observeBarrier(s)
		return
	}
	kind, data, at, ok := describe(e)
	if !ok {
		return
	}
	b, err := json.Marshal(data)
	if err != nil {
		return
	}
	if at.IsZero() {
		at = time.Now()
	}
	r.mu.Lock()
	r.last++
	r.ring[(r.last-1)%uint64(len(r.ring))] = Entry{Seq: r.last, Member: r.member, At: at.UnixMilli(), Kind: kind, Data: b}
	r.mu.Unlock()
}

// Since returns the member's status and its entries after seq (at most
// maxBatchEntries, the oldest first).
func (r *Recorder) Since(seq uint64) Batch {
	b := Batch{Member: r.member}
	if r.status != nil {
		s := r.status()
		b.Status = &s
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if b.Status != nil {
		b.Status.Barriers = r.barrierStatesLocked()
	}
	b.Last = r.last
	if seq >= r.last {
		if seq > r.last {
			b.Last = r.last // a cursor from another incarnation: start over
		}
		return b
	}
	first := seq + 1
	if oldest := r.oldestLocked(); first < oldest {
		b.Missed = oldest - first
		first = oldest
	}
	end := min(r.last, first+maxBatchEntries-1)
	for s := first; s <= end; s++ {
		b.Entries = append(b.Entries, r.ring[(s-1)%uint64(len(r.ring))])
	}
	b.Last = end
	return b
}

func (r *Recorder) oldestLocked() uint64 {
	if n := uint64(len(r.ring)); r.last > n {
		return r.last - n + 1
	}
	return 1
}

// Serve answers a gathering's request on the wire: a JSON Request in, a
// JSON Batch out (messages.ControlLive).
func (r *Recorder) Serve(req []byte) ([]byte, error) {
	var q Request
	if err := json.Unmarshal(req, &q); err != nil {
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "live view request: %v", err)
	}
	b := r.Since(q.Since)
	out, err := json.Marshal(&b)
	if err != nil {
		return nil, messages.Errorf(messages.ErrorCode_INTERNAL, "live view batch: %v", err)
	}
	return out, nil
}

// EncodeRequest is Request{Since: since} on the wire.
func EncodeRequest(since uint64) []byte {
	b, _ := json.Marshal(Request{Since: since})
	return b
}

// DecodeBatch reads a Batch from the wire.
func DecodeBatch(b []byte) (*Batch, error) {
	var out Batch
	if err := json.Unmarshal(b, &out); err != nil {
		return nil, messages.Errorf(messages.ErrorCode_INTERNAL, "live view batch: %v", err)
	}
	return &out, nil
}

// StoreCopies lists copies for a Status: partial ones first (what is
// moving), then the rest by id, at most MaxCopies.
func StoreCopies(cs []Copy) []Copy {
	sort.SliceStable(cs, func(i, j int) bool {
		if cs[i].Complete != cs[j].Complete {
			return !cs[i].Complete
		}
		return cs[i].ID < cs[j].ID
	})
	if len(cs) > MaxCopies {
		cs = cs[:MaxCopies]
	}
	return cs
}

// errText is an error as the page shows it ("" for nil).
func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// describe turns a domain event into its feed form: errors as text,
// durations in nanoseconds. Events the view does not show are skipped.
func describe(e any) (kind string, data any, at time.Time, ok bool) {
	switch e := e.(type) {
	case *events.NodeFailed:
		return "NodeFailed", e, e.At, true
	case *events.SenderSwitched:
		return "SenderSwitched", e, time.Time{}, true
	case *events.TreeNodeReplaced:
		return "TreeNodeReplaced", e, time.Time{}, true
	case *events.AncestorsInvalidated:
		return "AncestorsInvalidated", e, time.Time{}, true
	case *events.ShardRebuilt:
		return "ShardRebuilt", e, time.Time{}, true
	case *events.AllReduceReplanned:
		return "AllReduceReplanned", e, time.Time{}, true
	case *events.TransferStarted:
		return "TransferStarted", e, e.At, true
	case *events.TransferEnded:
		return "TransferEnded", map[string]any{"Object": e.Object, "Receiver": e.Receiver, "Sender": e.Sender,
			"Err": errText(e.Err)}, e.At, true
	case *events.ReduceTree:
		costs := map[string]int64{}
		for d, c := range e.Costs {
			costs[fmt.Sprint(d)] = int64(c)
		}
		return "ReduceTree", map[string]any{"Reduce": e.Reduce, "Target": e.Target, "Shape": e.Shape, "Degree": e.Degree,
			"Num": e.Num, "Size": e.Size, "L": int64(e.L), "B": e.B, "Costs": costs, "Knee": e.Knee,
			"Positions": e.Positions, "Done": e.Done}, time.Time{}, true
	case *events.ReduceDone:
		return "ReduceDone", map[string]any{"Reduce": e.Reduce, "Target": e.Target, "Reduced": e.Reduced,
			"Elapsed": int64(e.Elapsed), "Err": errText(e.Err)}, time.Time{}, true
	case *events.BarrierTookOver:
		return "BarrierTookOver", e, e.At, true
	case *events.BarrierDeliveryFailed:
		return "BarrierDeliveryFailed", e, e.At, true
	}
	return "", nil, time.Time{}, false
}
