package storeactor

import (
	"bytes"
	"context"
	"errors"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/transport"
	"github.com/hoplite-go/hoplite/messages"
)

// arrivingStream is a Stream whose one chunk arrives over several stall
// timeouts: each of the first calls sees part of it come (by bytes, if
// arriving) and ends with its context, as a TCP stream's NextInto does
// mid-chunk; the next call completes it.
type arrivingStream struct {
	chunk    []byte
	calls    int // calls that end with their context before the chunk is whole
	arriving bool
	payload  int64
}

var _ transport.PayloadCounter = (*arrivingStream)(nil)

func (s *arrivingStream) Size() int64                              { return int64(len(s.chunk)) }
func (s *arrivingStream) Next(ctx context.Context) ([]byte, error) { panic("unused") }
func (s *arrivingStream) Close()                                   {}
func (s *arrivingStream) PayloadReceived() int64                   { return s.payload }

func (s *arrivingStream) NextInto(ctx context.Context, dst []byte) (int, error) {
	if s.calls > 0 {
		s.calls--
		if s.arriving {
			s.payload += int64(len(s.chunk) / 8)
		}
		<-ctx.Done()
		return 0, messages.AsError(ctx.Err())
	}
	s.payload = int64(len(s.chunk))
	return copy(dst, s.chunk), nil
}

// A chunk whose bytes keep coming is waited for past the stall timeout
// (a slow link's chunk may take longer); one of which nothing came for
// the stall timeout fails TIMEOUT, at the first byte as at any other.
func TestNextChunkWaitsForAChunkThatIsArriving(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	cfg := &Config{StallTimeout: 20 * time.Millisecond}
	chunk := bytes.Repeat([]byte{7}, 64)

	s := &arrivingStream{chunk: chunk, calls: 4, arriving: true}
	dst := make([]byte, len(chunk))
	n, err := nextChunk(ctx, cfg, s, dst)
	if err != nil || n != len(chunk) || !bytes.Equal(dst, chunk) {
		t.Fatalf("a chunk arriving over 4 stall timeouts: %d bytes, %v; want it whole", n, err)
	}

	s = &arrivingStream{chunk: chunk, calls: 1}
	if n, err := nextChunk(ctx, cfg, s, dst); !errors.Is(err, messages.ErrTimeout) || n != 0 {
		t.Fatalf("a chunk of which nothing came for a stall timeout: %d bytes, %v; want TIMEOUT", n, err)
	}
	if s.calls != 0 {
		t.Fatalf("%d calls left: nextChunk gave up before the stall", s.calls)
	}

	// A chunk that stops arriving fails at its next stall timeout.
	stopping := &stopsArriving{arrivingStream: &arrivingStream{chunk: chunk, calls: 2}, arriveFor: 1}
	if _, err := nextChunk(ctx, cfg, stopping, dst); !errors.Is(err, messages.ErrTimeout) {
		t.Fatalf("a chunk that stopped arriving: %v; want TIMEOUT", err)
	}
}

// stopsArriving is an arrivingStream whose bytes stop after arriveFor
// calls.
type stopsArriving struct {
	*arrivingStream
	arriveFor int
}

func (s *stopsArriving) NextInto(ctx context.Context, dst []byte) (int, error) {
	s.arriving = s.arriveFor > 0
	s.arriveFor--
	return s.arrivingStream.NextInto(ctx, dst)
}
