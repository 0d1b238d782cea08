package liveview

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"slices"
	"sync"
	"sync/atomic"
	"time"
)

// Peer is a member a Hub gathers from: Fetch returns its Batch after
// since (ctx has a deadline).
type Peer struct {
	ID    string
	Fetch func(ctx context.Context, since uint64) (*Batch, error)
}

// HubConfig configures a Hub. Zero fields take the defaults.
type HubConfig struct {
	// Self names the member serving the view ("" for an embedded
	// cluster's view): the page marks it.
	Self string
	// Peers lists the members to gather from now (the serving member's
	// live view of the cluster, itself included).
	Peers func() []Peer
	// Interval is how often the Hub gathers while a client is attached
	// (default 250 ms).
	Interval time.Duration
	// Entries is the size of the cluster's event ring (default 4096).
	Entries int
	// WriteTimeout drops a client whose write blocks longer (default 5 s).
	WriteTimeout time.Duration
	// MaxClients bounds the clients attached at once (default 32).
	MaxClients int
}

// Stats are a Hub's own counters: what its bounds did.
type Stats struct {
	Entries   int    `json:"entries"`   // entries in the ring now
	Capacity  int    `json:"capacity"`  // the ring's size
	Published uint64 `json:"published"` // entries put in the ring so far (a run of shard rebuilds: one per gathering it grew in)
	Gathers   uint64 `json:"gathers"`   // gathering rounds
	Clients   int    `json:"clients"`   // attached now
	Dropped   uint64 `json:"dropped"`   // clients dropped: a write blocked past WriteTimeout
	Skipped   uint64 `json:"skipped"`   // entries clients skipped, having fallen a ring behind
	Refused   uint64 `json:"refused"`   // clients refused: MaxClients were attached
	Members   int    `json:"members"`   // members known (live or not)
}

// maxMembers bounds the members a Hub remembers (live ones and those
// that failed or left, the oldest of which it forgets first).
const maxMembers = 512

// frameEntries bounds the entries of one write to a client.
const frameEntries = 256

type memberState struct {
	status Status
	cursor uint64
	seen   time.Time // when it last answered, or was last named
	failed bool      // a member published its failure
	// failedAt is when its failure was first published (Unix ms: the
	// earliest NodeFailed entry about it).
	failedAt int64
	first    int // order of first appearance
}

// Hub gathers the cluster's events for the clients attached to it.
type Hub struct {
	cfg  HubConfig
	id   string
	done chan struct{}

	mu      sync.Mutex
	ring    []Entry
	last    uint64
	members map[string]*memberState
	order   int
	state   []byte        // the last state frame (JSON)
	tick    chan struct{} // closed at each gathering's end
	clients int
	running bool
	closed  bool
	// takeovers are the newest take-over of each barrier (see
	// barriersLocked); runs the runs of shard rebuilds still open (see
	// ShardsRebuilt), runSeq the last run's number.
	takeovers map[string]takeover
	runs      []*rebuildRun
	runSeq    uint64

	published, gathers, dropped, skipped, refused atomic.Uint64
}

// NewHub returns a Hub; it gathers only while a client is attached.
func NewHub(cfg HubConfig) *Hub {
	if cfg.Interval <= 0 {
		cfg.Interval = 250 * time.Millisecond
	}
	if cfg.Entries <= 0 {
		cfg.Entries = 4096
	}
	if cfg.WriteTimeout <= 0 {
		cfg.WriteTimeout = 5 * time.Second
	}
	if cfg.MaxClients <= 0 {
		cfg.MaxClients = 32
	}
	if cfg.Peers == nil {
		cfg.Peers = func() []Peer { return nil }
	}
	var nonce [6]byte
	_, _ = rand.Read(nonce[:])
	return &Hub{cfg: cfg, id: hex.EncodeToString(nonce[:]), done: make(chan struct{}), ring: make([]Entry, cfg.Entries),
		members: map[string]*memberState{}, tick: make(chan struct{}), state: []byte("{}"), takeovers: map[string]takeover{}}
}

// Close stops the gathering and ends every client's feed.
func (h *Hub) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closed {
		h.closed = true
		close(h.done)
	}
}

// Stats returns the Hub's counters now.
func (h *Hub) Stats() Stats {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.statsLocked()
}

func (h *Hub) statsLocked() Stats {
	n := int(min(h.last, uint64(len(h.ring))))
	return Stats{Entries: n, Capacity: len(h.ring), Published: h.published.Load(), Gathers: h.gathers.Load(),
		Clients: h.clients, Dropped: h.dropped.Load(), Skipped: h.skipped.Load(), Refused: h.refused.Load(), Members: len(h.members)}
}

// attach counts a client in and starts the gathering if it was idle.
func (h *Hub) attach() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed || h.clients >= h.cfg.MaxClients {
		h.refused.Add(1)
		return false
	}
	h.clients++
	if !h.running {
		h.running = true
		go h.run()
	}
	return true
}

func (h *Hub) detach() {
	h.mu.Lock()
	h.clients--
	h.mu.Unlock()
}

// run gathers every Interval until no client is attached or the Hub
// closes.
func (h *Hub) run() {
	t := time.NewTicker(h.cfg.Interval)
	defer t.Stop()
	for {
		h.Gather()
		select {
		case <-h.done:
			return
		case <-t.C:
		}
		h.mu.Lock()
		if h.clients == 0 {
			h.running = false
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
	}
}

// fetchTimeout bounds one member's answer to a gathering: a member that
// does not answer in time is shown unreachable this round.
func (h *Hub) fetchTimeout() time.Duration { return max(4*h.cfg.Interval, time.Second) }

// Gather asks every peer for its news once and wakes the clients. The
// Hub calls it every Interval while clients are attached.
func (h *Hub) Gather() {
	peers := h.cfg.Peers()
	h.mu.Lock()
	since := make([]uint64, len(peers))
	for i, p := range peers {
		if ms := h.members[p.ID]; ms != nil {
			since[i] = ms.cursor
		}
	}
	h.mu.Unlock()
	type result struct {
		b   *Batch
		err error
	}
	results := make([]result, len(peers))
	var wg sync.WaitGroup
	for i, p := range peers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), h.fetchTimeout())
			defer cancel()
			b, err := p.Fetch(ctx, since[i])
			if err == nil && b == nil {
				err = context.DeadlineExceeded
			}
			results[i] = result{b, err}
		}()
	}
	wg.Wait()
	now := time.Now()
	h.mu.Lock()
	defer h.mu.Unlock()
	// The failures first, whoever published them: a shard rebuilt
	// follows the failure that moved it, which another member may have
	// published.
	for _, r := range results {
		if r.err == nil {
			for _, e := range r.b.Entries {
				if e.Kind == "NodeFailed" {
					h.noteFailureLocked(e, now)
				}
			}
		}
	}
	live := map[string]bool{}
	for i, p := range peers {
		live[p.ID] = true
		ms := h.member(p.ID, now)
		r := results[i]
		if r.err != nil {
			ms.status.Health = "unreachable"
			continue
		}
		ms.seen = now
		if s := r.b.Status; s != nil {
			ms.status = *s
		}
		ms.status.Member = p.ID
		ms.status.Health = "up"
		ms.cursor = r.b.Last
		for _, e := range r.b.Entries {
			switch e.Kind {
			case "ShardRebuilt":
				h.noteRebuildLocked(e)
				continue
			case "BarrierTookOver":
				h.noteTakeoverLocked(e)
			}
			h.appendLocked(e)
		}
	}
	h.publishRunsLocked()
	for id, ms := range h.members {
		if !live[id] && ms.status.Health != "failed" {
			ms.status.Health = "gone"
		}
		if ms.failed {
			ms.status.Health = "failed"
		}
	}
	h.gathers.Add(1)
	h.stateLocked()
	close(h.tick)
	h.tick = make(chan struct{})
}

// member returns id's state, making room for it if it is new.
func (h *Hub) member(id string, now time.Time) *memberState {
	if ms := h.members[id]; ms != nil {
		return ms
	}
	if len(h.members) >= maxMembers {
		// Forget the member not heard of for longest, a live one last.
		victim := func(a, b *memberState) bool { // a goes before b
			if au, bu := a.status.Health == "up", b.status.Health == "up"; au != bu {
				return bu
			}
			return a.seen.Before(b.seen)
		}
		var oldest string
		for k, ms := range h.members {
			if oldest == "" || victim(ms, h.members[oldest]) {
				oldest = k
			}
		}
		delete(h.members, oldest)
	}
	h.order++
	ms := &memberState{status: Status{Member: id}, seen: now, first: h.order}
	h.members[id] = ms
	return ms
}

// appendLocked adds an entry to the ring (renumbered in the Hub's
// order).
func (h *Hub) appendLocked(e Entry) {
	h.last++
	e.Seq = h.last
	h.ring[(h.last-1)%uint64(len(h.ring))] = e
	h.published.Add(1)
}

// noteFailureLocked marks the member a NodeFailed entry names failed.
func (h *Hub) noteFailureLocked(e Entry, now time.Time) {
	var f struct{ Node string }
	if json.Unmarshal(e.Data, &f) != nil || f.Node == "" {
		return
	}
	ms := h.member(f.Node, now)
	if !ms.failed || e.At < ms.failedAt {
		ms.failedAt = e.At
	}
	ms.failed = true
}

// after returns the entries after seq (at most frameEntries), how many
// after seq the ring no longer holds, and the seq to ask after next.
func (h *Hub) afterLocked(seq uint64) (out []Entry, skipped uint64, next uint64) {
	if seq >= h.last {
		return nil, 0, h.last
	}
	first := seq + 1
	if n := uint64(len(h.ring)); h.last > n && first < h.last-n+1 {
		skipped = h.last - n + 1 - first
		first = h.last - n + 1
	}
	end := min(h.last, first+frameEntries-1)
	out = make([]Entry, 0, end-first+1)
	for s := first; s <= end; s++ {
		out = append(out, h.ring[(s-1)%uint64(len(h.ring))])
	}
	return out, skipped, end
}

// stateFrame is the state event's data: every member known, the
// barriers as the Hub merged the members' reports (the members' own
// Status.Barriers are left out: Barriers stands for them), and the Hub's
// counters.
type stateFrame struct {
	Hub      string        `json:"hub"`
	Self     string        `json:"self"`
	At       int64         `json:"at"`
	Members  []Status      `json:"members"`
	Barriers []BarrierView `json:"barriers,omitempty"`
	Stats    Stats         `json:"stats"`
}

func (h *Hub) stateLocked() {
	f := stateFrame{Hub: h.id, Self: h.cfg.Self, At: time.Now().UnixMilli(), Stats: h.statsLocked(), Barriers: h.barriersLocked()}
	ids := make([]string, 0, len(h.members))
	for id := range h.members {
		ids = append(ids, id)
	}
	slices.SortFunc(ids, func(a, b string) int { return h.members[a].first - h.members[b].first })
	for _, id := range ids {
		s := h.members[id].status
		s.Barriers = nil
		f.Members = append(f.Members, s)
	}
	if b, err := json.Marshal(&f); err == nil {
		h.state = b
	}
}

// State is the last state frame (JSON): the members as last gathered and
// the Hub's counters.
func (h *Hub) State() []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.state
}
