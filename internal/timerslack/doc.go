// Package timerslack sets a process's timer slack, the time the kernel
// may add to its threads' timed sleeps to wake several together.
//
// Why a member sets it: after any system call in a process that was
// idle, the Go runtime's sysmon thread sleeps 20 µs at a time for the
// next few milliseconds (runtime.sysmon), and the kernel's default slack
// of 50 µs makes that a wake-up every 80 µs. Each is a context switch on
// a CPU the process's real work wants. Eight members on two vCPUs woke
// sysmon more often than anything else they did (perf sched: 2757 of
// 7740 context switches in a 1 KiB broadcast benchmark), and with a
// 1 ms slack the same broadcast took 0.61 and 0.77 ms against 0.86 and
// 0.94 ms at 50 µs, in alternating runs. A coarser slack only delays
// timed sleeps; a socket, futex or timerfd that becomes ready wakes its
// waiter as before.
//
// A thread's slack is copied to the threads it creates, and a process's
// to what it executes; the runtime starts sysmon before any of a
// program's code runs. So Ensure sets the slack on the calling thread
// and executes the program again.
package timerslack
