package transport

import (
	"context"
	"errors"

	"github.com/hoplite-go/hoplite/messages"
)

// Control requests are the few small request/response exchanges whose
// latency decides a small object's cost (such as a Locate and its reply,
// which carries an inline object's bytes). They ride on the data plane's
// connections instead of the actor control plane, which costs a small
// Get more (docs/benchmarks.md). The transport carries opaque bytes;
// what they mean is the Controller's business.

// Caller is a Transport that can also carry control requests.
type Caller interface {
	// Call sends req of the given kind to the node served at addr and
	// returns its answer. ctx must have a deadline: it bounds the wait,
	// and the peer's handler gets the same deadline. An error the peer's
	// handler returned comes back typed; a peer that is gone is
	// UNAVAILABLE.
	Call(ctx context.Context, addr string, kind byte, req []byte) ([]byte, error)
}

// Controller is a Source that answers control requests. Control is
// called on the connection's goroutine; ctx ends at the caller's
// deadline, when the caller hangs up, or when the node stops serving.
type Controller interface {
	Control(ctx context.Context, kind byte, req []byte) ([]byte, error)
}

// QuickController is a Controller that may answer some requests at once,
// without blocking: TCP tries it first and, when it answers, skips what
// a request that may wait costs the server (a context with its timer,
// the watch for the caller hanging up). ok false: Control answers.
// A bare round trip (a ping) and a Locate of an inline object its shard
// publishes are such requests. The reply may be built by appending
// to scratch[:0], the connection's own buffer, which is written out
// before the connection's next request reuses it; a reply that is not
// built there must be one the handler does not keep.
type QuickController interface {
	Controller
	TryControl(kind byte, req, scratch []byte) (reply []byte, ok bool, err error)
}

// Limits of a control exchange: a request is a small message; a reply
// may carry an inline object, whose limit a cluster configures.
const (
	MaxControlRequest = 64 << 10
	MaxControlReply   = 64 << 20
)

// checkCall is what every Caller checks before it sends: a deadline, a
// request within MaxControlRequest, a ctx that has not ended.
func checkCall(ctx context.Context, addr string, req []byte) error {
	if _, ok := ctx.Deadline(); !ok {
		return messages.Errorf(messages.ErrorCode_INTERNAL, "control call to %s without a deadline", addr)
	}
	if len(req) > MaxControlRequest {
		return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "control request of %d bytes exceeds %d", len(req), MaxControlRequest)
	}
	return ctxErr(ctx)
}

// answered wraps an error that the peer's Controller returned.
type answered struct{ err error }

func (a answered) Error() string { return a.err.Error() }
func (a answered) Unwrap() error { return a.err }

// Answered says whether err from Call is the peer's answer (it is alive
// and said no), not a failure to reach it: only the latter says anything
// about the peer's health.
func Answered(err error) bool {
	var a answered
	return errors.As(err, &a)
}
