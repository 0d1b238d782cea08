package clock

import (
	"context"
	"os"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// SleepUntil returns at at by the realtime clock, or earlier with ctx's
// error.
//
// A Go timer on a process with nothing else to run fires up to a
// millisecond late: the runtime waits for it in epoll_wait, whose timeout
// is whole milliseconds (runtime/netpoll_epoll.go rounds any wait under
// 1 ms up to 1 ms). SleepUntil waits on a timerfd in Go's netpoller
// instead: the timer is the kernel's high-resolution one, without timer
// slack, and its expiry wakes epoll_wait at once. The goroutine parks as
// on any read, so no thread sits in a blocking system call: one would
// make the runtime's sysmon retake its P and then poll every 20 µs (80 µs
// with the kernel's timer slack) for the next few milliseconds, in every
// process that sleeps this way, on the CPUs the operation after the
// sleep needs.
func SleepUntil(ctx context.Context, at time.Time) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !time.Now().Before(at) {
		return nil
	}
	t, err := takeTimer()
	if err == nil {
		err = t.arm(at)
		if err != nil {
			t.f.Close()
		}
	}
	if err != nil {
		return Wait(ctx, at) // no timerfd: the Go timer's precision
	}
	stop := context.AfterFunc(ctx, func() { _ = t.f.SetReadDeadline(time.Unix(1, 0)) })
	// Without TFD_TIMER_CANCEL_ON_SET a clock step never fails the read.
	err = t.wait()
	if stop() && err == nil {
		t.giveBack() // expired, so disarmed, and no deadline set
	} else {
		t.f.Close()
	}
	if err == nil {
		return nil
	}
	if cerr := ctx.Err(); cerr != nil {
		return cerr
	}
	return Wait(ctx, at)
}

// timer is a non-blocking timerfd as a file in Go's netpoller.
type timer struct {
	f  *os.File
	fd int
}

// idleTimers keeps a few disarmed timers for the next sleeps: closing one
// is an epoll_ctl and a close on the thread that has just woken, at the
// moment its caller wanted to start work.
var idleTimers = make(chan timer, 8)

func takeTimer() (timer, error) {
	select {
	case t := <-idleTimers:
		return t, nil
	default:
	}
	fd, err := unix.TimerfdCreate(unix.CLOCK_REALTIME, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		return timer{}, err
	}
	return timer{f: os.NewFile(uintptr(fd), "timerfd"), fd: fd}, nil
}

// wait reads t's expirations once it has expired, within its file's
// read deadline. The read is a raw system call: the runtime's entry to
// a system call wakes the process's sysmon thread if the process was
// idle, as it is after a sleep, and sysmon then polls every 20 µs for a
// millisecond or more, on the CPUs the operation after the sleep needs.
func (t timer) wait() error {
	rc, err := t.f.SyscallConn()
	if err != nil {
		return err
	}
	var rerr unix.Errno
	err = rc.Read(func(fd uintptr) bool {
		var expirations [8]byte
		for {
			_, _, rerr = unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&expirations[0])), uintptr(len(expirations)))
			if rerr != unix.EINTR {
				return rerr != unix.EAGAIN
			}
		}
	})
	if err != nil {
		return err // the deadline: ctx ended
	}
	if rerr != 0 {
		return rerr
	}
	return nil
}

// arm sets t to expire once, at at.
func (t timer) arm(at time.Time) error {
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(at.UnixNano())}
	return unix.TimerfdSettime(t.fd, unix.TFD_TIMER_ABSTIME, &spec, nil)
}

// giveBack keeps t for a later sleep, or closes it when enough are kept.
func (t timer) giveBack() {
	select {
	case idleTimers <- t:
	default:
		t.f.Close()
	}
}
