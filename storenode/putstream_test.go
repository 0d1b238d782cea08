package storenode

import (
	"bytes"
	"context"
	"errors"
	"io"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/internal/testutil"
	"github.com/hoplite-go/hoplite/internal/transport"
	"github.com/hoplite-go/hoplite/messages"
)

// countingReader counts the bytes read from it; it fails with failAt's
// error once failAt bytes are read (failAt < 0: never).
type countingReader struct {
	r      io.Reader
	n      atomic.Int64
	failAt int64
}

var errReader = errors.New("the disk went away")

func (c *countingReader) Read(p []byte) (int, error) {
	if c.failAt >= 0 {
		if left := c.failAt - c.n.Load(); left <= 0 {
			return 0, errReader
		} else if int64(len(p)) > left {
			p = p[:left]
		}
	}
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// fetchSegments fetches a feed's segments as a store node does
// (messages.PutFrom of size -1): in order until a short one.
func fetchSegments(ctx context.Context, d *PutData, id string) ([]byte, error) {
	var out []byte
	for k := int64(0); ; k++ {
		r, err := d.Open(ctx, id, SegmentName(id, k))
		if err != nil {
			return out, err
		}
		for off := int64(0); off < r.Size(); {
			b, err := r.ReadAt(ctx, off, 1000)
			if err != nil {
				return out, err
			}
			out = append(out, b...)
			off += int64(len(b))
		}
		if r.Size() < d.SegmentSize() {
			return out, nil
		}
	}
}

// A reader of unknown length is served segment by segment, in order,
// exactly: a total that is a whole number of segments ends with an empty
// one; the current segment can be opened again, no other.
func TestSegmentFeedServesTheReaderInOrder(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, size := range []int{2500, 3000, 999} {
		data := testutil.Pattern(7, size)
		r := bytes.NewReader(data)
		first := readSegment("o", r, 0, 1000)
		d := &PutData{size: -1, feed: newSegmentFeed("o", r, first, 1000)}
		got, err := fetchSegments(ctx, d, "o")
		d.feed.close()
		if err != nil || !bytes.Equal(got, data) {
			t.Fatalf("%d bytes: fetched %d bytes, equal %v, %v", size, len(got), bytes.Equal(got, data), err)
		}
	}
	data := testutil.Pattern(8, 2500)
	r := bytes.NewReader(data)
	d := &PutData{size: -1, feed: newSegmentFeed("o", r, readSegment("o", r, 0, 1000), 1000)}
	defer d.feed.close()
	if _, err := d.Open(ctx, "o", SegmentName("o", 1)); err != nil {
		t.Fatal(err)
	}
	again, err := d.Open(ctx, "o", SegmentName("o", 1))
	if err != nil || again.Size() != 1000 {
		t.Fatalf("segment 1 again: %v", err)
	}
	if b, _ := again.ReadAt(ctx, 0, 2000); !bytes.Equal(b, data[1000:2000]) {
		t.Fatal("segment 1 again: other bytes")
	}
	for _, name := range []string{SegmentName("o", 0), SegmentName("o", 3), "o"} {
		if _, err := d.Open(ctx, "o", name); !errors.Is(err, messages.ErrNotFound) {
			t.Fatalf("open %q at segment 1: %v, want NOT_FOUND", name, err)
		}
	}
	if d.SegmentSize() != 1000 || d.Size() != -1 || !d.spent() {
		t.Fatalf("segment size %d, size %d, spent %v", d.SegmentSize(), d.Size(), d.spent())
	}
}

// The feed reads one segment ahead of the one the node fetches, no
// more: the caller's object is never whole in the client.
func TestSegmentFeedReadsOneSegmentAhead(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := &countingReader{r: bytes.NewReader(testutil.Pattern(1, 10_000)), failAt: -1}
	d := &PutData{size: -1, feed: newSegmentFeed("o", r, readSegment("o", r, 0, 1000), 1000)}
	defer d.feed.close()
	for k := int64(0); k < 4; k++ {
		if _, err := d.Open(ctx, "o", SegmentName("o", k)); err != nil {
			t.Fatal(err)
		}
		want := (k + 2) * 1000
		testutil.Eventually(t, 5*time.Second, "the read-ahead", func() bool { return r.n.Load() >= want })
		time.Sleep(20 * time.Millisecond) // room for a read past the bound
		if got := r.n.Load(); got != want {
			t.Fatalf("at segment %d: %d bytes read from the reader, want %d", k, got, want)
		}
	}
}

// A reader that fails mid-way fails the segment it was reading with
// INVALID_ARGUMENT naming the byte, which the node then fails the Put
// with.
func TestSegmentFeedReadErrorIsTheSegmentsAnswer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r := &countingReader{r: bytes.NewReader(testutil.Pattern(1, 10_000)), failAt: 1500}
	d := &PutData{size: -1, feed: newSegmentFeed("o", r, readSegment("o", r, 0, 1000), 1000)}
	defer d.feed.close()
	_, err := fetchSegments(ctx, d, "o")
	if !errors.Is(err, messages.ErrInvalidArgument) || !strings.Contains(err.Error(), "byte 1500") || !strings.Contains(err.Error(), errReader.Error()) {
		t.Fatalf("fetch past a read error: %v, want INVALID_ARGUMENT at byte 1500", err)
	}
}

// segmentsPath is a DataPath that fetches a Put as a store node does;
// its first failUnavailable attempts fail UNAVAILABLE (the node died)
// after reading failAfter segments.
type segmentsPath struct {
	failUnavailable int
	failAfter       int64
	got             []byte
	attempts        int
}

func (p *segmentsPath) Put(ctx context.Context, _ *actor.PID, id string, d *PutData) (bool, error) {
	p.attempts++
	if p.failUnavailable > 0 {
		p.failUnavailable--
		for k := int64(0); k < p.failAfter; k++ {
			if _, err := d.Open(ctx, id, SegmentName(id, k)); err != nil {
				return false, err
			}
		}
		return false, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "the node died")
	}
	if d.Size() >= 0 {
		r, err := d.Open(ctx, id, id)
		if err != nil {
			return true, err
		}
		b, err := r.ReadAt(ctx, 0, int(r.Size()))
		p.got = bytes.Clone(b)
		return true, err
	}
	var err error
	p.got, err = fetchSegments(ctx, d, id)
	return true, err
}

func (p *segmentsPath) Get(context.Context, *actor.PID, string, Sink) (bool, error) {
	return false, messages.Errorf(messages.ErrorCode_INTERNAL, "not here")
}

var _ transport.ObjectReader = segmentReader(nil)

// PutFrom of unknown length through a DataPath sends segments of
// StreamSegment bytes; a node that dies while the first segment is
// still held is replaced and sent the object again; one that dies
// later fails the Put UNAVAILABLE, since the reader cannot go back.
func TestPutFromUnknownLengthStreamsSegments(t *testing.T) {
	system := actor.NewActorSystem()
	defer system.Shutdown()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	other := actor.NewPID("elsewhere", "store")
	failover := func(context.Context, *actor.PID) (*actor.PID, error) { return other, nil }
	data := testutil.Pattern(3, 2*StreamSegment+StreamSegment/2)

	for _, tc := range []struct {
		failAfter int64
		want      error
	}{{failAfter: 0}, {failAfter: 1}, {failAfter: 2, want: messages.ErrUnavailable}} {
		p := &segmentsPath{failUnavailable: 1, failAfter: tc.failAfter}
		c := NewFailoverClient(system.Root, actor.NewPID("first", "store"), time.Second, failover)
		c.SetDataPath(p)
		err := c.PutFrom(ctx, "o", bytes.NewReader(data), -1)
		if !errors.Is(err, tc.want) || (err == nil) != (tc.want == nil) {
			t.Fatalf("node dead after %d segments: %v, want %v", tc.failAfter, err, tc.want)
		}
		if tc.want == nil && (!bytes.Equal(p.got, data) || p.attempts != 2) {
			t.Fatalf("node dead after %d segments: %d bytes arrived in %d attempts, equal %v", tc.failAfter, len(p.got), p.attempts, bytes.Equal(p.got, data))
		}
	}

	// An object that ends within its first segment is sent whole, its
	// size known.
	p := &segmentsPath{}
	c := NewClient(system.Root, actor.NewPID("first", "store"), time.Second)
	c.SetDataPath(p)
	small := data[:StreamSegment-1]
	if err := c.PutFrom(ctx, "s", bytes.NewReader(small), -1); err != nil || !bytes.Equal(p.got, small) {
		t.Fatalf("put of one short segment: %d bytes arrived, %v", len(p.got), err)
	}
}
