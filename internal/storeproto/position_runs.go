package storeproto

import (
	"github.com/hoplite-go/hoplite/internal/outbox"
	"github.com/hoplite-go/hoplite/messages"
)

// PositionRuns serializes the runs and rewinds of one reduce tree
// position. Runs and rewinds of one output must never overlap: a stopped
// run that has not yet noticed its cancellation would otherwise take a
// fresh writer after the next run took its own, and that run would wait,
// superseded, for a repair nobody sends. So a run is started only once
// the previous one has reported its end, and a rewind only while no run
// is active.
//
// It is a pure step type: no goroutines, no clock, no I/O. The reduce
// worker actor feeds it the coordinator's messages and its runs' reports,
// and carries out the returned RunStep. A rewind is bounded work the
// shell does inline, so it never stays active past its step.
type PositionRuns struct {
	task        *messages.ReduceTask // the newest generation
	coordinator any                  // who hears ReduceTaskStarted/Done; nil for nobody
	nextRun     uint64
	active      uint64               // the running run's id, 0 if none
	activeTask  *messages.ReduceTask // the generation the active run reduces
	pending     pendingKind          // what starts once the active run ended
	over        bool                 // released: nothing more happens
}

// pendingKind is the one thing queued behind an active run. One is
// enough: a newer run supersedes a queued rewind (a run rewinds its
// output itself before it reduces), and an invalidation cancels a queued
// run of the generation it invalidates.
type pendingKind int

const (
	pendingNone pendingKind = iota
	pendingRun
	pendingRewind
)

// RunStep is what the shell does after a step, in this order: cancel a
// run, rewind the output, start a run, send the reports, release the
// output, stop the worker.
type RunStep struct {
	outbox.Box
	// Cancel is the id of a run to stop (0: none). Its goroutine still
	// reports its end; nothing new starts until then.
	Cancel uint64
	// Rewind asks to clear the output now (never while a run is active).
	Rewind bool
	// Run, if not nil, is a run to start.
	Run *RunOrder
	// Release ends the position: drop the output unless KeepOutput.
	Release    bool
	KeepOutput bool
}

// RunOrder starts one run of a generation. ID names the run in its
// reports.
type RunOrder struct {
	ID   uint64
	Task *messages.ReduceTask
}

// RunEnd is how a run ended, as its goroutine saw it. Report false means
// it ended without a word to the coordinator: it could not start (its
// RunStarted said why), the coordinator had committed an earlier
// generation's target, or an input's node failed and the coordinator,
// which watches that node, sends a repaired generation. A tree root's
// run that reports success has written the target whole but not
// completed it: its coordinator's commit does (messages.ReduceCommit).
type RunEnd struct {
	Report bool
	Err    *messages.Error
	// Fingerprint is a gather's, of the target copy it assembled.
	Fingerprint uint64
	// MeasuredBytes in MeasuredNanos: a transfer of the run that
	// measured the link, for the coordinator's cost model (0: none).
	MeasuredBytes, MeasuredNanos int64
}

// NewPositionRuns returns the runs of a position whose first task is
// task; reports go to coordinator.
func NewPositionRuns(task *messages.ReduceTask, coordinator any) *PositionRuns {
	return &PositionRuns{task: task, coordinator: coordinator}
}

// NumberFrom numbers the runs after first: a restarted worker's runs must
// not collide with its earlier incarnation's, whose last run may still
// report to the same PID.
func (p *PositionRuns) NumberFrom(first uint64) { p.nextRun = first }

// Task is the newest generation the position knows.
func (p *PositionRuns) Task() *messages.ReduceTask { return p.task }

// Active is the id of the run in progress, 0 if none.
func (p *PositionRuns) Active() uint64 { return p.active }

// onStart runs the first task (the worker started).
func (p *PositionRuns) onStart() RunStep {
	var s RunStep
	p.runOrQueue(&s)
	return s
}

// onNewTask takes a newer generation of the position's task: the current
// run stops and the new one starts once it has ended. Older or equal
// generations are duplicates and change nothing.
func (p *PositionRuns) onNewTask(t *messages.ReduceTask) RunStep {
	var s RunStep
	if p.over || t.GetGeneration() <= p.task.GetGeneration() {
		return s
	}
	p.task = t
	p.runOrQueue(&s)
	return s
}

func (p *PositionRuns) runOrQueue(s *RunStep) {
	if p.active != 0 {
		s.Cancel = p.active
		p.pending = pendingRun
		return
	}
	p.startRun(s)
}

func (p *PositionRuns) startRun(s *RunStep) {
	p.nextRun++
	p.active, p.activeTask, p.pending = p.nextRun, p.task, pendingNone
	s.Run = &RunOrder{ID: p.active, Task: p.task}
}

// onInvalidate clears the output of generation gen or later: an input
// below was lost. The current run stops, a run queued behind it is
// dropped (it would reduce the same invalid inputs), and the output is
// rewound as soon as no run is active, so readers stop using bytes that
// contain a lost object. An older generation's invalidation is stale.
func (p *PositionRuns) onInvalidate(gen int32) RunStep {
	var s RunStep
	if p.over || gen < p.task.GetGeneration() {
		return s
	}
	if p.active != 0 {
		s.Cancel = p.active
		p.pending = pendingRewind
		return s
	}
	p.pending = pendingNone
	s.Rewind = true
	return s
}

// onRunStarted is a run's report that its output exists (err nil) or could
// not be made. dead says this node's store has failed: a dead node says
// nothing (fail-stop), or its stopped runs would report before the
// coordinator's watch fires and fail a Reduce the repair would finish.
func (p *PositionRuns) onRunStarted(run uint64, err *messages.Error, dead bool) RunStep {
	var s RunStep
	if p.over || run != p.active || dead {
		return s
	}
	t := p.activeTask
	if t.GetQuiet() && err == nil {
		return s
	}
	s.Send(p.coordinator, &messages.ReduceTaskStarted{ReduceId: t.GetReduceId(), Position: t.GetPosition(), Generation: t.GetGeneration(), Error: err})
	return s
}

// onRunEnded is a run's last report. The coordinator hears it unless the
// run ended silently or the node is dead; then whatever was queued
// behind the run starts.
func (p *PositionRuns) onRunEnded(run uint64, end RunEnd, dead bool) RunStep {
	var s RunStep
	if run == 0 || run != p.active {
		return s
	}
	t := p.activeTask
	p.active, p.activeTask = 0, nil
	if p.over {
		return s // released: nobody listens, nothing follows
	}
	if end.Report && !dead && (!t.GetQuiet() || end.Err != nil) {
		s.Send(p.coordinator, &messages.ReduceTaskDone{ReduceId: t.GetReduceId(), Position: t.GetPosition(), Generation: t.GetGeneration(),
			Error: end.Err, Fingerprint: end.Fingerprint, MeasuredBytes: end.MeasuredBytes, MeasuredNs: end.MeasuredNanos})
	}
	switch p.pending {
	case pendingRun:
		p.startRun(&s)
	case pendingRewind:
		p.pending = pendingNone
		s.Rewind = true
	}
	return s
}

// onRelease ends the position at the coordinator's word: the run stops and
// the output is dropped, except a target the Reduce keeps (its result:
// the root's output, or a gather's copy of it).
func (p *PositionRuns) onRelease(keep bool) RunStep {
	var s RunStep
	if p.over {
		return s
	}
	p.over = true
	s.Cancel, p.pending = p.active, pendingNone
	// A gather's output is a copy of the target too (a sliced AllReduce).
	s.Release, s.KeepOutput = true, keep && (p.task.GetRoot() || p.task.GetGather())
	return s
}

// onCoordinatorGone ends the position when its coordinator stopped.
// Terminated overtakes the ReduceRelease the coordinator sent just before
// it stopped (system messages go first), so a complete target is kept:
// it is the result. So is a root's target written whole that awaits its
// commit, which may be on its way too (the node applies it). After a
// failure the shard's release of the target drops it anyway.
func (p *PositionRuns) onCoordinatorGone(targetComplete bool) RunStep {
	return p.onRelease(targetComplete)
}

// onStop cancels the active run: the worker is stopping or restarting.
func (p *PositionRuns) onStop() RunStep {
	return RunStep{Cancel: p.active}
}
