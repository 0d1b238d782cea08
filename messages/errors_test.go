package messages

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
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

// Every message of the hoplite protobuf package with an error field
// answers Err(): nil while the field is unset or OK, the field itself
// (matching its sentinel) when it holds a failure.
func TestEveryErrorFieldHasErr(t *testing.T) {
	errorName := (&Error{}).ProtoReflect().Descriptor().FullName()
	checked := 0
	protoregistry.GlobalTypes.RangeMessages(func(mt protoreflect.MessageType) bool {
		d := mt.Descriptor()
		if d.ParentFile().Package() != "hoplite" {
			return true
		}
		f := d.Fields().ByName("error")
		if f == nil || f.Message() == nil || f.Message().FullName() != errorName {
			return true
		}
		checked++
		m := mt.New()
		withErr, ok := m.Interface().(interface{ Err() error })
		if !ok {
			t.Errorf("%s has an error field but no Err() method: add it to reply_errors.go", d.FullName())
			return true
		}
		if err := withErr.Err(); err != nil {
			t.Errorf("%s without an error: Err() = %#v, want nil", d.FullName(), err)
		}
		m.Set(f, protoreflect.ValueOfMessage((&Error{Code: ErrorCode_OK}).ProtoReflect()))
		if err := withErr.Err(); err != nil {
			t.Errorf("%s with an OK error: Err() = %#v, want nil", d.FullName(), err)
		}
		m.Set(f, protoreflect.ValueOfMessage(Errorf(ErrorCode_LOST, "gone").ProtoReflect()))
		if err := withErr.Err(); !errors.Is(err, ErrLost) {
			t.Errorf("%s with a LOST error: Err() = %v, want LOST", d.FullName(), err)
		}
		return true
	})
	// The request/reply messages of the API at least: a registry that
	// lists none of them would make this test pass by checking nothing.
	if checked < 20 {
		t.Fatalf("checked %d messages with an error field, want the API's replies (20 or more)", checked)
	}
	var nilReply *GetReply
	if err := nilReply.Err(); err != nil {
		t.Fatalf("a nil reply's Err() = %v, want nil", err)
	}
}
