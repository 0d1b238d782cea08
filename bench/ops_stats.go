package bench

import (
	"math"
	"slices"
	"time"
)

// OpsRow is one measured phase of `hoplite bench ops`: one operation of
// one object size from a number of concurrent callers, in one mode.
type OpsRow struct {
	Mode    string `json:"mode"`
	Op      string `json:"op"`
	Size    int64  `json:"size"`
	Callers int    `json:"callers"`
	// Ops is how many operations completed; Elapsed the phase's wall
	// time, from its first caller's start to its last caller's end.
	Ops     int           `json:"ops"`
	Elapsed time.Duration `json:"elapsed_ns"`
	// CPU is every member's CPU time (user and system) over the phase.
	CPU time.Duration `json:"cpu_ns"`
	// P50 and P99 are the operations' latencies (nearest rank).
	P50 time.Duration `json:"p50_ns"`
	P99 time.Duration `json:"p99_ns"`
	// PingP50 is the bare data-plane round trip's p50 from as many
	// callers, measured just before this phase (0 for the ping row).
	PingP50 time.Duration `json:"ping_p50_ns"`
}

// OpsPerSecond is the phase's throughput: operations per second of
// wall time (0 when nothing was timed).
func (r OpsRow) OpsPerSecond() float64 { return opsPerSecond(r.Ops, r.Elapsed) }

// OpsPerCPUSecond is the phase's operations per second of CPU, every
// member's: what one core sustains if the operation is CPU-bound.
func (r OpsRow) OpsPerCPUSecond() float64 { return opsPerSecond(r.Ops, r.CPU) }

// CPUPerOp is the CPU time of one operation, every member's.
func (r OpsRow) CPUPerOp() time.Duration {
	if r.Ops == 0 {
		return 0
	}
	return r.CPU / time.Duration(r.Ops)
}

// P50OverPing is the p50 latency over the bare round trip's (0 without
// one).
func (r OpsRow) P50OverPing() float64 {
	if r.PingP50 <= 0 {
		return 0
	}
	return float64(r.P50) / float64(r.PingP50)
}

func opsPerSecond(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// nearestRank is the p-th percentile (0 < p <= 100) of sorted by the
// nearest-rank method: the smallest value with at least p % of the
// values at or below it. 0 for none.
func nearestRank(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	k := int(math.Ceil(p / 100 * float64(len(sorted))))
	return sorted[min(max(k, 1), len(sorted))-1]
}

// summarizeOps fills r's latency columns from lat (sorted in place).
func summarizeOps(r *OpsRow, lat []time.Duration) {
	slices.Sort(lat)
	r.P50, r.P99 = nearestRank(lat, 50), nearestRank(lat, 99)
}
