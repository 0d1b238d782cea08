package processtest

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"syscall"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/messages"
)

// patternReader yields size bytes drawn from seed, 8 at a time, without
// holding them: a test compares hundreds of MiB without keeping them.
type patternReader struct {
	seed      uint64
	off, size int64
}

// Read is not instrumented by the race detector (go:norace): it writes
// only the caller's buffer, on the caller's goroutine, and with a check
// per 8-byte word it took 4 s for each 300 MiB a large-object test draws.
//
//go:norace
func (r *patternReader) Read(p []byte) (int, error) {
	if r.off >= r.size {
		return 0, io.EOF
	}
	n := int(min(int64(len(p)), r.size-r.off))
	for i := 0; i < n; {
		at := r.off + int64(i)
		x := patternWord(r.seed, uint64(at)/8)
		if at%8 == 0 && n-i >= 8 {
			binary.LittleEndian.PutUint64(p[i:i+8], x)
			i += 8
			continue
		}
		var w [8]byte
		binary.LittleEndian.PutUint64(w[:], x)
		i += copy(p[i:n], w[at%8:])
	}
	r.off += int64(n)
	return n, nil
}

// patternWord is the pattern's 8 bytes at word block.
//
//go:norace
func patternWord(seed, block uint64) uint64 {
	x := (block ^ seed) * 0x9E3779B97F4A7C15
	x ^= x >> 29
	return x * 0xBF58476D1CE4E5B9
}

// patternChecker is an io.Writer that checks what it is given against
// a patternReader of the same seed.
type patternChecker struct {
	want patternReader
	buf  []byte
	bad  int64 // the first byte that differed, or -1
}

func newPatternChecker(seed uint64, size int64) *patternChecker {
	return &patternChecker{want: patternReader{seed: seed, size: size}, bad: -1}
}

func (c *patternChecker) Write(p []byte) (int, error) {
	if int64(len(p)) > c.want.size-c.want.off {
		return 0, fmt.Errorf("%d bytes past the %d expected", int64(len(p))-(c.want.size-c.want.off), c.want.size)
	}
	if cap(c.buf) < len(p) {
		c.buf = make([]byte, len(p))
	}
	at := c.want.off
	want := c.buf[:len(p)]
	_, _ = io.ReadFull(&c.want, want)
	if c.bad < 0 && !bytes.Equal(p, want) {
		for i := range p {
			if p[i] != want[i] {
				c.bad = at + int64(i)
				break
			}
		}
	}
	return len(p), nil
}

// check fails t unless the writer got exactly the pattern.
func (c *patternChecker) check(t *testing.T, what string) {
	t.Helper()
	if c.bad >= 0 || c.want.off != c.want.size {
		t.Fatalf("%s: %d of %d bytes, first wrong byte at %d (-1: none)", what, c.want.off, c.want.size, c.bad)
	}
}

// TestDialDataPlane: a Dial client's Puts and Gets move their bytes on
// the members' data plane, with no cap but the members' capacity. A
// 300 MiB object (past the 256 MiB a remote message carries; 48 MiB
// under -race, as largeSizes says) is Put
// from a reader of unknown length, read back byte-exact into a writer
// through another member (which fetches it from the first) and whole
// into a slice and a caller's buffer. A reader of known size is read as
// the member fetches it; one that ends before the size it announced
// fails INVALID_ARGUMENT and creates nothing.
func TestDialDataPlane(t *testing.T) {
	t.Parallel()
	bin := hopliteBinary(t)
	slots, seeds := memberSlots(t, 2)
	var nodes []*nodeProc
	for i := range 2 {
		nodes = append(nodes, startNode(t, bin, slots[i], seeds, "-capacity", "768MiB"))
	}
	for _, n := range nodes {
		n.waitStarted(t, 60*time.Second)
	}
	tc := newTestClient(t)
	tc.converge(t, nodes...)

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	c0, err := cluster.Dial(ctx, nodes[0].address)
	if err != nil {
		t.Fatal(err)
	}
	defer c0.Close()
	c1, err := cluster.Dial(ctx, nodes[1].address)
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()

	size, seed := largeSizes()[0], uint64(77)
	if err := c0.PutFrom(ctx, "big", &patternReader{seed: seed, size: size}, -1); err != nil {
		t.Fatalf("put %d MiB from a reader of unknown length: %v", size>>20, err)
	}
	w := newPatternChecker(seed, size)
	n, err := c1.GetTo(ctx, "big", w)
	if err != nil || n != size {
		t.Fatalf("get into a writer through the other member: %d bytes, %v", n, err)
	}
	w.check(t, "GetTo through the other member")

	got, err := c0.Get(ctx, "big")
	if err != nil {
		t.Fatalf("get %d MiB into a slice: %v", size>>20, err)
	}
	w = newPatternChecker(seed, size)
	_, _ = w.Write(got)
	w.check(t, "Get")
	clear(got)
	if k, err := c1.GetInto(ctx, "big", got); err != nil || int64(k) != size {
		t.Fatalf("get into the caller's buffer: %d, %v", k, err)
	}
	w = newPatternChecker(seed, size)
	_, _ = w.Write(got)
	w.check(t, "GetInto")
	if _, err := c1.GetInto(ctx, "big", got[:size-1]); !errors.Is(err, messages.ErrInvalidArgument) {
		t.Fatalf("get into a buffer a byte short: %v, want INVALID_ARGUMENT", err)
	}
	got = nil

	// A Put of a slice takes the data plane too; so does a Put of the
	// same id and bytes again (idempotent) and with other bytes (CONFLICT).
	mid := randomBytes(5, 24<<20+3)
	if err := c1.Put(ctx, "mid", mid); err != nil {
		t.Fatal(err)
	}
	if err := c0.Put(ctx, "mid", mid); err != nil {
		t.Fatalf("the same Put again through another member: %v", err)
	}
	other := bytes.Clone(mid)
	other[len(other)/2] ^= 1
	if err := c1.Put(ctx, "mid", other); !errors.Is(err, messages.ErrConflict) {
		t.Fatalf("another Put of mid with other bytes: %v, want CONFLICT", err)
	}
	if b, err := c0.Get(ctx, "mid"); err != nil || !bytes.Equal(b, mid) {
		t.Fatalf("get mid: %d bytes, %v", len(b), err)
	}

	// A reader of known size, read once as the member fetches it.
	const known = 40<<20 + 5
	if err := c1.PutFrom(ctx, "known", &patternReader{seed: 9, size: known}, known); err != nil {
		t.Fatalf("put from a reader of known size: %v", err)
	}
	w = newPatternChecker(9, known)
	if n, err := c0.GetTo(ctx, "known", w); err != nil || n != known {
		t.Fatalf("get of the known-size put: %d bytes, %v", n, err)
	}
	w.check(t, "GetTo of the known-size put")

	short := &patternReader{seed: 3, size: 5 << 20}
	if err := c0.PutFrom(ctx, "short", short, 6<<20); !errors.Is(err, messages.ErrInvalidArgument) {
		t.Fatalf("put from a reader shorter than its size: %v, want INVALID_ARGUMENT", err)
	}
	if _, err := c0.Info(ctx, "short", false); !errors.Is(err, messages.ErrNotFound) {
		t.Fatalf("info of the short put: %v, want NOT_FOUND", err)
	}
}

// gatedWriter takes its first Write, then holds the next until open is
// closed: a reader that a test stops mid-object.
type gatedWriter struct {
	w       io.Writer
	writes  int
	started chan struct{}
	open    chan struct{}
}

func (g *gatedWriter) Write(p []byte) (int, error) {
	g.writes++
	if g.writes == 2 {
		close(g.started)
		<-g.open
	}
	return g.w.Write(p)
}

// TestDialGetToFailsOverMidStream: a Dial client's GetTo whose member is
// SIGKILLed mid-object moves to another member, which holds a copy, and
// resumes at the bytes the writer has: the writer gets the object once,
// exact.
func TestDialGetToFailsOverMidStream(t *testing.T) {
	t.Parallel()
	bin := hopliteBinary(t)
	slots, seeds := memberSlots(t, 3)
	nodes, tc, _ := startConverged(t, bin, slots, seeds)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c, err := cluster.Dial(ctx, nodes[0].address+","+nodes[1].address+","+nodes[2].address)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	const size, seed = 96 << 20, 5
	if err := c.PutFrom(ctx, "mid-stream", &patternReader{seed: seed, size: size}, size); err != nil {
		t.Fatal(err)
	}
	// Every member holds a copy: the client's next member has one.
	for _, n := range nodes[1:] {
		res, err := tc.system.Root.RequestFuture(n.store(), &messages.Get{ObjectId: "mid-stream", Prefetch: true, TimeoutMs: 60_000}, time.Minute).Result()
		if r, ok := res.(*messages.GetReply); err != nil || !ok || r.GetError() != nil {
			t.Fatalf("prefetch on %s: %v, %v", n.id, res, err)
		}
	}
	check := newPatternChecker(seed, size)
	w := &gatedWriter{w: check, started: make(chan struct{}), open: make(chan struct{})}
	type result struct {
		n   int64
		err error
	}
	done := make(chan result, 1)
	go func() {
		n, err := c.GetTo(ctx, "mid-stream", w)
		done <- result{n, err}
	}()
	select {
	case <-w.started:
	case r := <-done:
		t.Fatalf("GetTo ended before its second chunk: %d bytes, %v", r.n, r.err)
	}
	if err := nodes[0].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-nodes[0].exited
	close(w.open)
	r := <-done
	if r.err != nil || r.n != size {
		t.Fatalf("GetTo across the kill: %d bytes, %v", r.n, r.err)
	}
	check.check(t, "GetTo across the kill")
	if got := c.Endpoints()[0]; got == nodes[0].address {
		t.Fatalf("the client still names the killed member %s first", got)
	}
}
