package liveview

import (
	"cmp"
	"encoding/json"
	"slices"
	"strings"
	"time"

	"github.com/hoplite-go/hoplite/events"
)

// What the Hub makes of its members' news before the page sees it: a
// barrier whose primary's member failed is shown as such at once, and a
// failure's directory shard rebuilds are one entry of the events list.

// BarrierView is one barrier as the view shows it: the report of its
// acting primary of the highest epoch (else the latest one), corrected
// by what the Hub learnt since. A replica whose member failed is Down
// and never Primary, and a report whose member failed no longer acts,
// whether or not any barrier message followed the failure.
type BarrierView struct {
	events.BarrierState
	// ActingMember is the member whose replica acts as primary now: the
	// acting report's, or that of a take-over (events.BarrierTookOver)
	// newer than the report; "" while unknown.
	ActingMember string `json:"ActingMember,omitempty"`
	// TakeoverPending: the barrier is open, no replica is known to act
	// (its primary's member failed and no surviving replica's take-over
	// was heard yet), and a replica survives to take over.
	TakeoverPending bool `json:"TakeoverPending,omitempty"`
}

// maxViewBarriers bounds the barriers one state frame lists: past it,
// closed barriers go first, then those reported longest ago.
const maxViewBarriers = 4 * MaxBarriers

// maxTakeovers bounds the take-overs the Hub remembers (one per
// barrier, the newest epoch's).
const maxTakeovers = 1024

// takeover is the newest events.BarrierTookOver heard of a barrier.
type takeover struct {
	member string
	epoch  uint64
	at     int64
}

// noteTakeoverLocked remembers e's take-over if it is the barrier's
// newest.
func (h *Hub) noteTakeoverLocked(e Entry) {
	var t events.BarrierTookOver
	if json.Unmarshal(e.Data, &t) != nil || t.Barrier == "" {
		return
	}
	if o, ok := h.takeovers[t.Barrier]; ok && o.epoch >= t.Epoch {
		return
	}
	h.takeovers[t.Barrier] = takeover{member: t.Member, epoch: t.Epoch, at: e.At}
	if len(h.takeovers) <= maxTakeovers {
		return
	}
	oldest := ""
	for name, o := range h.takeovers {
		if oldest == "" || o.at < h.takeovers[oldest].at {
			oldest = name
		}
	}
	delete(h.takeovers, oldest)
}

// failedLocked reports whether a member published id's failure.
func (h *Hub) failedLocked(id string) bool {
	ms := h.members[id]
	return ms != nil && ms.failed
}

// barriersLocked merges the members' barrier reports into one row per
// barrier (see BarrierView), by name.
func (h *Hub) barriersLocked() []BarrierView {
	best := map[string]*events.BarrierState{}
	acts := func(s *events.BarrierState) bool { return s.Acting && !h.failedLocked(s.Member) }
	for _, ms := range h.members {
		for i := range ms.status.Barriers {
			s := &ms.status.Barriers[i]
			o := best[s.Barrier]
			if o == nil || acts(s) && !acts(o) ||
				acts(s) == acts(o) && (s.Epoch > o.Epoch || s.Epoch == o.Epoch && s.At.After(o.At)) {
				best[s.Barrier] = s
			}
		}
	}
	out := make([]BarrierView, 0, len(best))
	for _, s := range best {
		v := BarrierView{BarrierState: *s}
		v.Acting = acts(s)
		v.Replicas = slices.Clone(s.Replicas)
		for i := range v.Replicas {
			if h.failedLocked(v.Replicas[i].Member) {
				v.Replicas[i].Down, v.Replicas[i].Primary = true, false
			}
		}
		switch t, ok := h.takeovers[s.Barrier]; {
		case v.Closed:
		case ok && t.epoch > s.Epoch && !h.failedLocked(t.member) && slices.ContainsFunc(v.Replicas, func(r events.BarrierReplicaState) bool {
			return r.Member == t.member
		}):
			// A backup took over after the report: it acts, whatever the
			// report says, until its own report arrives.
			v.ActingMember = t.member
			for i := range v.Replicas {
				v.Replicas[i].Primary = v.Replicas[i].Member == t.member
			}
		case v.Acting:
			v.ActingMember = s.Member
		default:
			// A replica that stopped acting names the primary it heard of.
			for _, r := range v.Replicas {
				if r.Primary && !r.Down {
					v.ActingMember = r.Member
				}
			}
		}
		v.TakeoverPending = !v.Closed && v.ActingMember == "" && slices.ContainsFunc(v.Replicas, func(r events.BarrierReplicaState) bool {
			return !r.Down
		})
		out = append(out, v)
	}
	if len(out) > maxViewBarriers {
		slices.SortFunc(out, func(a, b BarrierView) int {
			if a.Closed != b.Closed {
				if a.Closed {
					return 1
				}
				return -1
			}
			return b.At.Compare(a.At)
		})
		out = out[:maxViewBarriers]
	}
	slices.SortFunc(out, func(a, b BarrierView) int { return strings.Compare(a.Barrier, b.Barrier) })
	return out
}

// ShardsRebuilt is the Hub's entry (Kind "ShardsRebuilt") for a run of
// directory shards rebuilt after the same failures (events.ShardRebuilt:
// a member's failure re-homes all its shards at once, 64 of a cluster of
// defaults, which would otherwise fill the events list). A run goes on
// while its rebuilds follow each other within rebuildGap; the Hub
// publishes the run's entry again at each gathering that adds to it, and
// the later entry of a Run stands for the earlier ones.
type ShardsRebuilt struct {
	Run uint64 `json:"run"`
	// Failed are the members whose failure the run follows: a rebuild
	// does not say which failure moved its shard, so it is the newest
	// failure first published at most rebuildCause before it, with any
	// other first published within rebuildTogether of that one (members
	// that failed together). None: a shard restarted after a crash, or
	// no failure was heard of.
	Failed []string      `json:"failed,omitempty"`
	Count  int           `json:"count"`
	Hosts  []RebuiltHost `json:"hosts"` // by host
	First  int64         `json:"first"` // the run's first and last rebuild (Unix ms)
	Last   int64         `json:"last"`
}

// RebuiltHost is one member's part of a run of rebuilds: how many
// shards it now hosts anew, and which (at most maxRunShards of the run
// are named).
type RebuiltHost struct {
	Host   string   `json:"host"`
	Count  int      `json:"count"`
	Shards []string `json:"shards,omitempty"`
}

const (
	// rebuildGap: a rebuild within this of a run's rebuilds, after the
	// same failures, joins the run.
	rebuildGap = 10 * time.Second
	// rebuildCause: a rebuild follows a failure first published at most
	// this long before it.
	rebuildCause = 30 * time.Second
	// rebuildTogether: failures first published within this of each other
	// are named together.
	rebuildTogether = time.Second
	// rebuildSkew: how far members' clocks may disagree (a rebuild's time
	// is its host's clock's, a failure's its first reporter's; the host
	// itself reports the failure before it rebuilds).
	rebuildSkew = time.Second
	// maxRuns bounds the runs a rebuild may still join.
	maxRuns = 8
	// maxRunShards bounds the shards one run names (its Count goes on).
	maxRunShards = 1024
)

// rebuildRun is a run of rebuilds being gathered.
type rebuildRun struct {
	ShardsRebuilt
	cause   string // Failed, joined: the run's key
	named   int
	touched bool // grew in this gathering
}

// rebuildCauseLocked lists the failed members a rebuild at at (Unix ms)
// follows (see ShardsRebuilt.Failed), by id.
func (h *Hub) rebuildCauseLocked(at int64) []string {
	newest := int64(-1)
	in := func(ms *memberState) bool {
		return ms.failed && ms.failedAt <= at+rebuildSkew.Milliseconds() && ms.failedAt >= at-rebuildCause.Milliseconds()
	}
	for _, ms := range h.members {
		if in(ms) {
			newest = max(newest, ms.failedAt)
		}
	}
	var out []string
	for id, ms := range h.members {
		if in(ms) && ms.failedAt >= newest-rebuildTogether.Milliseconds() {
			out = append(out, id)
		}
	}
	slices.Sort(out)
	return out
}

// noteRebuildLocked adds e (an events.ShardRebuilt) to its run.
func (h *Hub) noteRebuildLocked(e Entry) {
	var r events.ShardRebuilt
	if json.Unmarshal(e.Data, &r) != nil {
		return
	}
	if r.Host == "" {
		r.Host = e.Member
	}
	failed := h.rebuildCauseLocked(e.At)
	cause := strings.Join(failed, "\x00")
	gap := rebuildGap.Milliseconds()
	i := slices.IndexFunc(h.runs, func(run *rebuildRun) bool {
		return run.cause == cause && e.At >= run.First-gap && e.At <= run.Last+gap
	})
	if i < 0 {
		h.runSeq++
		h.runs = append(h.runs, &rebuildRun{ShardsRebuilt: ShardsRebuilt{Run: h.runSeq, Failed: failed, First: e.At, Last: e.At}, cause: cause})
		if len(h.runs) > maxRuns {
			h.runs = slices.Delete(h.runs, 0, 1)
		}
		i = len(h.runs) - 1
	}
	run := h.runs[i]
	run.touched = true
	run.Count++
	run.First, run.Last = min(run.First, e.At), max(run.Last, e.At)
	j, found := slices.BinarySearchFunc(run.Hosts, r.Host, func(x RebuiltHost, host string) int { return cmp.Compare(x.Host, host) })
	if !found {
		run.Hosts = slices.Insert(run.Hosts, j, RebuiltHost{Host: r.Host})
	}
	run.Hosts[j].Count++
	if run.named < maxRunShards {
		run.Hosts[j].Shards = append(run.Hosts[j].Shards, r.Shard)
		run.named++
	}
}

// publishRunsLocked appends the entry of every run that grew in this
// gathering.
func (h *Hub) publishRunsLocked() {
	for _, run := range h.runs {
		if !run.touched {
			continue
		}
		run.touched = false
		b, err := json.Marshal(&run.ShardsRebuilt)
		if err != nil {
			continue
		}
		h.appendLocked(Entry{At: run.Last, Kind: "ShardsRebuilt", Data: b})
	}
}
