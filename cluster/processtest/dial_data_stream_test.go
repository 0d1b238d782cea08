package processtest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/messages"
)

// failingReader yields the pattern of seed until at bytes, then fails.
type failingReader struct {
	patternReader
	at int64
}

var errPipeBroke = errors.New("the pipe broke")

func (r *failingReader) Read(p []byte) (int, error) {
	if r.off >= r.at {
		return 0, errPipeBroke
	}
	return r.patternReader.Read(p[:min(int64(len(p)), r.at-r.off)])
}

// TestDialPutStreamLeavesNothingOnFailure: a Dial client's PutFrom of
// unknown length whose reader fails mid-way (past its first segments)
// fails INVALID_ARGUMENT naming the reader's error, and one that grows
// past the member's capacity fails CAPACITY naming it; neither leaves
// an object behind, and the same id can then be Put whole.
func TestDialPutStreamLeavesNothingOnFailure(t *testing.T) {
	t.Parallel()
	bin := hopliteBinary(t)
	slots, seeds := memberSlots(t, 1)
	node := startNode(t, bin, slots[0], seeds, "-capacity", "64MiB")
	node.waitStarted(t, 60*time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := cluster.Dial(ctx, node.address)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()

	broken := &failingReader{patternReader: patternReader{seed: 1, size: 1 << 30}, at: 20<<20 + 7}
	if err := c.PutFrom(ctx, "s", broken, -1); !errors.Is(err, messages.ErrInvalidArgument) || !strings.Contains(err.Error(), errPipeBroke.Error()) {
		t.Fatalf("a stream whose reader fails at 20 MiB: %v, want INVALID_ARGUMENT naming the reader's error", err)
	}
	if _, err := c.Info(ctx, "s", false); !errors.Is(err, messages.ErrNotFound) {
		t.Fatalf("info after the failed stream: %v, want NOT_FOUND", err)
	}
	if err := c.PutFrom(ctx, "s", &patternReader{seed: 2, size: 65 << 20}, -1); !errors.Is(err, messages.ErrCapacity) || !strings.Contains(err.Error(), "capacity") {
		t.Fatalf("a stream past the capacity: %v, want CAPACITY naming it", err)
	}
	if _, err := c.Info(ctx, "s", false); !errors.Is(err, messages.ErrNotFound) {
		t.Fatalf("info after the stream past capacity: %v, want NOT_FOUND", err)
	}
	const size = 30<<20 + 3
	if err := c.PutFrom(ctx, "s", &patternReader{seed: 3, size: size}, -1); err != nil {
		t.Fatalf("the same id from a reader that ends: %v", err)
	}
	w := newPatternChecker(3, size)
	if n, err := c.GetTo(ctx, "s", w); err != nil || n != size {
		t.Fatalf("get: %d bytes, %v", n, err)
	}
	w.check(t, "GetTo of the stream")
}
