package transport

import (
	"io"
	"syscall"

	"golang.org/x/sys/unix"
)

// canReadPast: readv(2) reads a payload and what follows it at once.
const canReadPast = true

// readPast reads from the socket into p and, in the same readv(2), up to
// len(past) bytes behind p's end into past: n is what went into p, m
// what went into past. It waits, within the connection's read deadline,
// until the socket has bytes (its SO_RCVLOWAT's worth); the socket at its
// end is io.EOF.
func readPast(raw syscall.RawConn, p, past []byte) (n, m int, err error) {
	iov := [2][]byte{p, past}
	var got int
	var rerr error
	err = raw.Read(func(fd uintptr) bool {
		for {
			got, rerr = unix.Readv(int(fd), iov[:])
			if rerr != unix.EINTR {
				return rerr != unix.EAGAIN
			}
		}
	})
	if err != nil {
		return 0, 0, err // the deadline, or a closed connection
	}
	if rerr != nil {
		return 0, 0, rerr
	}
	if got == 0 {
		return 0, 0, io.EOF
	}
	n = min(got, len(p))
	return n, got - n, nil
}

// setRcvLowat sets the socket's SO_RCVLOWAT.
func setRcvLowat(raw syscall.RawConn, n int) error {
	var serr error
	if err := raw.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVLOWAT, n)
	}); err != nil {
		return err
	}
	return serr
}
