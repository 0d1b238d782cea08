//go:build !linux

package transport

import (
	"errors"
	"net"
	"syscall"
)

// canReadPast: there is no readv(2) here to read past a payload's end;
// connReader reads payloads through the connection, exactly.
const canReadPast = false

// canRawIO: socket calls go through the connection.
const canRawIO = false

var errUnsupported = errors.New("not supported on this platform")

func readPast(syscall.RawConn, []byte, []byte) (int, int, error) { return 0, 0, errUnsupported }

func rawRead(syscall.RawConn, [][]byte) (int, error) { return 0, errUnsupported }

func rawReadOr(syscall.RawConn, [][]byte, func(uintptr)) (int, error) { return 0, errUnsupported }

func setRcvLowatFD(uintptr, int) syscall.Errno { return 0 }

func queued(syscall.RawConn) int { return -1 }

func rawWrite(syscall.RawConn, *net.Buffers) (int64, error) { return 0, errUnsupported }

func setRcvLowat(syscall.RawConn, int) error { return errUnsupported }
