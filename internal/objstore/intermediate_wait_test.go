package objstore

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/messages"
)

// A reader of a Reduce intermediate that this node's worker has not
// created yet waits for it; when its wait ends first, the error says
// why (its deadline: TIMEOUT; otherwise UNAVAILABLE, as from a node that
// failed), never NOT_FOUND, which failed the whole Reduce with NOT_FOUND
// though every id its caller named existed.
func TestOpenIntermediateNotCreatedIsNotNotFound(t *testing.T) {
	s := NewStore(1 << 20)
	id := directory.InternalPrefix + "reduce/t#c.n/1/1"

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	_, err := s.OpenObject(ctx, id)
	if !errors.Is(err, messages.ErrTimeout) {
		t.Fatalf("reader's deadline passed: %v, want TIMEOUT", err)
	}

	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	_, err = s.OpenObject(ctx2, id)
	if !errors.Is(err, messages.ErrUnavailable) {
		t.Fatalf("reader stopped waiting: %v, want UNAVAILABLE", err)
	}

	// An application id that is not here is NOT_FOUND at once.
	if _, err := s.OpenObject(context.Background(), "app-id"); !errors.Is(err, messages.ErrNotFound) {
		t.Fatalf("absent application object: %v, want NOT_FOUND", err)
	}
}
