// Package timerslack sets a process's timer slack, the time the kernel
// may add to its threads' timed sleeps to wake several together.
//
// Why a member sets it: after any system call in a process that was
// idle, the Go runtime's sysmon thread sleeps 20 µs at a time for the
// next few milliseconds (runtime.sysmon), and the kernel's default slack
// of 50 µs makes that a wake-up every 80 µs. Each is a context switch on
// a CPU the process's real work wants. Eight members on two vCPUs woke
// sysmon more often than anything else they did (perf: 2757 of 7740
// context switches of a 1 KiB broadcast benchmark's members). A 1 KiB
// broadcast to 7, medians of 21, members at 1 ms against members at the
// kernel's 50 µs in the same run (hoplite bench --peers kernel-slack):
// 0.76 against 0.79 ms with 2.7 against 4.8 ms of CPU, and 0.76 against
// 0.94 ms with 4.0 against 4.2 ms; a 32 MiB broadcast and AllReduce took
// the same time with 7–30 % less CPU. A coarser slack only delays timed
// sleeps; a socket, futex or timerfd that becomes ready still wakes its
// waiter at once.
//
// A thread's slack is copied to the threads it creates, and a process's
// to what it executes; the runtime starts sysmon before any of a
// program's code runs. So Ensure sets the slack on the calling thread
// and executes the program again.
package timerslack
