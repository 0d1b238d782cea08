package clock

import (
	"time"

	"golang.org/x/sys/unix"
)

// SleepUntil blocks the calling goroutine's thread until at by the
// realtime clock, to within the kernel's timer slack (50 µs by default).
//
// A Go timer on a process with nothing else to run fires up to a
// millisecond late: the runtime waits for it in epoll_wait, whose timeout
// is whole milliseconds (runtime/netpoll_epoll.go rounds any wait under
// 1 ms up to 1 ms). Use this for short waits whose lateness matters;
// it holds an OS thread while it sleeps.
func SleepUntil(at time.Time) {
	ts := unix.NsecToTimespec(at.UnixNano())
	for time.Now().Before(at) {
		// EINTR (a signal, e.g. the Go runtime's preemption) only cuts
		// the sleep short: the loop sleeps the rest.
		if err := unix.ClockNanosleep(unix.CLOCK_REALTIME, unix.TIMER_ABSTIME, &ts, nil); err != nil && err != unix.EINTR {
			time.Sleep(time.Until(at)) // not for a valid time; never spin
			return
		}
	}
}
