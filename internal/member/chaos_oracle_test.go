package member

import (
	"slices"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/history"
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
	data := make([]byte, 8)
	timeout := chaosSlow(3 * time.Second)
	plan := &chaosPlan{seed: 1, nodes: 3,
		objs:    []chaosObj{{id: "s0", data: data, node: 0}},
		reduces: []chaosReduce{{target: "t0", sources: []int{0}, num: 1, op: messages.ReduceOp_SUM}}}
	put := &chaosOp{base: chaosPutBase, trips: chaosPutTrips, op: history.Op{ID: 0, Kind: history.Put, Member: 0, Object: "s0",
		Sum: fp(data), Size: 8, Hosts: [2]int{2, 2}, Begin: t0, End: t0.Add(chaosSlow(time.Second)), Deadline: t0.Add(timeout)}}
	red := &chaosOp{base: chaosReduceSlack, trips: chaosReduceTrips, op: history.Op{ID: 1, Kind: history.Reduce, Member: 1, Object: "t0",
		Sources: []string{"s0"}, Num: 1, Size: 8, Hosts: [2]int{2, 2}, Begin: t0, End: t0.Add(timeout), Deadline: t0.Add(timeout),
		Code: messages.ErrorCode_TIMEOUT}}
	check := func(rtt time.Duration) history.Report {
		c := &chaosRun{p: plan, ops: []*chaosOp{put, red}, ids: map[string]int{}}
		for at := t0; at.Before(red.op.End); at = at.Add(chaosProbeEvery) {
			c.probes = append(c.probes, chaosProbe{at: at, rtt: rtt})
		}
		return history.Check(c.history(), c.model())
	}
	if rep := check(5 * time.Millisecond); len(rep.Violations) != 1 || rep.Violations[0].Rule != history.RuleTimeout {
		t.Errorf("round trips of 5ms: violations %v; want the TIMEOUT that no fault or slowness explains", rep.Violations)
	}
	if rep := check(time.Second); len(rep.Violations) != 0 || rep.Excuses[1] == "" {
		t.Errorf("round trips of 1s: violations %v, excuses %v; want it explained: a Reduce of 6 round trips needs more than its deadline", rep.Violations, rep.Excuses)
	}
}

// A kill aimed at a role swaps the victim's label with the node the plan
// drew, so that the plan's count of live nodes stays true: the drawn
// node lives on under the victim's label, and later faults of either
// label hit the other node.
func TestChaosAimedKillKeepsTheLiveCount(t *testing.T) {
	plan := &chaosPlan{nodes: 4, objs: []chaosObj{{id: "o", node: 3}}}
	c := &chaosRun{p: plan, perm: []int{0, 1, 2, 3}}
	alive := []bool{true, true, true, true}
	c.alive = func(i int) bool { return alive[i] }
	if v := c.aimAt(chaosStep{kind: stepKill, node: 1, aim: aimCreator, obj: 0}); v != 3 {
		t.Fatalf("kill aimed at the creator on node 3 hit node %d", v)
	}
	alive[3] = false
	if want := []int{0, 3, 2, 1}; !slices.Equal(c.perm, want) {
		t.Fatalf("labels %v after the aimed kill, want %v", c.perm, want)
	}
	if v := c.aimAt(chaosStep{kind: stepRestart, node: 1}); v != 3 {
		t.Fatalf("the plan's restart of node 1 (the one it killed) hit node %d, want the killed node 3", v)
	}
	if v := c.aimAt(chaosStep{kind: stepKill, node: 3, aim: aimCreator, obj: 0}); v != 1 {
		t.Fatalf("a kill of node 3 (the plan's label) with its creator dead hit node %d, want node 1 (where label 3 lives)", v)
	}
}
