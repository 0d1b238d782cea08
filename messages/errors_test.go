package messages

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

func TestErrorsMatchByCode(t *testing.T) {
	err := Errorf(ErrorCode_TIMEOUT, "waited %d ms", 5)
	if !errors.Is(err, ErrTimeout) || errors.Is(err, ErrNotFound) {
		t.Fatalf("code matching broken for %v", err)
	}
	wrapped := fmt.Errorf("get: %w", err)
	if !errors.Is(wrapped, ErrTimeout) {
		t.Fatal("wrapped error lost its code")
	}
	if got := err.Error(); got != "hoplite: TIMEOUT: waited 5 ms" {
		t.Fatalf("message %q", got)
	}
	if got := ErrDeleted.Error(); got != "hoplite: DELETED" {
		t.Fatalf("message %q", got)
	}
}

func TestAsErrorAndErrOrNil(t *testing.T) {
	if AsError(nil) != nil {
		t.Fatal("nil became an error")
	}
	if e := AsError(context.DeadlineExceeded); e.GetCode() != ErrorCode_TIMEOUT {
		t.Fatalf("deadline -> %v", e)
	}
	if e := AsError(context.Canceled); e.GetCode() != ErrorCode_CANCELED {
		t.Fatalf("canceled -> %v", e)
	}
	if e := AsError(errors.New("boom")); e.GetCode() != ErrorCode_INTERNAL {
		t.Fatalf("other -> %v", e)
	}
	orig := Errorf(ErrorCode_CONFLICT, "x")
	if AsError(fmt.Errorf("wrap: %w", orig)) != orig {
		t.Fatal("AsError did not unwrap to the original *Error")
	}
	// A nil or OK field must become a nil interface, not a typed nil.
	if err := ErrOrNil(nil); err != nil {
		t.Fatalf("nil field -> %#v", err)
	}
	if err := ErrOrNil(&Error{Code: ErrorCode_OK}); err != nil {
		t.Fatalf("OK field -> %#v", err)
	}
	if err := ErrOrNil(orig); !errors.Is(err, ErrConflict) {
		t.Fatalf("conflict field -> %v", err)
	}
}

// A reply's error as a plain error is nil on success and matches its
// sentinel otherwise.
func TestErrorErr(t *testing.T) {
	ok := &GetReply{}
	if err := ok.GetError().Err(); err != nil {
		t.Fatalf("a successful reply's Err() = %v, want nil", err)
	}
	var asInterface error = ok.GetError()
	if asInterface == nil {
		t.Fatal("a nil *Error stored in an error is expected to be non-nil (the pitfall Err avoids)")
	}
	bad := &GetReply{Error: Errorf(ErrorCode_LOST, "gone")}
	if err := bad.GetError().Err(); !errors.Is(err, ErrLost) {
		t.Fatalf("a failed reply's Err() = %v, want LOST", err)
	}
}
