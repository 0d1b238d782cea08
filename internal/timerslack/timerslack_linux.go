package timerslack

import (
	"fmt"
	"os"
	"runtime"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// reexecEnv marks a process that Ensure executed again: it never does so
// twice, whatever the slack turned out to be.
const reexecEnv = "HOPLITE_TIMER_SLACK_SET"

// Current is the calling thread's timer slack.
func Current() (time.Duration, error) {
	ns, err := unix.PrctlRetInt(unix.PR_GET_TIMERSLACK, 0, 0, 0, 0)
	if err != nil {
		return 0, fmt.Errorf("timer slack: %w", err)
	}
	return time.Duration(ns), nil
}

// Ensure makes every thread of this process run with timer slack d: if
// the process does not have it yet, Ensure sets it on the calling thread
// and executes this program again with the same arguments and
// environment (and the process id), so it does not return then. d <= 0
// leaves the slack alone. It returns nil when the slack is d, and an
// error when it cannot read, set or execute, or when the process it
// executed again still has another slack (it never executes twice).
func Ensure(d time.Duration) error {
	if d <= 0 {
		return nil
	}
	cur, err := Current()
	switch {
	case err != nil:
		return err
	case cur == d:
		return nil
	case os.Getenv(reexecEnv) != "":
		return fmt.Errorf("timer slack is %v after executing again for %v", cur, d)
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("timer slack: %w", err)
	}
	// The slack is the thread's: set and execute on the same one.
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := unix.Prctl(unix.PR_SET_TIMERSLACK, uintptr(d.Nanoseconds()), 0, 0, 0); err != nil {
		return fmt.Errorf("timer slack %v: %w", d, err)
	}
	env := append(os.Environ(), reexecEnv+"=1")
	err = syscall.Exec(exe, os.Args, env)
	return fmt.Errorf("timer slack: executing %s again: %w", exe, err)
}
