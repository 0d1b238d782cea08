package cluster

import (
	"strings"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

// The chaos oracle excuses a Reduce's TIMEOUT by the machine's speed only
// as far as the probe measured it: the same Reduce, whose one source was
// Put early, fails the seed when round trips between members cost
// milliseconds, and is explained when they cost a second each (as under
// HOPLITE_CHAOS_LOAD=2 on one CPU, where their median measured
// 0.7–1.3 s).
func TestChaosOracleExcusesOnlyMeasuredSlowness(t *testing.T) {
	t0 := time.Now()
	step := chaosStep{idx: 1, kind: stepReduce, red: 0, node: 1, timeout: 3 * time.Second}
	run := chaosReduceRun{step: step, caller: 1, shardHost: 2, begin: t0,
		end: t0.Add(chaosSlow(step.timeout)), err: messages.Errorf(messages.ErrorCode_TIMEOUT, "no reply")}
	oracle := func(rtt time.Duration) *chaosRun {
		c := &chaosRun{
			p: &chaosPlan{seed: 1, nodes: 3,
				objs:    []chaosObj{{id: "s0", data: make([]byte, 8), node: 0}},
				reduces: []chaosReduce{{target: "t0", sources: []int{0}, num: 1, op: messages.ReduceOp_SUM}}},
			putErr: map[int]error{0: nil},
			putEnd: map[int]time.Time{0: t0.Add(chaosSlow(time.Second))},
		}
		for at := t0; at.Before(run.end); at = at.Add(chaosProbeEvery) {
			c.probes = append(c.probes, chaosProbe{at: at, rtt: rtt})
		}
		return c
	}
	if why := oracle(5 * time.Millisecond).timeoutExcuse(run); why != "" {
		t.Errorf("round trips of 5ms: excused (%s); want a TIMEOUT no fault or slowness explains", why)
	}
	if why := oracle(time.Second).timeoutExcuse(run); !strings.Contains(why, "sources stayed available") {
		t.Errorf("round trips of 1s: %q; want it explained: its source was Put too late for a Reduce of 6 round trips", why)
	}
}
