package objstore

import (
	"bytes"
	"context"
	"testing"
	"time"
)

// A Writer superseded while it holds Tail's memory (a socket read into
// the object's buffer still in progress) may write there late; the newer
// Writer's published bytes must not be overwritten by it.
func TestSupersededWriterCannotScribbleOverPublishedBytes(t *testing.T) {
	s := NewStore(1000)
	o, _, err := s.Create("o", 100, 1)
	if err != nil {
		t.Fatal(err)
	}
	old := o.NewWriter()
	tail, err := old.Tail()
	if err != nil {
		t.Fatal(err)
	}
	fresh := o.NewWriter() // a resumed fetch takes over
	want := bytes.Repeat([]byte{'B'}, 10)
	if err := fresh.Append(want); err != nil {
		t.Fatal(err)
	}
	copy(tail, bytes.Repeat([]byte{'X'}, 10)) // the old read lands late
	if err := old.Advance(10); err == nil {
		t.Fatal("a superseded writer published")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	got, err := o.ReadAt(ctx, 0, 10)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("published bytes %q, want %q: the superseded writer's late bytes landed", got, want)
	}
	// Without a lent tail, a new writer keeps the buffer (no copy).
	before, _ := fresh.Tail()
	if err := fresh.Advance(0); err != nil {
		t.Fatal(err)
	}
	again := o.NewWriter()
	after, _ := again.Tail()
	if &before[0] != &after[0] {
		t.Fatal("a new writer copied the buffer although no tail was lent")
	}
}
