package transport

import (
	"io"
	"net"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// canReadPast: readv(2) reads a payload and what follows it at once.
const canReadPast = true

// canRawIO: the data plane's socket calls on a plain TCP connection are
// made as raw system calls (rawReadv, rawWritev, setRcvLowat).
//
// Why: the Go runtime's system call entry wakes its sysmon thread if the
// process was idle (sysmon sleeps while no goroutine runs), and a member
// receiving a stream goes idle and wakes again for every SO_RCVLOWAT's
// worth of bytes: in a profile of 32 MiB broadcasts on the testbed, the
// members' sysmon threads and the wake-ups of them took about a tenth of
// their CPU. The sockets are non-blocking (the netpoller waits for them),
// so these calls never block and need none of the runtime's hand-off of
// the processor that the entry prepares for.
const canRawIO = true

// maxIov bounds the iovecs of one raw readv or writev: a frame is a
// header and a payload, a payload read the payload and a header's room.
const maxIov = 4

// rawReadv is readv(2) of iov on fd as a raw system call; empty slices
// are skipped.
func rawReadv(fd uintptr, iov [][]byte) (int, syscall.Errno) { return rawv(unix.SYS_READV, fd, iov) }

// rawWritev is writev(2) of iov on fd as a raw system call; empty slices
// are skipped.
func rawWritev(fd uintptr, iov [][]byte) (int, syscall.Errno) { return rawv(unix.SYS_WRITEV, fd, iov) }

// rawv is readv(2) or writev(2) (trap) of up to maxIov non-empty slices
// of iov.
func rawv(trap, fd uintptr, iov [][]byte) (int, syscall.Errno) {
	var v [maxIov]unix.Iovec
	n := 0
	for _, b := range iov {
		if len(b) == 0 {
			continue
		}
		if n == maxIov {
			break
		}
		v[n].Base = &b[0]
		v[n].SetLen(len(b))
		n++
	}
	if n == 0 {
		return 0, 0
	}
	r, _, e := syscall.RawSyscall(trap, fd, uintptr(unsafe.Pointer(&v[0])), uintptr(n))
	return int(r), e
}

// readPast reads from the socket into p and, in the same readv(2), up to
// len(past) bytes behind p's end into past: n is what went into p, m
// what went into past. It waits, within the connection's read deadline,
// until the socket has bytes (its SO_RCVLOWAT's worth); the socket at its
// end is io.EOF.
func readPast(raw syscall.RawConn, p, past []byte) (n, m int, err error) {
	iov := [2][]byte{p, past}
	got, err := rawRead(raw, iov[:])
	if err != nil {
		return 0, 0, err
	}
	n = min(got, len(p))
	return n, got - n, nil
}

// rawRead reads into iov (readv(2), raw), waiting within the
// connection's read deadline until the socket has bytes; the socket at
// its end is io.EOF.
func rawRead(raw syscall.RawConn, iov [][]byte) (int, error) {
	return rawReadOr(raw, iov, nil)
}

// rawReadOr is rawRead that calls beforeWait with the socket once, the
// first time it finds no bytes, before it waits.
func rawReadOr(raw syscall.RawConn, iov [][]byte, beforeWait func(fd uintptr)) (int, error) {
	var got int
	var rerr syscall.Errno
	err := raw.Read(func(fd uintptr) bool {
		for {
			got, rerr = rawReadv(fd, iov)
			if rerr == unix.EAGAIN && beforeWait != nil {
				beforeWait(fd)
				beforeWait = nil
			}
			if rerr != unix.EINTR {
				return rerr != unix.EAGAIN
			}
		}
	})
	if err != nil {
		return 0, err // the deadline, or a closed connection
	}
	if rerr != 0 {
		return 0, rerr
	}
	if got == 0 {
		return 0, io.EOF
	}
	return got, nil
}

// queued is how many bytes the socket holds unread (SIOCINQ), -1 if it
// cannot tell.
func queued(raw syscall.RawConn) int {
	n := -1
	_ = raw.Control(func(fd uintptr) {
		if v, err := unix.IoctlGetInt(int(fd), unix.SIOCINQ); err == nil {
			n = v
		}
	})
	return n
}

// rawWrite writes bufs (writev(2), raw), consuming what it wrote, until
// none is left or the connection's write deadline passes; n is how many
// bytes it wrote.
func rawWrite(raw syscall.RawConn, bufs *net.Buffers) (n int64, err error) {
	var werr syscall.Errno
	err = raw.Write(func(fd uintptr) bool {
		for len(*bufs) > 0 {
			m, e := rawWritev(fd, *bufs)
			switch e {
			case 0:
				n += int64(m)
				consume(bufs, m)
			case unix.EINTR:
			case unix.EAGAIN:
				return false // wait until the socket takes more
			default:
				werr = e
				return true
			}
		}
		return true
	})
	if err == nil && werr != 0 {
		err = werr
	}
	return n, err
}

// consume drops the first n bytes of bufs.
func consume(bufs *net.Buffers, n int) {
	for len(*bufs) > 0 {
		b := (*bufs)[0]
		if n < len(b) {
			(*bufs)[0] = b[n:]
			return
		}
		n -= len(b)
		(*bufs)[0] = nil
		*bufs = (*bufs)[1:]
	}
}

// setRcvLowat sets the socket's SO_RCVLOWAT (a raw setsockopt(2)).
func setRcvLowat(raw syscall.RawConn, n int) error {
	var serr syscall.Errno
	if err := raw.Control(func(fd uintptr) { serr = setRcvLowatFD(fd, n) }); err != nil {
		return err
	}
	if serr != 0 {
		return serr
	}
	return nil
}

// setRcvLowatFD is setRcvLowat on the socket fd.
func setRcvLowatFD(fd uintptr, n int) syscall.Errno {
	v := int32(n)
	_, _, serr := syscall.RawSyscall6(unix.SYS_SETSOCKOPT, fd, unix.SOL_SOCKET, unix.SO_RCVLOWAT,
		uintptr(unsafe.Pointer(&v)), unsafe.Sizeof(v), 0)
	return serr
}
