package reduction

import (
	"fmt"
	"testing"

	"github.com/hoplite-go/hoplite/messages"
)

// BenchmarkReduceSteps runs the coordinator's core through one Reduce of
// n sources by a chain, as a member's coordinator steps it: Begin, a
// location update per source, and a started and a done report per
// position, the root's last. It reports the core's time per step: at
// 1,024 sources a Reduce is about 3n steps on one actor's goroutine.
//
//	go test -run '^$' -bench ReduceSteps -count 5 ./internal/reduction/
func BenchmarkReduceSteps(b *testing.B) {
	for _, n := range []int{8, 16, 64, 1024} {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			srcs := ids("s", n)
			steps := 0
			for b.Loop() {
				r := newRed(request(srcs, n), Config{ForceDegree: 1})
				r.Step(t0, Begin{})
				steps++
				root := -1
				var tasks []*messages.ReduceTask
				for i, id := range srcs {
					fx := r.Step(t0, located(id, bigSize, node(i)))
					steps++
					for _, s := range fx.Sends {
						if t, ok := s.Msg.(*messages.ReduceTask); ok {
							tasks = append(tasks, t)
						}
						if tb, ok := s.Msg.(*messages.ReduceTaskBatch); ok {
							tasks = append(tasks, tb.GetTasks()...)
						}
					}
				}
				for _, t := range tasks {
					if t.GetRoot() {
						root = int(t.GetPosition())
						continue
					}
					r.Step(t0, &messages.ReduceTaskStarted{ReduceId: testReduceID, Position: t.GetPosition(), Generation: t.GetGeneration()})
					r.Step(t0, &messages.ReduceTaskDone{ReduceId: testReduceID, Position: t.GetPosition(), Generation: t.GetGeneration()})
					steps += 2
				}
				if root < 0 || len(tasks) != n-1 { // the chain's leaf needs no task: its output is its source
					b.Fatalf("%d tasks, root %d: want %d tasks and a root", len(tasks), root, n-1)
				}
				r.Step(t0, &messages.ReduceTaskStarted{ReduceId: testReduceID, Position: int32(root), Generation: 1})
				fx := r.Step(t0, &messages.ReduceTaskDone{ReduceId: testReduceID, Position: int32(root), Generation: 1})
				steps += 2
				if len(fx.Sends) == 0 {
					b.Fatal("the root's report sent nothing")
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(steps), "ns/step")
		})
	}
}
