package main

import (
	"os"

	"golang.org/x/sys/unix"
)

// getPipeSize is the pipe buffer `hoplite get` asks for when its output
// is a pipe: the kernel's default of 64 KiB makes the writer and the
// reader take turns 16 times per MiB, each a wakeup and a context
// switch, which on a busy machine cost more than the copies.
const getPipeSize = 1 << 20

// growPipe asks the kernel for a larger buffer if f is a pipe. Best
// effort: a pipe keeps its size if the call fails (the per-user limit,
// /proc/sys/fs/pipe-max-size, is below it).
func growPipe(f *os.File) {
	st, err := f.Stat()
	if err != nil || st.Mode()&os.ModeNamedPipe == 0 {
		return
	}
	_, _ = unix.FcntlInt(f.Fd(), unix.F_SETPIPE_SZ, getPipeSize)
}

// pipeSize is the buffer size of the pipe f, or 0 if it is none.
func pipeSize(f *os.File) int {
	n, err := unix.FcntlInt(f.Fd(), unix.F_GETPIPE_SZ, 0)
	if err != nil {
		return 0
	}
	return n
}
