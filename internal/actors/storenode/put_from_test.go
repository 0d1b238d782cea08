package storenode

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/testutil"
	"github.com/hoplite-go/hoplite/messages"
	"github.com/hoplite-go/hoplite/storenode"
	"github.com/hoplite-go/hoplite/transport"
)

// A PutFrom's bytes come from a client, which names their size and
// fingerprint: bytes that are not those fail INVALID_ARGUMENT, and the
// copy being filled never gets its last chunk (so it never completes and
// no reader gets the whole of a wrong object).
func TestFetchPutChecksSizeAndFingerprint(t *testing.T) {
	mem := transport.NewMemory(0)
	src := storenode.NewStore(1 << 20)
	data := testutil.Pattern(4, 100_000)
	o, _, err := src.Create("x", int64(len(data)), storenode.Fingerprint(data))
	if err != nil {
		t.Fatal(err)
	}
	if err := o.NewWriter().Append(data); err != nil {
		t.Fatal(err)
	}
	if err := src.Complete(o); err != nil {
		t.Fatal(err)
	}
	addr, err := mem.Serve("client", src)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &Config{Transport: mem, Self: &messages.NodeRef{NodeId: "node"}, StallTimeout: 10 * time.Second}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	fetch := func(size int64, fp uint64) ([]byte, error) {
		buf, off := make([]byte, size), 0
		err := fetchPut(ctx, cfg, "x", addr, size, fp, 4096,
			func() ([]byte, error) { return buf[off:], nil },
			func(k int) error { off += k; return nil })
		return buf[:off], err
	}

	got, err := fetch(int64(len(data)), storenode.Fingerprint(data))
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the bytes named: %d published, %v", len(got), err)
	}
	got, err = fetch(int64(len(data)), storenode.Fingerprint(data)^1)
	testutil.WantErr(t, err, messages.ErrInvalidArgument)
	if len(got) >= len(data) {
		t.Fatalf("another fingerprint: %d of %d bytes published, want the last chunk held back", len(got), len(data))
	}
	got, err = fetch(int64(len(data))+1, storenode.Fingerprint(data))
	testutil.WantErr(t, err, messages.ErrInvalidArgument)
	if len(got) != 0 {
		t.Fatalf("another size: %d bytes published", len(got))
	}
}
