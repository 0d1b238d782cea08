package messages

import (
	"context"
	"errors"
	"fmt"
)

// Sentinel errors, one per ErrorCode, for errors.Is: a returned *Error
// matches the sentinel with the same code, whatever its message.
var (
	ErrInvalidArgument = &Error{Code: ErrorCode_INVALID_ARGUMENT}
	ErrNotFound        = &Error{Code: ErrorCode_NOT_FOUND}
	ErrTimeout         = &Error{Code: ErrorCode_TIMEOUT}
	ErrConflict        = &Error{Code: ErrorCode_CONFLICT}
	ErrDeleted         = &Error{Code: ErrorCode_DELETED}
	ErrCapacity        = &Error{Code: ErrorCode_CAPACITY}
	ErrUnavailable     = &Error{Code: ErrorCode_UNAVAILABLE}
	ErrInternal        = &Error{Code: ErrorCode_INTERNAL}
	ErrCanceled        = &Error{Code: ErrorCode_CANCELED}
	ErrReset           = &Error{Code: ErrorCode_RESET}
	ErrLost            = &Error{Code: ErrorCode_LOST}
	// ErrResourceExhausted: a bound on what one peer or one node may hold
	// at once was reached; the message names the bound.
	ErrResourceExhausted = &Error{Code: ErrorCode_RESOURCE_EXHAUSTED}
)

// Errorf builds an *Error with a formatted message.
func Errorf(code ErrorCode, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// Err is e as a plain error: nil when e is nil or its code is OK (as
// ErrOrNil). A reply's GetError() is a *Error, which is not nil once
// stored in an error variable even when the reply succeeded; its Err()
// is, and so is the reply's own Err() (reply.Err()).
func (e *Error) Err() error {
	if e == nil || e.GetCode() == ErrorCode_OK {
		return nil
	}
	return e
}

// Error implements the error interface.
func (e *Error) Error() string {
	if e == nil {
		return "<nil>"
	}
	if e.GetMessage() == "" {
		return "hoplite: " + e.GetCode().String()
	}
	return "hoplite: " + e.GetCode().String() + ": " + e.GetMessage()
}

// Is makes errors.Is(err, ErrTimeout) true for every TIMEOUT error.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && e != nil && t != nil && t.GetCode() == e.GetCode()
}

// AsError turns err into an *Error for a reply: nil stays nil, an *Error
// is kept, context errors become TIMEOUT or CANCELED, anything else
// becomes INTERNAL.
func AsError(err error) *Error {
	if err == nil {
		return nil
	}
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded):
		return Errorf(ErrorCode_TIMEOUT, "%v", err)
	case errors.Is(err, context.Canceled):
		return Errorf(ErrorCode_CANCELED, "%v", err)
	}
	return Errorf(ErrorCode_INTERNAL, "%v", err)
}

// ErrOrNil converts a reply's error field into a Go error, keeping a nil
// field a nil interface (a typed nil would compare non-nil).
func ErrOrNil(e *Error) error {
	if e == nil || e.GetCode() == ErrorCode_OK {
		return nil
	}
	return e
}
