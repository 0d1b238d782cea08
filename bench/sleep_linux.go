package bench

import (
	"time"

	"golang.org/x/sys/unix"
)

// preciseSleep blocks the calling thread until at by the realtime clock
// (the clock the hosts' timings share), to within the kernel's timer
// slack (50 µs by default) instead of the Go timer's millisecond.
func preciseSleep(at time.Time) {
	ts := unix.NsecToTimespec(at.UnixNano())
	for time.Now().Before(at) {
		// EINTR (a signal, e.g. the Go runtime's preemption) only cuts
		// the sleep short: the loop sleeps the rest.
		if err := unix.ClockNanosleep(unix.CLOCK_REALTIME, unix.TIMER_ABSTIME, &ts, nil); err != nil && err != unix.EINTR {
			time.Sleep(time.Until(at)) // cannot happen with a valid time; never spin
			return
		}
	}
}
