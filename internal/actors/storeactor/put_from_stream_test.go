package storeactor

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/fingerprint"
	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/internal/storeproto"
	"github.com/hoplite-go/hoplite/internal/testutil"
	"github.com/hoplite-go/hoplite/internal/transport"
	"github.com/hoplite-go/hoplite/messages"
)

// segmentSource serves data as a sender of unknown length does: segment
// k under storeproto.SegmentName, seg bytes each but the last; failAt
// (>= 0) is a segment the sender's reader failed in, oversize one it
// serves with a byte too many.
type segmentSource struct {
	id       string
	data     []byte
	seg      int
	failAt   int64
	oversize int64
}

func (s *segmentSource) OpenObject(_ context.Context, name string) (transport.ObjectReader, error) {
	for k := int64(0); k*int64(s.seg) <= int64(len(s.data)); k++ {
		if name != storeproto.SegmentName(s.id, k) {
			continue
		}
		if k == s.failAt {
			return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "put of %q: reading at byte %d: broken pipe", s.id, k*int64(s.seg))
		}
		start := k * int64(s.seg)
		end := min(start+int64(s.seg), int64(len(s.data)))
		if k == s.oversize {
			return bytesReader(append(bytes.Clone(s.data[start:end]), 0)), nil
		}
		return bytesReader(s.data[start:end]), nil
	}
	return nil, messages.Errorf(messages.ErrorCode_NOT_FOUND, "no %q", name)
}

type bytesReader []byte

func (r bytesReader) Size() int64 { return int64(len(r)) }
func (r bytesReader) Close()      {}
func (r bytesReader) ReadAt(_ context.Context, off int64, limit int) ([]byte, error) {
	return r[off:min(int64(len(r)), off+int64(limit))], nil
}

// A PutFrom of unknown size is fetched segment by segment until a short
// one (an empty one when the size is a whole number of segments), into
// one buffer with the object's fingerprint. A sender whose reader
// failed, one that serves a segment longer than it said, and an object
// past the node's capacity fail the fetch, with nothing returned.
func TestFetchPutSegments(t *testing.T) {
	const seg = 64 << 10
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name     string
		size     int
		capacity int64
		failAt   int64
		oversize int64
		want     error
	}{
		{name: "two and a half segments", size: 2*seg + seg/2, capacity: 1 << 20, failAt: -1, oversize: -1},
		{name: "two whole segments", size: 2 * seg, capacity: 1 << 20, failAt: -1, oversize: -1},
		{name: "less than one", size: 10, capacity: 1 << 20, failAt: -1, oversize: -1},
		{name: "reader failed", size: 3 * seg, capacity: 1 << 20, failAt: 1, oversize: -1, want: messages.ErrInvalidArgument},
		{name: "oversized segment", size: 3 * seg, capacity: 1 << 20, failAt: -1, oversize: 1, want: messages.ErrInvalidArgument},
		{name: "past capacity", size: 3*seg + 1, capacity: 3 * seg, failAt: -1, oversize: -1, want: messages.ErrCapacity},
	} {
		t.Run(tc.name, func(t *testing.T) {
			mem := transport.NewMemory(0)
			data := testutil.Pattern(5, tc.size)
			addr, err := mem.Serve("client", &segmentSource{id: "x", data: data, seg: seg, failAt: tc.failAt, oversize: tc.oversize})
			if err != nil {
				t.Fatal(err)
			}
			cfg := &Config{Transport: mem, Self: &messages.NodeRef{NodeId: "node"}, StallTimeout: 10 * time.Second, Store: objstore.NewStore(tc.capacity)}
			got, fp, err := fetchPutSegments(seg)(ctx, cfg, "x", addr, -1, 16<<10)
			if tc.want != nil {
				testutil.WantErr(t, err, tc.want)
				if got != nil {
					t.Fatalf("%d bytes returned with the error", len(got))
				}
				return
			}
			if err != nil || !bytes.Equal(got, data) || fp != fingerprint.Of(data) {
				t.Fatalf("fetched %d of %d bytes (equal %v), fingerprint %x want %x, %v", len(got), len(data), bytes.Equal(got, data), fp, fingerprint.Of(data), err)
			}
		})
	}
}
