package reduceio

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/messages"
)

// A slice reader reads exactly its range of the object, in place, and
// refuses a range outside it.
func TestSliceReader(t *testing.T) {
	ctx := context.Background()
	s := objstore.NewStore(1 << 20)
	data := make([]byte, 1000)
	for i := range data {
		data[i] = byte(i * 7)
	}
	o, _, err := s.Create("src", int64(len(data)), 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Append(data); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(o); err != nil {
		t.Fatal(err)
	}
	open := func() *LocalStream {
		r, err := s.OpenObject(ctx, "src")
		if err != nil {
			t.Fatal(err)
		}
		sr, err := NewSliceReader(r, 300, 400)
		if err != nil {
			t.Fatal(err)
		}
		return NewLocalStream(sr, 64)
	}
	ls := open()
	if ls.Size() != 400 {
		t.Fatalf("size %d, want 400", ls.Size())
	}
	var got []byte
	for {
		b, err := ls.Next(ctx)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if len(b) > 64 {
			t.Fatalf("chunk of %d bytes, want at most 64", len(b))
		}
		got = append(got, b...)
	}
	if !bytes.Equal(got, data[300:700]) {
		t.Fatalf("slice read %d bytes that are not bytes [300, 700) of the object", len(got))
	}
	ls.Close()
	// CopyStream lands the same range in place.
	dst := make([]byte, 400)
	ls = open()
	if err := CopyStream(ctx, ls, dst); err != nil || !bytes.Equal(dst, data[300:700]) {
		t.Fatalf("CopyStream: %v, equal %v", err, bytes.Equal(dst, data[300:700]))
	}
	ls.Close()
	// A range that does not fit the object is refused.
	for _, c := range [][2]int64{{900, 101}, {-1, 10}, {0, 1001}} {
		r, err := s.OpenObject(ctx, "src")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := NewSliceReader(r, c[0], c[1]); !errors.Is(err, messages.ErrInvalidArgument) {
			t.Errorf("slice [%d, +%d) of 1000 bytes: %v, want INVALID_ARGUMENT", c[0], c[1], err)
		}
	}
}

// CopyStream refuses a stream whose size is not the range's.
func TestCopyStreamSizeMismatch(t *testing.T) {
	ctx := context.Background()
	s := objstore.NewStore(1 << 20)
	o, _, err := s.Create("x", 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Append(make([]byte, 10)); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(o); err != nil {
		t.Fatal(err)
	}
	r, err := s.OpenObject(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	ls := NewLocalStream(r, 4)
	defer ls.Close()
	if err := CopyStream(ctx, ls, make([]byte, 12)); !errors.Is(err, messages.ErrInvalidArgument) {
		t.Fatalf("a 10-byte stream into 12 bytes: %v, want INVALID_ARGUMENT", err)
	}
}

// CopyStreamLazy asks for its destination only once the stream's first
// bytes are in, then copies every byte into it; an empty stream asks at
// once; a destination of the wrong size or one that fails is an error.
func TestCopyStreamLazy(t *testing.T) {
	ctx := context.Background()
	s := objstore.NewStore(1 << 20)
	o, _, err := s.Create("x", 10, 0)
	if err != nil {
		t.Fatal(err)
	}
	r, err := s.OpenObject(ctx, "x")
	if err != nil {
		t.Fatal(err)
	}
	ls := NewLocalStream(r, 4)
	defer ls.Close()
	asked := make(chan struct{})
	dst := make([]byte, 10)
	done := make(chan error, 1)
	go func() {
		done <- CopyStreamLazy(ctx, ls, 10, func() ([]byte, error) {
			close(asked)
			return dst, nil
		})
	}()
	select {
	case <-asked:
		t.Fatal("the destination was asked for before any byte arrived")
	case <-time.After(50 * time.Millisecond):
	}
	want := []byte("0123456789")
	if err := o.Append(want[:3]); err != nil {
		t.Fatal(err)
	}
	<-asked
	if err := o.Append(want[3:]); err != nil {
		t.Fatal(err)
	}
	if err := s.Complete(o); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil || string(dst) != string(want) {
		t.Fatalf("copied %q, %v; want %q", dst, err, want)
	}

	if _, _, err := s.Create("e", 0, 0); err != nil {
		t.Fatal(err)
	}
	re, err := s.OpenObject(ctx, "e")
	if err != nil {
		t.Fatal(err)
	}
	called := false
	if err := CopyStreamLazy(ctx, NewLocalStream(re, 4), 0, func() ([]byte, error) { called = true; return nil, nil }); err != nil || !called {
		t.Fatalf("an empty stream: %v, destination asked for: %v", err, called)
	}
	r2, _ := s.OpenObject(ctx, "x")
	if err := CopyStreamLazy(ctx, NewLocalStream(r2, 4), 10, func() ([]byte, error) { return make([]byte, 9), nil }); !errors.Is(err, messages.ErrInternal) {
		t.Fatalf("a destination of 9 bytes for 10: %v, want INTERNAL", err)
	}
	r3, _ := s.OpenObject(ctx, "x")
	refused := messages.Errorf(messages.ErrorCode_CANCELED, "no buffer")
	if err := CopyStreamLazy(ctx, NewLocalStream(r3, 4), 10, func() ([]byte, error) { return nil, refused }); !errors.Is(err, messages.ErrCanceled) {
		t.Fatalf("a failed destination: %v, want its CANCELED", err)
	}
}

// unevenStream yields its data in chunks of the sizes given, in turn,
// and counts the reads that copied into the caller's memory.
type unevenStream struct {
	data  []byte
	sizes []int
	off   int
	into  int
	nexts int
	// before, if set, sees the offset of each read before it happens.
	before func(off int)
}

func (s *unevenStream) Size() int64 { return int64(len(s.data)) }
func (s *unevenStream) Close()      {}
func (s *unevenStream) Next(context.Context) ([]byte, error) {
	s.nexts++
	return s.chunk()
}

func (s *unevenStream) NextInto(_ context.Context, dst []byte) (int, error) {
	s.into++
	b, err := s.chunk()
	return copy(dst, b), err
}

func (s *unevenStream) chunk() ([]byte, error) {
	if s.before != nil {
		s.before(s.off)
	}
	if s.off == len(s.data) {
		return nil, io.EOF
	}
	n := min(s.sizes[0], len(s.data)-s.off)
	s.sizes = append(s.sizes[1:], s.sizes[0])
	b := s.data[s.off : s.off+n]
	s.off += n
	return b, nil
}

// A relay puts its input into its output's own buffer chunk by chunk,
// however the chunks fall (a partial copy upstream sends short ones),
// publishing each at once: one NextInto per chunk, no Next and copy.
func TestRelayLandsEachChunkInPlace(t *testing.T) {
	ctx := context.Background()
	st := objstore.NewStore(1 << 20)
	data := make([]byte, 1000)
	for i := range data {
		data[i] = byte(i * 13)
	}
	out, _, err := st.Create("out", int64(len(data)), 0)
	if err != nil {
		t.Fatal(err)
	}
	in := &unevenStream{data: data, sizes: []int{64, 3, 250, 1}}
	reads := 0
	in.before = func(off int) {
		reads++
		if written, _, _ := out.Progress(); written != int64(off) {
			t.Errorf("read %d at %d: %d bytes published, want all before it", reads, off, written)
		}
	}
	if err := Relay(ctx, out.NewWriter(), in, int64(len(data))); err != nil {
		t.Fatal(err)
	}
	if got, _ := out.WholeBytes(); !bytes.Equal(got, data) {
		t.Fatal("the relay's output differs from its input")
	}
	if in.nexts != 0 || in.into < 4 {
		t.Fatalf("%d Next and %d NextInto calls: the relay copied through Next", in.nexts, in.into)
	}
	short, _, err := st.Create("short", 2000, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := Relay(ctx, short.NewWriter(), &unevenStream{data: data, sizes: []int{100}}, 2000); !errors.Is(err, messages.ErrInvalidArgument) {
		t.Fatalf("a relay of 2000 bytes from a stream of 1000: %v", err)
	}
}
