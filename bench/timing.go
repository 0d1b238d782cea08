package bench

import (
	"strings"
	"time"
)

// How a result's repetitions were timed (Result.Timing).
const (
	// TimingScheduled: every participant starts at one instant scheduled
	// on the clock the testbed's hosts share, and a repetition runs from
	// the first participant's actual start to the last one's end. Ours,
	// its floors and the echo peer are timed so, and the MPI and Gloo
	// peers are (their RESULT lines say timing=scheduled).
	TimingScheduled = "scheduled"
	// TimingBarrier: each rank times the call from its own exit of a
	// barrier, and a repetition is the slowest rank's time. A rank that
	// leaves the barrier late is not charged for it, and may find an
	// eager message already there: the MPI and Gloo peers' results from
	// before they were timed like ours (their RESULT lines have no
	// timing=).
	TimingBarrier = "barrier"
	// TimingClient: a client times the operation from its submission to
	// its result (the Dask peer).
	TimingClient = "client"
)

// TimingMatters is the median under which two timing methods do not
// compare: the methods differ by how they count the participants' start
// skew (0.45 ms between eight members on two vCPUs, several ms on a busy
// machine), which is 1 % or more of a figure below it and of the order
// of a 1 KiB operation itself. A comparison below it is made only like
// with like.
const TimingMatters = 100 * time.Millisecond

// timingOf is how system's repetitions were timed, given what its
// measurement said (timing: a peer's timing= field, "" if it had none).
// A result read from a report written before Result.Timing existed has
// none either: its system's name says how it was timed then.
func timingOf(system, timing string) string {
	if timing != "" {
		return timing
	}
	switch {
	case strings.HasPrefix(system, "mpi-"), strings.HasPrefix(system, "gloo-"):
		return TimingBarrier
	case system == SysDask:
		return TimingClient
	}
	return TimingScheduled
}

// TimingMethod is how r's repetitions were timed (TimingScheduled,
// TimingBarrier or TimingClient).
func (r Result) TimingMethod() string { return timingOf(r.System, r.Timing) }

// timingWords says how a method times an operation, for a note
// ("mpi-best timed from barrier exits").
func timingWords(method string) string {
	switch method {
	case TimingBarrier:
		return "from barrier exits"
	case TimingClient:
		return "by its client"
	case TimingScheduled:
		return "from a scheduled start"
	}
	return method
}

// CompareTiming says whether peer was timed as ours was. differs is ""
// when alike, else a note naming how peer was timed; refuse says that
// the two must not be compared at all: their methods differ and ours's
// median is under TimingMatters, where the difference between the
// methods is of the order of the figures.
func CompareTiming(ours, peer Result) (differs string, refuse bool) {
	if ours.TimingMethod() == peer.TimingMethod() {
		return "", false
	}
	differs = peer.System + " timed " + timingWords(peer.TimingMethod())
	return differs, ours.Median > 0 && ours.Median < TimingMatters.Seconds()
}
