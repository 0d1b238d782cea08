package sim

import (
	"fmt"
	"strings"
	"time"

	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/reduction/plan"
)

// Params is the simulated network and cluster.
type Params struct {
	// N is the number of hosts.
	N int
	// Bandwidth is each host's up and down link, in bits per second (the
	// testbed's tc rate).
	Bandwidth float64
	// PayloadEfficiency is the share of a link's bits that carry TCP
	// payload: 1448 of every 1514 bytes tc counts on the testbed (a
	// full-sized TCP segment with timestamps in an Ethernet frame).
	PayloadEfficiency float64
	// Burst is each link's token bucket in payload bytes: the testbed's
	// tbf burst, max(4 ms at the rate, 128 KiB) (bench/testbed), 0 for
	// none.
	Burst float64
	// Latency is the one-way latency L of a data chunk (the wire).
	Latency time.Duration
	// ActorLatency is the one-way time of a Proto.Actor message between
	// two hosts (a Reduce's tasks and reports, its commit and answer, a
	// root's CreateObject, the failure notice, the barrier), and
	// RequestLatency that of a control request on the data plane (a
	// Get's Locate and its answer, a coordinator's Subscribe, a stream's
	// open): what a message takes beyond its processing at the queue it
	// reaches. Both are half the round trips measured on the testbed
	// (actor-rtt, data-rtt of hoplite bench) less that processing.
	ActorLatency, RequestLatency time.Duration
	// ActorCPU and RequestCPU are the CPU one message of each plane costs
	// its sender (serializing and writing it) and, again, its receiver
	// (reading, decoding and dispatching it), besides the processing of
	// the queue it reaches: a member that sends or takes in many at once
	// (a coordinator's tasks, the answers to its Subscribes) is busy for
	// that long, on the cores it shares. With ActorLatency and
	// RequestLatency they are fitted to the round-trip floors hoplite bench
	// measures on the testbed beside its collectives (see Floor).
	ActorCPU, RequestCPU time.Duration
	// ByteCost is the CPU time a host spends on each byte it receives
	// (the socket's copy, the store's write, the relay's send), ReduceCost
	// what a Reduce worker adds for each input byte it combines. A chunk
	// is readable only once its host's CPU has processed it, one chunk at
	// a time: a pipeline pays it once a hop.
	ByteCost, ReduceCost float64 // seconds per byte
	// ChunkCPU is what a chunk under plan.MinChunk costs its stream's
	// two ends beside its bytes (a frame, a wake-up at each end), charged
	// at its receiver for every piece of a stream whose chunk is under
	// MinChunk, scaled by how much smaller it is (chunkCost): ByteCost was
	// fitted on chunks of MinChunk and more, whose own cost it holds.
	// plan.ChunkCPU, measured.
	ChunkCPU time.Duration
	// OperationCPU is the CPU a host spends on its part in one operation
	// beyond its messages and bytes (a Get's fetch, a Reduce's tasks on
	// that host), on its data queue ahead of the bytes it receives: the
	// intercept of the CPU per operation the testbed measures against
	// the bytes received, about a millisecond per member taking part
	// (broadcasts to 8 of 1 MiB: 26.9 ms measured, 17.1 ms modelled
	// without it, 24.0 with; the sliced AllReduce to 8, whose 72 tasks
	// cost about one member's worth each, not one task's: 82.0, 74.2
	// and 82.4 ms).
	OperationCPU time.Duration
	// FanOut is how many receivers a copy streams to at once
	// (directory.TableConfig.FanOut: 1, a chain; 0, the cost model's
	// choice for the N-1 receivers a broadcast to every host has, as a
	// cluster's shards make it).
	FanOut int
	// Stripes, if > 1, has the broadcast scenario cut the object into
	// that many stripes, each receiver fetching each from a sender the
	// shard's directory.StripeTrees hands it (stripedBroadcast) instead
	// of the whole object from one.
	Stripes int
	// Chunk, if > 0, is the transfer chunk in bytes: a cluster whose
	// members set storeactor.Config.ChunkSize. 0: what members that adapt
	// it choose, plan.ChunkForObject of the link and the object, or the
	// smaller chunk a Get's directory shard chose for the broadcast
	// tree's depth (LocateReply.chunk, plan.BroadcastChunk).
	Chunk int64
	// CPUs is how many cores the hosts share, 0 for a core of its own
	// each. The testbed runs its N hosts as processes of one machine
	// with 2 vCPUs: with CPUs > 0 every piece of a host's processing (a
	// control message at any of its queues, a chunk taken in) waits,
	// besides its own queue, for one of the machine's cores, first come
	// first served, and holds it for its cost.
	CPUs int
	// Wake is the CPU a host's process spends coming back after it has
	// had nothing to do for WakeAfter (parked: its threads asleep in
	// epoll_wait and futexes, its caches cold, its own timers due), before
	// the job that woke it: a message or a chunk. On shared cores the
	// nodes woken at one instant (every participant at a collective's
	// start) queue for it. A host at work, or idle for less, pays nothing.
	Wake, WakeAfter time.Duration
	// StoreCost, ShardCost and CoordCost are the processing time of one
	// control message at a store node, a directory shard and a Reduce
	// coordinator.
	StoreCost, ShardCost, CoordCost time.Duration
	// ActorLocates has every Locate answered by its shard's table, as
	// before members answered a published inline object's Locates on
	// the data plane's connection without the shard
	// (inlineindex.Index.AnswerLocate, at QuickLocateShare of ShardCost):
	// for the comparison.
	ActorLocates bool
	// Deputies, if > 1, splits each shard's receivers into that many
	// groups whose Locates go through a deputy host each, which sends
	// them on to the shard's home in batches (sim/deputy.go): a what-if
	// the cluster does not run, to measure.
	Deputies int
	// SingleUpdates has a Reduce coordinator's Subscribes go one by one
	// and its sources' shards answer each streamed source's location in
	// an actor message of its own, as before coordinators grouped their
	// Subscribes (messages.SubscribeBatch.grouped): for the comparison.
	SingleUpdates bool
	// ListRingTasks has a sliced AllReduce's coordinator list every
	// participant's 2n tasks, as before it stated each participant's
	// share (messages.SlicedRingShare): for the comparison.
	ListRingTasks bool
	// Shards is the number of directory shards, placed on hosts round
	// robin (shard i on host i mod N).
	Shards int
	// Detect is how long a failed host's watchers take to see it gone
	// (its connections reset).
	Detect time.Duration
	// Grace is the fetch protocol's grace after a sender failed.
	Grace time.Duration
	// Timeout is every operation's deadline.
	Timeout time.Duration
	// SlowFraction of the hosts have links SlowFactor as fast.
	SlowFraction, SlowFactor float64
	// Seed makes the run: the same seed, the same timeline.
	Seed uint64
}

// QuickLocateShare is what a Locate that a shard's published inline
// objects answer costs its member beyond the request's receive, as a
// share of the shard's processing of a message (ShardCost): the ratio
// BenchmarkLocateAnswer (internal/actors/shardactor) measures between
// the quick answer and the shard's, each from the encoded request to the
// encoded reply of a 1 KiB object: 0.61 µs against 3.79 µs, medians of
// 5, on the 2-vCPU AMD EPYC VM, 2026-11-28.
const QuickLocateShare = 0.16

// quickCost is the processing of a Locate answered from a shard's
// published inline objects.
func (p Params) quickCost() time.Duration {
	return time.Duration(float64(p.ShardCost) * QuickLocateShare)
}

// TestbedPayloadEfficiency is 1448/1514: what TCP carries of what the
// testbed's tbf shaper counts.
const TestbedPayloadEfficiency = 1448.0 / 1514.0

// TestbedBurst is what the testbed's tbf shaper passes at once at rate
// bits per second, in payload bytes: its burst as bench/testbed sets it,
// 4 ms at the rate and at least 128 KiB. A chain's first 64 KiB chunks
// pass it at once at 50 Mbit/s too: there a 1 MiB reduce by a chain of 32
// hosts took 0.185 s on the testbed, 1.10 times its S/B, and a broadcast
// by a chain of 48 0.19 s (2026-11-28; bench/results/
// testbed-validation-link-burst-2026-11-28T1655).
func TestbedBurst(rate float64) float64 {
	return max(rate/8*0.004, 128<<10) * TestbedPayloadEfficiency
}

// DefaultParams are the testbed's settings: 400 Mbit/s per host up and
// down, veth latency, and the costs measured there (see
// docs/simulator.md and the 1 MiB reports in bench/results): the
// control planes' latency and per-message CPU fitted to the round-trip floors hoplite
// bench measured beside the 1 MiB collectives (host 0 to 3 and to 7
// others at once: actor-rtt 0.778 and 1.306 ms, data-rtt 0.281 and
// 0.381 ms), 2.1 ns of CPU per byte a host receives (the slope of the
// CPU per operation of broadcasts to 8 of 1, 4 and 32 MiB: 27.3, 73.9
// and 516 ms) and 0.2 ns more per byte a Reduce combines, a millisecond
// per member and operation (the intercept of that line), and a parked
// node's wake-up measured by bench/wakeprobe (a hop's extra 40 µs once its
// process idled 10 ms or more). The hosts have a core each: TestbedCPUs
// is the testbed's machine.
func DefaultParams(n int) Params {
	return Params{
		N:                 n,
		Bandwidth:         400e6,
		PayloadEfficiency: TestbedPayloadEfficiency,
		Burst:             TestbedBurst(400e6),
		Latency:           50 * time.Microsecond,
		ActorLatency:      145 * time.Microsecond,
		ActorCPU:          62 * time.Microsecond,
		RequestLatency:    60 * time.Microsecond,
		RequestCPU:        8 * time.Microsecond,
		Wake:              40 * time.Microsecond,
		WakeAfter:         10 * time.Millisecond,
		ByteCost:          2.1e-9,
		OperationCPU:      time.Millisecond,
		ReduceCost:        0.2e-9,
		ChunkCPU:          plan.ChunkCPU,
		StoreCost:         20 * time.Microsecond,
		ShardCost:         20 * time.Microsecond,
		CoordCost:         20 * time.Microsecond,
		Shards:            64,
		Detect:            time.Millisecond,
		Grace:             5 * time.Second,
		Timeout:           120 * time.Second,
		SlowFactor:        0.5,
		Seed:              1,
	}
}

// UnshapedByteCost and UnshapedReduceCost are Params.ByteCost and
// Params.ReduceCost measured on the testbed's machine with links that do
// not bound a transfer (tc at 10 Gbit/s: 8 nodes on 2 vCPUs move 32 MiB
// to 7 in 91-95 ms, medians of three runs, 2.5 GB/s of payload), for the
// profiles whose links
// are faster than the testbed's: the slope of the CPU per operation of
// broadcasts to 8 (1, 4, 16 and 32 MiB, 7 reps each, three runs: 0.62,
// 0.66 and 0.64 ns a byte received) and of reduces of 8 by a chain (0.93
// a byte received: 0.29 more a byte combined). The same members at 400
// Mbit/s, in the same hour, paid 1.10-1.15 and 1.29: a shaped link
// hands a receiver its bytes in smaller pieces, each a wake-up and a
// read. The per-message CPU did not move with the rate (round-trip
// floors at 4 and 8 hosts within each other's spread at both rates),
// and neither did the intercept, a member's share of an operation (14-19
// ms for 8 members at both): those stay the testbed's fit.
// bench/results/cpu-per-byte-unshaped-2026-11-28T1851.
const (
	UnshapedByteCost   = 0.64e-9
	UnshapedReduceCost = 0.29e-9
)

// CPUModels are the CPU costs a simulated host can pay per byte:
// "testbed", DefaultParams' fit to the testbed's shaped links, and
// "unshaped", measured where the links do not bound (UnshapedByteCost).
var CPUModels = []string{"testbed", "unshaped"}

// WithCPUModel is p with the per-byte CPU costs of the named model
// (CPUModels), or an error naming the models for any other name.
func (p Params) WithCPUModel(name string) (Params, error) {
	switch name {
	case "testbed":
		d := DefaultParams(p.N)
		p.ByteCost, p.ReduceCost = d.ByteCost, d.ReduceCost
	case "unshaped":
		p.ByteCost, p.ReduceCost = UnshapedByteCost, UnshapedReduceCost
	default:
		return p, fmt.Errorf("sim: unknown CPU model %q: want one of %s", name, strings.Join(CPUModels, ", "))
	}
	return p, nil
}

// TestbedCPUs is the cores of the machine the testbed runs its hosts on
// (bench/results: "cpus": 2).
const TestbedCPUs = 2

// chunkCost is what a piece of a stream in chunks of n bytes costs its
// receiver beside its bytes: ChunkCPU·(1 − n/MinChunk) under
// plan.MinChunk, the part of a chunk's own cost that ByteCost, fitted on
// chunks of MinChunk, does not hold already; nothing from MinChunk up
// (nor for a stream's last piece, or one a pipeline sent before its
// chunk was all there: ByteCost's fit held those too).
func (p Params) chunkCost(n int64) time.Duration {
	if n >= plan.MinChunk || p.ChunkCPU <= 0 {
		return 0
	}
	return time.Duration(float64(p.ChunkCPU) * (1 - float64(n)/plan.MinChunk))
}

// actorLatency is ActorLatency, or Latency if it is not set.
func (p Params) actorLatency() time.Duration {
	if p.ActorLatency > 0 {
		return p.ActorLatency
	}
	return p.Latency
}

// plane is the latency and per-message CPU of a control message's plane.
func (p Params) plane(via plane) (time.Duration, time.Duration) {
	if via == viaRequest {
		return p.requestLatency(), p.RequestCPU
	}
	return p.actorLatency(), p.ActorCPU
}

// requestLatency is RequestLatency, or Latency if it is not set.
func (p Params) requestLatency() time.Duration {
	if p.RequestLatency > 0 {
		return p.RequestLatency
	}
	return p.Latency
}

// measuredLatency is the one-way latency a member's estimator measures
// (half the round trip of its warm-up's data-plane pings): a control
// request's latency and its CPU at both ends, as Floor models it, not
// the wire's alone.
func (p Params) measuredLatency() time.Duration {
	return p.requestLatency() + 2*p.RequestCPU
}

// LinkFanOut is directory.FanOutFor this network: how many receivers one
// uplink feeds at the rate each takes bytes in (its downlink, or its
// CPU per byte if that is slower).
func (p Params) LinkFanOut() int {
	return directory.FanOutFor(p.Bandwidth/8*p.PayloadEfficiency, p.intake())
}

// intake is the rate at which a host takes a stream's bytes in: its
// downlink's payload rate, or its CPU per byte if that is slower
// (directory.TableConfig.Intake).
func (p Params) intake() float64 {
	intake := p.Bandwidth / 8 * p.PayloadEfficiency
	if p.ByteCost > 0 {
		intake = min(intake, 1/p.ByteCost)
	}
	return intake
}

// cpuRate is the rate at which a host's CPU takes bytes in, 1/ByteCost,
// or 0 if the model charges none.
func (p Params) cpuRate() float64 {
	if p.ByteCost > 0 {
		return 1 / p.ByteCost
	}
	return 0
}

// broadcastLink is the network a directory shard prices a broadcast's
// fan-out on (directory.TableConfig's InlineUplink, Latency, Intake,
// Burst and CPU): one host's uplink payload rate, the wire's latency, a
// receiver's intake, the shaper's burst, a receiver's CPU rate.
func (p Params) broadcastLink() plan.BroadcastLink {
	return plan.BroadcastLink{L: p.Latency, B: p.Bandwidth / 8 * p.PayloadEfficiency, Intake: p.intake(), Burst: p.Burst, CPU: p.cpuRate()}
}

// BroadcastFanOut is the fan-out a shard under directory.FanOutAuto
// chooses for a broadcast of size bytes to the N-1 other hosts of a
// uniform network (slow hosts aside).
func (p Params) BroadcastFanOut(size int64) int {
	return plan.ChooseBroadcastFanOut(p.N-1, p.broadcastLink(), size)
}
