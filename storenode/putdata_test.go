package storenode

import (
	"bytes"
	"context"
	"testing"
)

// TestPutDataReaderAtChunks: a PutData of an io.ReaderAt is served, on
// each stream, chunk by chunk from the offsets asked for, each chunk the
// reader's bytes there; two streams of one Put (a failover's second
// fetch beside the first) read into buffers of their own, so neither
// overwrites a chunk the other returned.
func TestPutDataReaderAtChunks(t *testing.T) {
	data := make([]byte, 10<<20+123)
	for i := range data {
		data[i] = byte(i*7 + i>>12)
	}
	d := &PutData{size: int64(len(data)), at: bytes.NewReader(data)}
	ctx := context.Background()
	a, err := d.Open(ctx, "o", "o")
	if err != nil {
		t.Fatal(err)
	}
	b, err := d.Open(ctx, "o", "o")
	if err != nil {
		t.Fatal(err)
	}
	const chunk = 4 << 20
	for off := int64(0); off < int64(len(data)); off += chunk {
		ca, err := a.ReadAt(ctx, off, chunk)
		if err != nil {
			t.Fatal(err)
		}
		// The other stream, a chunk behind: its read must not touch ca.
		cb, err := b.ReadAt(ctx, max(0, off-chunk), chunk)
		if err != nil {
			t.Fatal(err)
		}
		want := data[off:min(int64(len(data)), off+chunk)]
		if !bytes.Equal(ca, want) {
			t.Fatalf("stream a at %d: %d bytes, not the reader's %d there", off, len(ca), len(want))
		}
		if wantB := data[max(0, off-chunk):min(int64(len(data)), max(0, off-chunk)+chunk)]; !bytes.Equal(cb, wantB) {
			t.Fatalf("stream b at %d: not the reader's bytes", max(0, off-chunk))
		}
	}
	if _, err := a.ReadAt(ctx, int64(len(data)), chunk); err == nil {
		t.Error("a read at the end: no EOF")
	}
}
