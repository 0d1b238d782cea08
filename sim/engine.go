package sim

import (
	"container/heap"
	"time"
)

// epoch is virtual time zero as the cores see it (they take now as a
// time.Time). Any fixed instant works; this one is far from the zero
// time so that deadlines computed backwards stay positive.
var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// event is one scheduled step. seq breaks ties between events at the
// same instant in the order they were scheduled, which is what makes a
// run deterministic: no map order, no goroutine, no clock decides.
type event struct {
	at  time.Duration
	seq uint64
	fn  func()
}

type eventHeap []event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if h[i].at != h[j].at {
		return h[i].at < h[j].at
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = event{}
	*h = old[:len(old)-1]
	return e
}

// engine is the discrete-event loop in virtual time.
type engine struct {
	now   time.Duration
	seq   uint64
	q     eventHeap
	steps int64
	// maxQueue is the largest the queue grew (reported: the simulator's
	// memory is bounded by it and the hosts' state).
	maxQueue int
	// done, if set, ends the run when it closes (the caller's context):
	// the queue is dropped, so every later run returns at once.
	done <-chan struct{}
}

// checkEvery is how many events the loop steps between two looks at
// done. An event is microseconds of wall time; a core's step that is
// far longer (a sliced AllReduce's start at 1,024 hosts with its tasks
// listed, --list-ring-tasks: two million of them) is not cut short.
const checkEvery = 1024

// at schedules fn at virtual time t (never in the past).
func (e *engine) at(t time.Duration, fn func()) {
	if t < e.now {
		t = e.now
	}
	e.seq++
	heap.Push(&e.q, event{at: t, seq: e.seq, fn: fn})
	if len(e.q) > e.maxQueue {
		e.maxQueue = len(e.q)
	}
}

// after schedules fn d from now.
func (e *engine) after(d time.Duration, fn func()) { e.at(e.now+d, fn) }

// wall is the virtual instant t as the cores see it.
func wall(t time.Duration) time.Time { return epoch.Add(t) }

// virt is the virtual time of a core's instant.
func virt(t time.Time) time.Duration { return t.Sub(epoch) }

// run steps events until the queue is empty, stop reports true, or the
// virtual time passes horizon. It reports whether events were left.
func (e *engine) run(horizon time.Duration, stop func() bool) bool {
	for len(e.q) > 0 {
		if e.done != nil && e.steps%checkEvery == 0 {
			select {
			case <-e.done:
				e.q = nil
				return false
			default:
			}
		}
		if stop != nil && stop() {
			return true
		}
		ev := heap.Pop(&e.q).(event)
		if ev.at > horizon {
			heap.Push(&e.q, ev)
			return true
		}
		e.now = ev.at
		e.steps++
		ev.fn()
	}
	return false
}
