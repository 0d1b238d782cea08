package storeactor

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/internal/transport"
	"github.com/hoplite-go/hoplite/messages"
)

// timeline is when a position's first run reached each step, from its
// task's arrival at the store node to the first byte of its inputs: a
// position that starts late holds up every position that reads it (a
// sliced AllReduce's chains most). Its worker logs it once, at debug
// level, as "reduce position timeline": the times are unix nanoseconds,
// comparable between members of one host (a coordinator logs when it
// sent the tasks, see internal/actors/coordactor).
type timeline struct {
	received time.Time    // the store node took the task (or the batch) from its mailbox
	started  time.Time    // the worker actor started
	run      atomic.Int64 // the run's goroutine began
	created  atomic.Int64 // the output existed (the target: registered with the shard)
	opened   atomic.Int64 // every input's stream was open (the last of them)
	first    atomic.Int64 // the first byte of any input arrived (a leaf: of its own source)
	alloc    atomic.Int64 // how long the store took to create the output (ns)
	logged   atomic.Bool
}

// The steps a timeline marks.
const (
	stepRun = iota
	stepCreated
	stepOpened
	stepFirst
)

// step is the time of one step; nil for a worker without a timeline
// (its log is not at debug level: then nothing is timed or wrapped).
func (tl *timeline) step(s int) *atomic.Int64 {
	if tl == nil {
		return nil
	}
	switch s {
	case stepRun:
		return &tl.run
	case stepCreated:
		return &tl.created
	case stepOpened:
		return &tl.opened
	}
	return &tl.first
}

// mark sets step s to now unless it is set.
func (tl *timeline) mark(s int) {
	if at := tl.step(s); at != nil {
		at.CompareAndSwap(0, time.Now().UnixNano())
	}
}

// markAlloc records how long the store took to create the output.
func (tl *timeline) markAlloc(d time.Duration) {
	if tl != nil {
		tl.alloc.CompareAndSwap(0, int64(d))
	}
}

// markLast sets step s to now if that is later (the last of several
// events).
func (tl *timeline) markLast(s int) {
	at := tl.step(s)
	if at == nil {
		return
	}
	now := time.Now().UnixNano()
	for {
		old := at.Load()
		if old >= now || at.CompareAndSwap(old, now) {
			return
		}
	}
}

// log writes the timeline once, at debug level, when the first run ends
// (done_ns: a chain's root and a gather end with their slice, which says
// which slice held the AllReduce up).
func (tl *timeline) log(log *logrus.Entry, t *messages.ReduceTask) {
	if tl == nil || !log.Logger.IsLevelEnabled(logrus.DebugLevel) || tl.logged.Swap(true) {
		return
	}
	ns := func(at int64) time.Duration {
		if at == 0 {
			return -1
		}
		return time.Duration(at - tl.received.UnixNano())
	}
	log.WithFields(logrus.Fields{"reduce": t.GetReduceId(), "position": t.GetPosition(), "generation": t.GetGeneration(),
		"gather": t.GetGather(), "received_ns": tl.received.UnixNano(), "spawn_ns": int64(tl.started.Sub(tl.received)),
		"run_ns": int64(ns(tl.run.Load())), "created_ns": int64(ns(tl.created.Load())), "opened_ns": int64(ns(tl.opened.Load())),
		"first_ns": int64(ns(tl.first.Load())), "alloc_ns": tl.alloc.Load(), "done_ns": int64(ns(time.Now().UnixNano()))}).Debug("reduce position timeline")
}

// firstByte wraps an input stream to mark the first byte it yields.
func (tl *timeline) firstByte(in transport.Stream) transport.Stream {
	if tl == nil {
		return in
	}
	return &firstStream{Stream: in, at: &tl.first}
}

type firstStream struct {
	transport.Stream
	at *atomic.Int64
}

func (s *firstStream) Next(ctx context.Context) ([]byte, error) {
	b, err := s.Stream.Next(ctx)
	if len(b) > 0 && s.at.Load() == 0 {
		s.at.CompareAndSwap(0, time.Now().UnixNano())
	}
	return b, err
}

func (s *firstStream) NextInto(ctx context.Context, dst []byte) (int, error) {
	n, err := s.Stream.NextInto(ctx, dst)
	if n > 0 && s.at.Load() == 0 {
		s.at.CompareAndSwap(0, time.Now().UnixNano())
	}
	return n, err
}
