package directory

import "time"

// MaxTimeout bounds how long one request waits. A request's timeout_ms is
// an int64 from the caller: as milliseconds times time.Millisecond it
// overflows past about 292 years and turns into a deadline in the past,
// and a deadline centuries away overflows UnixNano. Longer waits are
// taken as MaxTimeout.
const MaxTimeout = 365 * 24 * time.Hour

// Timeout is the wait that a request's timeout_ms asks for: def if ms is
// zero or negative, at most MaxTimeout. Every place that turns a
// timeout_ms into a duration goes through it.
func Timeout(ms int64, def time.Duration) time.Duration {
	if ms <= 0 {
		return def
	}
	if ms >= MaxTimeout.Milliseconds() {
		return MaxTimeout
	}
	return time.Duration(ms) * time.Millisecond
}
