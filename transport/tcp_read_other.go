//go:build !linux

package transport

import (
	"errors"
	"syscall"
)

// canReadPast: there is no readv(2) here to read past a payload's end;
// connReader reads payloads through the connection, exactly.
const canReadPast = false

var errUnsupported = errors.New("not supported on this platform")

func readPast(syscall.RawConn, []byte, []byte) (int, int, error) { return 0, 0, errUnsupported }

func setRcvLowat(syscall.RawConn, int) error { return errUnsupported }
