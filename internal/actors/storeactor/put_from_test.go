package storeactor

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/fingerprint"
	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/internal/testutil"
	"github.com/hoplite-go/hoplite/internal/transport"
	"github.com/hoplite-go/hoplite/messages"
)

// A PutFrom's bytes come from a client, which names their size: the
// node receives them, in many chunks, and fingerprints them itself as
// they come; a sender that serves another size, or none, fails the
// fetch with nothing returned.
func TestFetchPutFingerprintsWhatArrives(t *testing.T) {
	mem := transport.NewMemory(0)
	src := objstore.NewStore(1 << 20)
	data := testutil.Pattern(4, 100_000)
	o, _, err := src.Create("x", int64(len(data)), fingerprint.Of(data))
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

	got, fp, err := fetchPut(ctx, cfg, "x", addr, int64(len(data)), 4096)
	if err != nil || !bytes.Equal(got, data) || fp != fingerprint.Of(data) {
		t.Fatalf("fetched %d bytes, fingerprint %x (want %x), %v", len(got), fp, fingerprint.Of(data), err)
	}
	got, _, err = fetchPut(ctx, cfg, "x", addr, int64(len(data))+1, 4096)
	testutil.WantErr(t, err, messages.ErrInvalidArgument)
	if got != nil {
		t.Fatalf("another size: %d bytes returned", len(got))
	}
	mem.Unserve(addr)
	got, _, err = fetchPut(ctx, cfg, "x", addr, int64(len(data)), 4096)
	testutil.WantErr(t, err, messages.ErrUnavailable)
	if got != nil {
		t.Fatalf("a sender gone: %d bytes returned", len(got))
	}
}
