package bench

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// PeerResult is a peer script's RESULT line:
//
//	RESULT peer=mpi op=bcast nodes=8 size=33554432 algorithm=best interval_ms=0 median=1.14 min=1.12 max=1.20 reps=3
//	       cpu_s=0.9 timing=scheduled own=1.10 skew=0.0004 machine_s=1.3
type PeerResult struct {
	Peer, Op, Algorithm string
	Nodes, Reps         int
	Size                int64
	IntervalMs          float64
	Median, Min, Max    float64 // seconds
	// CPU is the median CPU seconds of one call, all ranks together
	// (optional cpu_s=; 0 when the peer does not report it).
	CPU float64
	// Timing is how the peer timed its repetitions (optional timing=,
	// TimingScheduled or TimingBarrier; "" when the line does not say,
	// as the peers' lines did before they were timed like ours).
	Timing string
	// Own is the median of the slowest rank's time from its own start,
	// Skew of how far apart the ranks started (optional own= and skew=,
	// seconds; HasOwn says they were given): with a scheduled start, Own
	// is what timing each rank from its own barrier exit would report,
	// so Median - Own is the difference between the two methods.
	Own, Skew float64
	HasOwn    bool
	// Machine is the median of the whole machine's busy CPU seconds over
	// a call (optional machine_s=; HasMachine says it was given), as
	// ours's machine_busy_s: the kernel's network work counted wherever
	// it ran.
	Machine    float64
	HasMachine bool
}

// ParsePeerResult parses one RESULT line of a peer script.
func ParsePeerResult(line string) (PeerResult, error) {
	fields := strings.Fields(strings.TrimSpace(line))
	if len(fields) == 0 || fields[0] != "RESULT" {
		return PeerResult{}, fmt.Errorf("not a RESULT line: %q", line)
	}
	kv := map[string]string{}
	for _, f := range fields[1:] {
		k, v, ok := strings.Cut(f, "=")
		if !ok || k == "" {
			return PeerResult{}, fmt.Errorf("RESULT line: field %q is not key=value", f)
		}
		if _, dup := kv[k]; dup {
			return PeerResult{}, fmt.Errorf("RESULT line: %s given twice", k)
		}
		kv[k] = v
	}
	var r PeerResult
	var err error
	need := func(k string) string {
		v, ok := kv[k]
		if !ok && err == nil {
			err = fmt.Errorf("RESULT line lacks %s=: %q", k, line)
		}
		return v
	}
	num := func(k string, nonneg bool) float64 {
		s := need(k)
		if err != nil {
			return 0
		}
		x, perr := strconv.ParseFloat(strings.TrimSuffix(s, "s"), 64)
		if perr != nil || math.IsNaN(x) || math.IsInf(x, 0) || (nonneg && x < 0) {
			err = fmt.Errorf("RESULT line: %s=%q is not a number", k, s)
		}
		return x
	}
	integer := func(k string) int64 {
		s := need(k)
		if err != nil {
			return 0
		}
		x, perr := strconv.ParseInt(s, 10, 64)
		if perr != nil || x < 0 {
			err = fmt.Errorf("RESULT line: %s=%q is not a count", k, s)
		}
		return x
	}
	r.Peer, r.Op = need("peer"), need("op")
	r.Nodes, r.Size = int(integer("nodes")), integer("size")
	r.Algorithm = kv["algorithm"]
	if _, ok := kv["interval_ms"]; ok {
		r.IntervalMs = num("interval_ms", true)
	}
	r.Median, r.Min, r.Max = num("median", true), num("min", true), num("max", true)
	r.Reps = int(integer("reps"))
	if _, ok := kv["cpu_s"]; ok {
		r.CPU = num("cpu_s", true)
	}
	if _, ok := kv["machine_s"]; ok {
		r.Machine, r.HasMachine = num("machine_s", true), true
	}
	if t, ok := kv["timing"]; ok {
		switch t {
		case TimingScheduled, TimingBarrier, TimingClient:
			r.Timing = t
		default:
			if err == nil {
				err = fmt.Errorf("RESULT line: timing=%q is not %s, %s or %s", t, TimingScheduled, TimingBarrier, TimingClient)
			}
		}
	}
	_, hasOwn := kv["own"]
	_, hasSkew := kv["skew"]
	if hasOwn != hasSkew && err == nil {
		err = fmt.Errorf("RESULT line: own= and skew= come together: %q", line)
	}
	if hasOwn && hasSkew {
		r.Own, r.Skew, r.HasOwn = num("own", true), num("skew", true), true
	}
	if err != nil {
		return PeerResult{}, err
	}
	if r.Min > r.Median || r.Median > r.Max {
		return PeerResult{}, fmt.Errorf("RESULT line: want min <= median <= max: %q", line)
	}
	return r, nil
}

// FindPeerResults returns the RESULT lines of a peer's output, parsed;
// other lines are ignored. A malformed RESULT line is an error.
func FindPeerResults(out io.Reader) ([]PeerResult, error) {
	var rs []PeerResult
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if strings.HasPrefix(strings.TrimSpace(sc.Text()), "RESULT ") {
			r, err := ParsePeerResult(sc.Text())
			if err != nil {
				return nil, err
			}
			rs = append(rs, r)
		}
	}
	return rs, sc.Err()
}
