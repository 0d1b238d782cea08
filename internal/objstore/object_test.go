package objstore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/testutil"
	"github.com/hoplite-go/hoplite/messages"
)

// hangGuard bounds how long a test waits for something that must happen;
// it is a safety net against hangs, never a timing assertion.
const hangGuard = 10 * time.Second

type readResult struct {
	b   []byte
	err error
}

func notYet[T any](t *testing.T, ch <-chan T, what string) {
	t.Helper()
	select {
	case v := <-ch:
		t.Fatalf("%s returned early: %v", what, v)
	default:
	}
}

func asyncReadAt(ctx context.Context, o *Object, off int64, max int) <-chan readResult {
	ch := make(chan readResult, 1)
	go func() {
		b, err := o.ReadAt(ctx, off, max)
		ch <- readResult{b, err}
	}()
	return ch
}

func asyncWait(ctx context.Context, o *Object) <-chan error {
	ch := make(chan error, 1)
	go func() { ch <- o.WaitComplete(ctx) }()
	return ch
}

func guardCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), hangGuard)
	t.Cleanup(cancel)
	return ctx
}

func TestObjectReadAtWaitsForBytes(t *testing.T) {
	s := NewStore(1000)
	data := testutil.Pattern(11, 20)
	o, _, err := reserveAlloc(t, s, "o", 20)
	if err != nil {
		t.Fatal(err)
	}
	ctx := guardCtx(t)
	ch := asyncReadAt(ctx, o, 5, 100)
	notYet(t, ch, "ReadAt with nothing written")
	// Bytes up to the offset are not enough.
	if err := o.Append(data[:5]); err != nil {
		t.Fatal(err)
	}
	notYet(t, ch, "ReadAt at 5 with 5 bytes written")
	if err := o.Append(data[5:12]); err != nil {
		t.Fatal(err)
	}
	r := testutil.Recv(t, ch, "ReadAt after Append")
	if r.err != nil {
		t.Fatal(r.err)
	}
	// It may only return what existed: at most data[5:12].
	if len(r.b) == 0 || !bytes.Equal(r.b, data[5:5+len(r.b)]) || len(r.b) > 7 {
		t.Fatalf("ReadAt = %v, want a prefix of %v", r.b, data[5:12])
	}

	// max bounds the result.
	b, err := o.ReadAt(ctx, 2, 3)
	if err != nil || !bytes.Equal(b, data[2:5]) {
		t.Fatalf("ReadAt(2, 3) = %v, %v; want %v", b, err, data[2:5])
	}
	// The shared slice cannot be appended into the buffer.
	if cap(b) != len(b) {
		t.Fatalf("ReadAt returned cap %d > len %d: appends would clobber the buffer", cap(b), len(b))
	}
	b, err = o.ReadAt(ctx, 0, 1000)
	if err != nil || !bytes.Equal(b, data[:12]) {
		t.Fatalf("ReadAt(0, 1000) = %v, %v; want %v", b, err, data[:12])
	}
	// EOF at the size even before the copy completes.
	if _, err := o.ReadAt(ctx, 20, 10); err != io.EOF {
		t.Fatalf("ReadAt(size) = %v, want io.EOF", err)
	}
	if _, err := o.ReadAt(ctx, 25, 10); err != io.EOF {
		t.Fatalf("ReadAt(past size) = %v, want io.EOF", err)
	}
	if err := o.Append(data[12:]); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(o); err != nil {
		t.Fatal(err)
	}
	b, err = o.ReadAt(ctx, 15, 100)
	if err != nil || !bytes.Equal(b, data[15:]) {
		t.Fatalf("ReadAt(15) = %v, %v; want %v", b, err, data[15:])
	}
	if _, err := o.ReadAt(ctx, 20, 10); err != io.EOF {
		t.Fatalf("ReadAt(size) on complete object = %v, want io.EOF", err)
	}
}

func TestObjectReadAtOnPlaceholderWaitsForAllocate(t *testing.T) {
	s := NewStore(1000)
	o, _ := s.Reserve("o")
	ctx := guardCtx(t)
	ch := asyncReadAt(ctx, o, 0, 10)
	notYet(t, ch, "ReadAt on a placeholder")
	if _, err := s.Allocate(o, 4, 0); err != nil {
		t.Fatal(err)
	}
	notYet(t, ch, "ReadAt on an empty allocated object")
	if err := o.Append([]byte{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	r := testutil.Recv(t, ch, "ReadAt")
	if r.err != nil || !bytes.Equal(r.b, []byte{1, 2, 3, 4}) {
		t.Fatalf("ReadAt = %v, %v", r.b, r.err)
	}
}

func TestObjectWaitCompleteAfterFinish(t *testing.T) {
	s := NewStore(1000)
	data := testutil.Pattern(12, 30)
	o, _, err := s.Create("o", 30, 0)
	if err != nil {
		t.Fatal(err)
	}
	ch := asyncWait(guardCtx(t), o)
	notYet(t, ch, "WaitComplete on an empty object")
	if _, err := o.Bytes(); err == nil {
		t.Fatal("Bytes() of an incomplete object succeeded")
	}
	if err := o.Append(data); err != nil {
		t.Fatal(err)
	}
	// All bytes written is not complete yet.
	notYet(t, ch, "WaitComplete before Finish")
	if _, done, _ := o.Progress(); done {
		t.Fatal("done before Finish")
	}
	if err := s.Complete(o); err != nil {
		t.Fatal(err)
	}
	if err := testutil.Recv(t, ch, "WaitComplete"); err != nil {
		t.Fatal(err)
	}
	if w, done, err := o.Progress(); w != 30 || !done || err != nil {
		t.Fatalf("Progress = %d, %v, %v", w, done, err)
	}
	b, err := o.Bytes()
	if err != nil || !bytes.Equal(b, data) {
		t.Fatalf("Bytes() = %v, %v", b, err)
	}
	if err := o.WaitComplete(t.Context()); err != nil {
		t.Fatalf("WaitComplete on a complete object: %v", err)
	}
}

func TestObjectRemoveWakesWaiters(t *testing.T) {
	s := NewStore(1000)
	o, _, err := reserveAlloc(t, s, "o", 10)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Append([]byte{1, 2}); err != nil {
		t.Fatal(err)
	}
	ctx := guardCtx(t)
	rd := asyncReadAt(ctx, o, 2, 10)
	wc := asyncWait(ctx, o)
	// A placeholder's waiters too.
	p, _ := s.Reserve("p")
	pw := asyncWait(ctx, p)
	notYet(t, rd, "ReadAt")
	notYet(t, wc, "WaitComplete")

	s.Remove("o", messages.ErrDeleted)
	s.Remove("p", messages.ErrDeleted)
	if r := testutil.Recv(t, rd, "ReadAt after Remove"); !errors.Is(r.err, messages.ErrDeleted) {
		t.Fatalf("ReadAt = %v, %v; want DELETED", r.b, r.err)
	}
	testutil.WantErr(t, testutil.Recv(t, wc, "WaitComplete after Remove"), messages.ErrDeleted)
	testutil.WantErr(t, testutil.Recv(t, pw, "placeholder WaitComplete after Remove"), messages.ErrDeleted)
	// Later calls fail at once, even below the written bytes.
	_, err = o.ReadAt(ctx, 0, 10)
	testutil.WantErr(t, err, messages.ErrDeleted)
	testutil.WantErr(t, o.Append([]byte{3}), messages.ErrDeleted)
	testutil.WantErr(t, o.Finish(), messages.ErrDeleted)

	// Removing a complete object stops its readers as well.
	c := cached(t, s, "c", 8)
	r, err := s.OpenObject(t.Context(), "c")
	if err != nil {
		t.Fatal(err)
	}
	s.Remove("c", messages.ErrDeleted)
	_, err = r.ReadAt(ctx, 0, 8)
	testutil.WantErr(t, err, messages.ErrDeleted)
	_, err = c.Bytes()
	testutil.WantErr(t, err, messages.ErrDeleted)
	r.Close()
	r.Close()
	wantUsed(t, s, 0)
}

func TestObjectAbortWakesWaiters(t *testing.T) {
	s := NewStore(1000)
	o, _, err := reserveAlloc(t, s, "o", 10)
	if err != nil {
		t.Fatal(err)
	}
	ctx := guardCtx(t)
	rd := asyncReadAt(ctx, o, 0, 10)
	wc := asyncWait(ctx, o)
	notYet(t, rd, "ReadAt")
	abortErr := messages.Errorf(messages.ErrorCode_UNAVAILABLE, "sender gone")
	s.Abort(o, abortErr)
	if r := testutil.Recv(t, rd, "ReadAt after Abort"); !errors.Is(r.err, messages.ErrUnavailable) {
		t.Fatalf("ReadAt = %v, %v; want UNAVAILABLE", r.b, r.err)
	}
	testutil.WantErr(t, testutil.Recv(t, wc, "WaitComplete after Abort"), messages.ErrUnavailable)
	if s.Lookup("o") != nil {
		t.Fatal("aborted object still present")
	}
	wantUsed(t, s, 0)
}

func TestObjectWaitRespectsContext(t *testing.T) {
	s := NewStore(1000)
	o, _, err := reserveAlloc(t, s, "o", 10)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Append([]byte{1}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	_, err = o.ReadAt(ctx, 1, 10)
	testutil.WantErr(t, err, messages.ErrTimeout)
	testutil.WantErr(t, o.WaitComplete(ctx), messages.ErrTimeout)

	// A placeholder of unknown size, too.
	p, _ := s.Reserve("p")
	_, err = p.ReadAt(ctx, 0, 10)
	testutil.WantErr(t, err, messages.ErrTimeout)

	cctx, ccancel := context.WithCancel(t.Context())
	ccancel()
	_, err = o.ReadAt(cctx, 1, 10)
	testutil.WantErr(t, err, messages.ErrCanceled)
	testutil.WantErr(t, o.WaitComplete(cctx), messages.ErrCanceled)

	// A ctx that ends does not hurt the object.
	if w, done, err := o.Progress(); w != 1 || done || err != nil {
		t.Fatalf("Progress = %d, %v, %v", w, done, err)
	}
	// Bytes that exist are returned even with an ended ctx.
	b, err := o.ReadAt(ctx, 0, 10)
	if err != nil || !bytes.Equal(b, []byte{1}) {
		t.Fatalf("ReadAt(0) with ended ctx = %v, %v", b, err)
	}
}

func TestObjectSizeZero(t *testing.T) {
	s := NewStore(10)
	o, _, err := reserveAlloc(t, s, "z", 0)
	if err != nil {
		t.Fatal(err)
	}
	if w, done, err := o.Progress(); w != 0 || !done || err != nil {
		t.Fatalf("Progress = %d, %v, %v; want complete", w, done, err)
	}
	if err := o.WaitComplete(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := o.ReadAt(t.Context(), 0, 10); err != io.EOF {
		t.Fatalf("ReadAt = %v, want io.EOF", err)
	}
	if b, err := o.Bytes(); err != nil || len(b) != 0 {
		t.Fatalf("Bytes() = %v, %v", b, err)
	}
	if err := s.Complete(o); err != nil {
		t.Fatalf("Complete of a size-0 object: %v", err)
	}
	if err := o.Append([]byte{1}); err == nil {
		t.Fatal("Append to a size-0 object succeeded")
	}

	c, _, err := s.Create("c", 0, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.WaitComplete(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, done, _ := c.Progress(); !done {
		t.Fatal("created size-0 object not complete")
	}
	wantUsed(t, s, 0)
	r, err := s.OpenObject(t.Context(), "c")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.ReadAt(t.Context(), 0, 1); err != io.EOF {
		t.Fatalf("reader ReadAt = %v, want io.EOF", err)
	}
}

func TestObjectAppendOverflowAndEarlyFinish(t *testing.T) {
	s := NewStore(100)
	o, _, err := reserveAlloc(t, s, "o", 10)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Append(testutil.Pattern(1, 8)); err != nil {
		t.Fatal(err)
	}
	if err := o.Finish(); err == nil {
		t.Fatal("Finish at 8 of 10 bytes succeeded")
	}
	if err := o.Append(testutil.Pattern(1, 3)); err == nil {
		t.Fatal("Append past the size succeeded")
	}
	if w, done, err := o.Progress(); w != 8 || done || err != nil {
		t.Fatalf("Progress after rejected writes = %d, %v, %v", w, done, err)
	}
	if err := o.Append(testutil.Pattern(2, 2)); err != nil {
		t.Fatal(err)
	}
	if err := o.Append(nil); err != nil {
		t.Fatalf("empty Append at the end: %v", err)
	}
	if err := o.Append([]byte{0}); err == nil {
		t.Fatal("Append to a full object succeeded")
	}
	if err := o.Finish(); err != nil {
		t.Fatal(err)
	}
	b, _ := o.Bytes()
	if !bytes.Equal(b, append(testutil.Pattern(1, 8), testutil.Pattern(2, 2)...)) {
		t.Fatalf("Bytes() = %v", b)
	}
}

// TestObjectConcurrentStreaming runs one writer and several readers of the
// same object; run it with -race.
func TestObjectConcurrentStreaming(t *testing.T) {
	const size = 1 << 20
	rng := rand.New(rand.NewPCG(1, 2))
	data := make([]byte, size)
	for i := range data {
		data[i] = byte(rng.Uint32())
	}
	s := NewStore(2 * size)
	o, _, err := s.Create("o", size, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctx := guardCtx(t)

	const readers = 8
	results := make([][]byte, readers)
	errs := make([]error, readers)
	var wg sync.WaitGroup
	started := make(chan struct{})
	for i := range readers {
		r, err := s.OpenObject(t.Context(), "o")
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer r.Close()
			if i == 0 {
				close(started)
			}
			var got []byte
			off := int64(0)
			max := 1000 + i*3001 // different chunk sizes per reader
			for {
				b, err := r.ReadAt(ctx, off, max)
				if err == io.EOF {
					break
				}
				if err != nil {
					errs[i] = err
					return
				}
				if len(b) == 0 || len(b) > max {
					errs[i] = messages.Errorf(messages.ErrorCode_INTERNAL, "chunk of %d bytes (max %d)", len(b), max)
					return
				}
				got = append(got, b...)
				off += int64(len(b))
			}
			results[i] = got
		}()
	}
	<-started
	wrng := rand.New(rand.NewPCG(3, 4))
	for off := 0; off < size; {
		n := min(size-off, 1+wrng.IntN(20000))
		if err := o.Append(data[off : off+n]); err != nil {
			t.Fatal(err)
		}
		off += n
	}
	if err := s.Complete(o); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i := range readers {
		if errs[i] != nil {
			t.Fatalf("reader %d: %v", i, errs[i])
		}
		if !bytes.Equal(results[i], data) {
			t.Fatalf("reader %d got %d bytes, different from the %d written", i, len(results[i]), size)
		}
	}
	// A late reader of the complete object gets the same bytes.
	b, err := o.Bytes()
	if err != nil || !bytes.Equal(b, data) {
		t.Fatalf("Bytes() differ: %v", err)
	}
}

func TestSupersededWriterCannotAppend(t *testing.T) {
	s := NewStore(1 << 10)
	o, _ := s.Reserve("w")
	if _, err := s.Allocate(o, 4, 0); err != nil {
		t.Fatal(err)
	}
	old := o.NewWriter()
	if err := old.Append([]byte{1}); err != nil {
		t.Fatal(err)
	}
	// A resumed fetch takes over: the old writer's late chunk is refused.
	cur := o.NewWriter()
	if err := old.Append([]byte{9}); !errors.Is(err, messages.ErrCanceled) {
		t.Fatalf("superseded writer appended: %v", err)
	}
	if err := cur.Append([]byte{2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(o); err != nil {
		t.Fatal(err)
	}
	if b, _ := o.Bytes(); !bytes.Equal(b, []byte{1, 2, 3, 4}) {
		t.Fatalf("bytes %v", b)
	}
}

func TestReadAtRejectsBadArguments(t *testing.T) {
	s := NewStore(1 << 10)
	o, _, _ := s.Create("r", 4, 0)
	for _, c := range []struct {
		off int64
		max int
	}{{-1, 1}, {0, 0}, {0, -5}} {
		if _, err := o.ReadAt(t.Context(), c.off, c.max); !errors.Is(err, messages.ErrInvalidArgument) {
			t.Fatalf("ReadAt(%d, %d): %v", c.off, c.max, err)
		}
	}
}

func TestRewindResetsReadersAndKeepsHandedOutBytes(t *testing.T) {
	s := NewStore(1 << 10)
	o, _, _ := s.Create("r", 8, 0)
	w := o.NewWriter()
	if err := w.Append([]byte{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	r, err := s.OpenObject(t.Context(), "r")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	old, err := r.ReadAt(t.Context(), 0, 4)
	if err != nil || !bytes.Equal(old, []byte{1, 2, 3, 4}) {
		t.Fatalf("read before rewind: %v %v", old, err)
	}
	if err := w.Rewind(); err != nil {
		t.Fatal(err)
	}
	if err := w.Append([]byte{9, 9, 9, 9}); err != nil {
		t.Fatal(err)
	}
	// The reader's earlier bytes are unchanged, and its next read says
	// they are stale.
	if !bytes.Equal(old, []byte{1, 2, 3, 4}) {
		t.Fatalf("rewind overwrote bytes a reader held: %v", old)
	}
	if _, err := r.ReadAt(t.Context(), 4, 4); !errors.Is(err, messages.ErrReset) {
		t.Fatalf("read after rewind: want RESET, got %v", err)
	}
	fresh, _ := s.OpenObject(t.Context(), "r")
	defer fresh.Close()
	if b, err := fresh.ReadAt(t.Context(), 0, 4); err != nil || !bytes.Equal(b, []byte{9, 9, 9, 9}) {
		t.Fatalf("new reader: %v %v", b, err)
	}
	if o.Epoch() != 1 {
		t.Fatalf("epoch %d", o.Epoch())
	}
	// A complete object (a Reduce's intermediate) can be rewound too.
	if err := w.Append([]byte{5, 6, 7, 8}); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(o); err != nil {
		t.Fatal(err)
	}
	if err := w.Rewind(); err != nil {
		t.Fatal(err)
	}
	if written, done, _ := o.Progress(); written != 0 || done {
		t.Fatalf("after rewinding a complete object: written %d, done %v", written, done)
	}
}

func TestClearFailsEverything(t *testing.T) {
	s := NewStore(1 << 10)
	a, _, _ := s.Create("a", 4, 0)
	p, _ := s.Reserve("p")
	s.Clear(messages.Errorf(messages.ErrorCode_UNAVAILABLE, "node failed"))
	for _, o := range []*Object{a, p} {
		if err := o.WaitComplete(t.Context()); !errors.Is(err, messages.ErrUnavailable) {
			t.Fatalf("%s: %v", o.ID(), err)
		}
	}
	if s.Used() != 0 || len(s.Objects()) != 0 {
		t.Fatalf("clear left %d bytes, %d objects", s.Used(), len(s.Objects()))
	}
}

// An object tells its settle notice once, when it completes or fails, and
// at once if it already has.
func TestOnSettledFiresOnce(t *testing.T) {
	store := NewStore(1 << 10)
	obj, _ := store.Reserve("x")
	calls := 0
	obj.OnSettled(func() { calls++ })
	if _, err := store.Allocate(obj, 4, 0); err != nil {
		t.Fatal(err)
	}
	w := obj.NewWriter()
	if err := w.Append([]byte("ab")); err != nil {
		t.Fatal(err)
	}
	if calls != 0 {
		t.Fatalf("notified %d times before the object settled", calls)
	}
	if err := w.Append([]byte("cd")); err != nil {
		t.Fatal(err)
	}
	if err := store.Complete(obj); err != nil {
		t.Fatal(err)
	}
	store.Remove("x", messages.ErrDeleted)
	if calls != 1 {
		t.Fatalf("notified %d times, want once", calls)
	}
	obj.OnSettled(func() { calls++ })
	if calls != 2 {
		t.Fatal("a notice registered on a settled object did not fire at once")
	}
}

// A held object (a Reduce root's target) gives its readers every byte
// but the last until it is complete: a stream of it, and so a Get, can
// finish only once the coordinator took that result.
func TestHeldObjectWithholdsItsLastByteUntilComplete(t *testing.T) {
	s := NewStore(1 << 20)
	o, _, err := s.Create("target", 8, 0)
	if err != nil {
		t.Fatal(err)
	}
	o.HoldTail()
	w := o.NewWriter()
	if err := w.Append([]byte("abcdefgh")); err != nil {
		t.Fatal(err)
	}
	r, err := s.OpenObject(guardCtx(t), "target")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if b, err := r.ReadAt(guardCtx(t), 0, 16); err != nil || string(b) != "abcdefg" {
		t.Fatalf("read of the held object: %q, %v; want every byte but the last", b, err)
	}
	// With a context already done, a read that had bytes would return
	// them; the last one is not there to read.
	done, cancel := context.WithCancel(context.Background())
	cancel()
	if b, err := r.ReadAt(done, 7, 1); err == nil {
		t.Fatalf("read of the held last byte: %q, want it withheld", b)
	}
	last := asyncReadAt(guardCtx(t), o, 7, 1)
	notYet(t, last, "the read of the held last byte")
	if err := s.Complete(o); err != nil {
		t.Fatal(err)
	}
	select {
	case res := <-last:
		if res.err != nil || string(res.b) != "h" {
			t.Fatalf("the last byte once complete: %q, %v", res.b, res.err)
		}
	case <-time.After(hangGuard):
		t.Fatal("the last byte was never read")
	}
}

// A commit completes a held target only if the generation it names wrote
// it whole: not one still being written, not another generation's or
// another Reduce's, not one rewound since.
func TestCommitTargetCompletesOnlyTheGenerationThatWroteIt(t *testing.T) {
	s := NewStore(1 << 20)
	o, _, err := s.Create("target", 4, 0)
	if err != nil {
		t.Fatal(err)
	}
	o.HoldTail()
	o.SetProducer("r", 2)
	w := o.NewWriter()
	if err := w.Append([]byte("abc")); err != nil {
		t.Fatal(err)
	}
	if s.CommitTarget("target", "r", 2, nil) {
		t.Fatal("committed a target still being written")
	}
	if err := w.Append([]byte("d")); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		reduce string
		gen    int32
	}{{"r", 1}, {"r", 3}, {"other", 2}} {
		if s.CommitTarget("target", c.reduce, c.gen, nil) {
			t.Fatalf("a commit of %s generation %d completed generation 2's target", c.reduce, c.gen)
		}
	}
	if err := w.Rewind(); err != nil {
		t.Fatal(err)
	}
	if s.CommitTarget("target", "r", 2, nil) {
		t.Fatal("committed a rewound target")
	}
	if err := w.Append([]byte("abcd")); err != nil {
		t.Fatal(err)
	}
	if !s.CommitTarget("target", "r", 2, []string{"s1", "s0"}) {
		t.Fatal("the commit of the generation that wrote the target whole did not complete it")
	}
	if b, err := o.Bytes(); err != nil || string(b) != "abcd" {
		t.Fatalf("the committed target: %q, %v", b, err)
	}
	// A rebuilt shard learns which run made the result and what it
	// reduces (an attempt of the same Reduce answers with them).
	pub, ok := o.Publication(&messages.NodeRef{NodeId: "n"})
	if !ok || pub.GetState() != messages.LocationState_COMPLETE || pub.GetReduceId() != "" ||
		pub.GetProducedBy() != "r" || !slices.Equal(pub.GetReducedIds(), []string{"s1", "s0"}) {
		t.Fatalf("republication of the committed target: %v", pub)
	}
}

// A reader's copy of a Reduce's target that streamed from the root before
// the commit, and heard nothing of the commit, names the run it streamed
// from when it is republished whole: a shard rebuilt after the run's
// members died tells that run's call its result is there (directory:
// reduceTarget.readFrom) instead of CONFLICT. A copy that knows the run
// and its sources says those instead, and a plain object names no run.
func TestReadersWholeCopyNamesTheRunItStreamedFrom(t *testing.T) {
	s := NewStore(1000)
	whole := func(id string) *Object {
		o, _ := s.Reserve(id)
		if _, err := s.Allocate(o, 4, 0); err != nil {
			t.Fatal(err)
		}
		return o
	}
	reader := whole("t")
	reader.MarkReading("t#call.a1")
	if err := reader.Append([]byte{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	if err := reader.Finish(); err != nil {
		t.Fatal(err)
	}
	pub, ok := reader.Publication(&messages.NodeRef{NodeId: "n"})
	if !ok || pub.GetState() != messages.LocationState_COMPLETE || pub.GetReduceId() != "t#call.a1" || pub.GetProducedBy() != "" || pub.GetCreator() {
		t.Fatalf("a reader's whole unmarked copy republished as %v, want COMPLETE naming run t#call.a1", pub)
	}
	reader.MarkRun("t#call.a1", []string{"s0"})
	if pub, _ := reader.Publication(&messages.NodeRef{NodeId: "n"}); pub.GetReduceId() != "" || pub.GetProducedBy() != "t#call.a1" {
		t.Fatalf("the copy once marked republished as %v, want produced_by and no reduce_id", pub)
	}
	plain := whole("p")
	if err := plain.Append([]byte{1, 2, 3, 4}); err != nil {
		t.Fatal(err)
	}
	if err := plain.Finish(); err != nil {
		t.Fatal(err)
	}
	if pub, _ := plain.Publication(&messages.NodeRef{NodeId: "n"}); pub.GetReduceId() != "" || pub.GetProducedBy() != "" {
		t.Fatalf("a plain object republished as %v, naming a run", pub)
	}
}
