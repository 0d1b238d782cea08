package livetest

// DOM is what the live view's page shows, read from its data-* attributes.
type DOM struct {
	Conn      string     `json:"conn"`
	Members   []Member   `json:"members"`
	Edges     []Edge     `json:"edges"`
	Streams   []Stream   `json:"streams"`
	Switches  []Switch   `json:"switches"`
	Reduces   []Reduce   `json:"reduces"`
	Positions []Position `json:"positions"`
	Repairs   []Repair   `json:"repairs"`
	Copies    []Copy     `json:"copies"`
	Lanes     []string   `json:"lanes"`
	Bars      []Bar      `json:"bars"`
	Barriers  []Barrier  `json:"barriers"`
	Events    []string   `json:"events"`   // the events list's kinds, newest first
	Rebuilds  []Rebuild  `json:"rebuilds"` // the events list's runs of shard rebuilds, newest first
}

// Member is a row of the members panel.
type Member struct {
	ID, Health string
	LatencyNs  float64
	Bandwidth  float64
	Failures   []Failure
}

// Failure is a failure a member noticed, and how the news arrived: Via
// "shard" (DetectedBy names the shard) or "revoke" (Origin raised the
// notice, Forwarder passed it on; "" when the member raised it), and
// Text the line the page shows for it.
type Failure struct {
	Node, DetectedBy, Via, Origin, Forwarder, Text string
}

// Edge is a stream drawn in a broadcast tree.
type Edge struct {
	Object, From, To, State string
	Failover                bool
}

// Stream is an edge's label: its receiver's copy in percent (100 once
// the stream ended whole) and the rate the page last measured (bytes per
// second, 0 while unknown).
type Stream struct {
	Object, From, To string
	Progress         int
	Rate             float64
}

// Switch is a SenderSwitched the broadcasts panel lists.
type Switch struct {
	Object, Receiver, From, To string
}

// Reduce is one reduce tree's header: its knee, if a knee fixed its
// size, and the cost model's T(d) beside the tree.
type Reduce struct {
	ID, Knee string
	Num      int
	Costs    []Cost
}

// Cost is one degree's T(d).
type Cost struct {
	Degree int
	CostNs float64
	Chosen bool
}

// Position is a box of a reduce tree; Progress is -1 while unknown.
type Position struct {
	Reduce, Object, Node, State, Output string
	Position                            int
	Progress                            int
	Repaired, Invalidated               bool
}

// Repair is a TreeNodeReplaced the reduces panel lists.
type Repair struct {
	Reduce, Failed, Replacement string
	Position                    int
}

// Copy is an object's copy the objects panel lists.
type Copy struct {
	Object, Member string
	Complete       bool
	Progress       int
}

// Bar is a stream in the timeline.
type Bar struct {
	Object, From, To, State string
}

// Barrier is a row of the barriers panel.
type Barrier struct {
	Name, Kind                                                string
	Entered, Passed, Throttled, Queued, Holders, Limit, Epoch int
	Closed                                                    bool
	Replicas                                                  []Replica
	// Acting is the member whose replica acts as primary ("" while
	// unknown); Pending says a take-over is awaited.
	Acting  string
	Pending bool
}

// Replica is one replica of a barrier's manager.
type Replica struct {
	Member        string
	Primary, Down bool
}

// Rebuild is a line of the events list standing for a run of directory
// shards rebuilt after the same failures.
type Rebuild struct {
	Count  int
	Failed []string
	Hosts  []RebuiltHost
}

// RebuiltHost is a host's part of a Rebuild: the shards it rebuilt.
type RebuiltHost struct {
	Host   string
	Count  int
	Shards []string
}

const readDOM = `(() => {
  const all = (s, root) => [...(root || document).querySelectorAll(s)];
  const num = (v) => v === undefined || v === '' ? -1 : Number(v);
  return {
    conn: document.querySelector('#conn').dataset.state,
    members: all('#members tr[data-member]').map(e => ({ID: e.dataset.member, Health: e.dataset.health,
      LatencyNs: Number(e.dataset.latencyNs), Bandwidth: Number(e.dataset.bandwidth),
      Failures: all('[data-failure]', e).map(f => ({Node: f.dataset.failure, DetectedBy: f.dataset.detectedBy, Via: f.dataset.via,
        Origin: f.dataset.origin, Forwarder: f.dataset.forwarder, Text: f.textContent}))})),
    edges: all('#broadcasts g[data-edge]').map(e => ({Object: e.dataset.object, From: e.dataset.from, To: e.dataset.to,
      State: e.dataset.state, Failover: e.dataset.failover === '1'})),
    streams: all('#broadcasts g[data-edge]').map(e => ({Object: e.dataset.object, From: e.dataset.from, To: e.dataset.to,
      Progress: Number(e.dataset.progress), Rate: Number(e.dataset.rate)})),
    switches: all('#broadcasts [data-switch]').map(e => ({Object: e.closest('[data-object]').dataset.object,
      Receiver: e.dataset.receiver, From: e.dataset.from, To: e.dataset.to})),
    reduces: all('#reduces div.reduce').map(e => ({ID: e.dataset.reduce, Knee: e.dataset.knee,
      Num: Number((e.querySelector('.knee') || {dataset: {num: 0}}).dataset.num),
      Costs: all('table.costs tr[data-degree]', e).map(c => ({Degree: Number(c.dataset.degree), CostNs: Number(c.dataset.costNs),
        Chosen: c.dataset.chosen === '1'}))})),
    positions: all('#reduces g.pos').map(e => ({Reduce: e.dataset.reduce, Position: Number(e.dataset.position),
      Object: e.dataset.object || '', Node: e.dataset.node || '', Output: e.dataset.output || '', State: e.dataset.state,
      Progress: num(e.dataset.progress), Repaired: e.dataset.repaired === '1', Invalidated: e.dataset.invalidated === '1'})),
    repairs: all('#reduces [data-repair]').map(e => ({Reduce: e.dataset.reduce, Position: Number(e.dataset.position),
      Failed: e.dataset.failed, Replacement: e.dataset.replacement || ''})),
    copies: all('#objects .copy').map(e => ({Object: e.closest('tr').dataset.object, Member: e.dataset.member,
      Complete: e.dataset.complete === '1', Progress: Number(e.dataset.progress)})),
    lanes: all('#timeline [data-lane]').map(e => e.dataset.lane),
    bars: all('#timeline [data-transfer]').map(e => ({Object: e.dataset.object, From: e.dataset.from, To: e.dataset.to, State: e.dataset.state})),
    barriers: all('#barriers tr[data-barrier]').map(e => ({Name: e.dataset.barrier, Kind: e.dataset.kind,
      Entered: Number(e.dataset.entered), Passed: Number(e.dataset.passed), Throttled: Number(e.dataset.throttled),
      Queued: Number(e.dataset.queued), Holders: Number(e.dataset.holders), Limit: Number(e.dataset.limit), Epoch: Number(e.dataset.epoch),
      Closed: e.dataset.closed === '1', Acting: e.dataset.acting || '', Pending: e.dataset.pending === '1',
      Replicas: all('[data-replica]', e).map(r => ({Member: r.dataset.replica, Primary: r.dataset.primary === '1', Down: r.dataset.down === '1'}))})),
    events: all('#events li[data-kind]').map(e => e.dataset.kind),
    rebuilds: all('#events li[data-kind=ShardsRebuilt]').map(e => ({Count: Number(e.dataset.count), Failed: JSON.parse(e.dataset.failed || '[]'),
      Hosts: all('[data-host]', e).map(h => ({Host: h.dataset.host, Count: Number(h.dataset.count),
        Shards: all('[data-shard]', h).map(s => s.dataset.shard)}))})),
  };
})()`
