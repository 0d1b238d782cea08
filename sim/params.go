package sim

import "time"

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
	// Latency is the one-way latency L of every message and data chunk.
	Latency time.Duration
	// StoreCost, ShardCost and CoordCost are the processing time of one
	// control message at a store node, a directory shard and a Reduce
	// coordinator.
	StoreCost, ShardCost, CoordCost time.Duration
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

// TestbedPayloadEfficiency is 1448/1514: what TCP carries of what the
// testbed's tbf shaper counts.
const TestbedPayloadEfficiency = 1448.0 / 1514.0

// TestbedBurst is the testbed's tbf burst at rate bits per second (4 ms
// at the rate, at least 128 KiB), in payload bytes.
func TestbedBurst(rate float64) float64 {
	return max(rate/8*0.004, 128<<10) * TestbedPayloadEfficiency
}

// DefaultParams are the testbed's settings: 400 Mbit/s per host up and
// down, veth latency, the per-message costs measured there (see
// docs/simulator.md).
func DefaultParams(n int) Params {
	return Params{
		N:                 n,
		Bandwidth:         400e6,
		PayloadEfficiency: TestbedPayloadEfficiency,
		Burst:             TestbedBurst(400e6),
		Latency:           50 * time.Microsecond,
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
