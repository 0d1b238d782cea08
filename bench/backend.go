package bench

import (
	"context"
	"syscall"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/clock"
	"github.com/hoplite-go/hoplite/messages"
)

// backend is a running cluster the scenarios are measured on: the
// embedded cluster, or `hoplite node` processes on the testbed.
type backend interface {
	// Prepare makes d's bytes ready on host (not timed).
	Prepare(ctx context.Context, host int, d DataSpec) error
	// Put Puts a prepared object on host at at (zero: now) and returns
	// when the Put was issued: the object's arrival.
	Put(ctx context.Context, host int, id string, at time.Time) (time.Time, error)
	// Fetch Gets id into host's store (prefetch: no bytes come back) at
	// at (zero: now), timed on host.
	Fetch(ctx context.Context, host int, id string, at time.Time) (timing, error)
	// Reduce is a SUM over float32 called on host at at (zero: now),
	// timed on host.
	Reduce(ctx context.Context, host int, target string, sources []string, num int, all bool, at time.Time) (*messages.ReduceReply, timing, error)
	// Verify checks host's copy of id against srcs (see Check).
	Verify(ctx context.Context, host int, id string, srcs []DataSpec) error
	// Delete frees the objects everywhere (errors are ignored: a Delete
	// is cleanup).
	Delete(ctx context.Context, ids []string)
	// RoundTrips has host from make one bare Proto.Actor request and
	// response to each host of to (dataPlane: one bare control request
	// on the data plane to each one's member), all at once, at at, timed
	// on from (testbed only).
	RoundTrips(ctx context.Context, from int, to []int, at time.Time, dataPlane bool) (timing, error)
	// CPU is the CPU time the hosts' processes have used so far, all
	// together (user and system, by their own accounting).
	CPU(ctx context.Context) (time.Duration, error)
	// Kill fails host (fail-stop).
	Kill(host int) error
	// TargetID is an id with prefix whose directory shard, and so a
	// Reduce's coordinator, is on host 0.
	TargetID(ctx context.Context, prefix string) (string, error)
	// Close stops the cluster.
	Close()
}

// timing is when an operation started and ended on the host that ran it.
// Every host of a backend reads the same clock (one machine: the embedded
// cluster, or the testbed's namespaces), so timings of different hosts
// compare: a collective is timed from its first start to its last end,
// as MPI and Gloo time theirs after a barrier, without the driver's round
// trips to the hosts.
type timing struct{ start, done time.Time }

// timed runs f at at (zero: now) and times it.
func timed(ctx context.Context, at time.Time, f func() error) (timing, error) {
	if err := sleepUntil(ctx, at); err != nil {
		return timing{}, err
	}
	s := timing{start: time.Now()}
	err := f()
	s.done = time.Now()
	return s, err
}

// processCPU is this process's CPU time so far: user and system, every
// thread.
func processCPU() (time.Duration, error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, err
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()), nil
}

// prefetch Gets id into the store node at pid without its bytes.
func prefetch(ctx context.Context, root *actor.RootContext, pid *actor.PID, id string) error {
	res, err := actorutil.Request(ctx, root, pid, &messages.Get{ObjectId: id, Prefetch: true, TimeoutMs: actorutil.TimeoutMs(ctx)})
	if err != nil {
		return err
	}
	r, ok := res.(*messages.GetReply)
	if !ok {
		return messages.Errorf(messages.ErrorCode_INTERNAL, "unexpected reply %T to Get", res)
	}
	return messages.ErrOrNil(r.GetError())
}

// sleepUntil returns at at (zero: at once), or with ctx's error.
//
// A Go timer alone starts a scheduled operation up to a millisecond late
// (see clock.SleepUntil), as long as a whole 1 KiB operation. Blocking a
// thread in clock_nanosleep for the last stretch, as this did before,
// starts on time but puts the Go runtime's sysmon of every sleeping
// member into polling every 80 µs for the next few milliseconds, on the
// CPUs the operation runs on. clock.SleepUntil does neither. (Eight
// members still start apart on 2 vCPUs: the kernel runs the woken
// members one after another.)
func sleepUntil(ctx context.Context, at time.Time) error {
	if at.IsZero() {
		return nil
	}
	return clock.SleepUntil(ctx, at)
}
