package storenode

import (
	"context"
	"errors"
	"io"
	"sync"

	"github.com/hoplite-go/hoplite/internal/storeproto"
	"github.com/hoplite-go/hoplite/messages"
)

// A Put of unknown length through a DataPath (a pipe) is sent in
// segments (messages.PutFrom with size -1): the member fetches them in
// order and commits the object when a short one ends it, so the Client
// holds two segments of it at most, never the whole.
const (
	// StreamSegment is the segment size a Client sends: a few ms of a
	// link, so that one round trip per segment is small beside its bytes.
	StreamSegment = storeproto.StreamSegment
	// MinSegment and MaxSegment bound the segment size a store node
	// accepts: more round trips than bytes below, a sender's buffers
	// outgrowing what a stream is for above.
	MinSegment = storeproto.MinSegment
	MaxSegment = storeproto.MaxSegment
)

// SegmentName is the name under which the sender of a PutFrom of unknown
// length serves segment k of object id (its bytes from k times the
// segment size on).
func SegmentName(id string, k int64) string { return storeproto.SegmentName(id, k) }

// segment is one segment of a reader of unknown length.
type segment struct {
	k    int64
	b    []byte
	last bool  // shorter than the segment size: the reader ended in it
	err  error // reading it failed (typed)
}

// readSegment reads segment k of r, size bytes unless r ends first.
func readSegment(id string, r io.Reader, k int64, size int) segment {
	b := make([]byte, size)
	n, err := io.ReadFull(r, b)
	s := segment{k: k, b: b[:n]}
	switch {
	case err == nil:
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		s.last = true
	default:
		s.err = messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "put of %q: reading at byte %d: %v", id, k*int64(size)+int64(n), err)
	}
	return s
}

// segmentFeed serves a reader of unknown length as the segments of one
// PutFrom: the segment the member fetched last (again, should it open
// it again) and the next one, read ahead while the member fetches the
// current one. A goroutine reads ahead; it stops at the last segment,
// at a read error, or when the Put ends (close).
type segmentFeed struct {
	id   string
	size int
	next chan segment // the segment read ahead, handed over on open
	stop chan struct{}
	once sync.Once

	mu  sync.Mutex
	cur segment // the segment served last
}

// newSegmentFeed serves first, segment 0 of id (read already), and
// reads the next ones from r as the member asks for them.
func newSegmentFeed(id string, r io.Reader, first segment, size int) *segmentFeed {
	f := &segmentFeed{id: id, size: size, next: make(chan segment), stop: make(chan struct{}), cur: first}
	if !first.last && first.err == nil {
		go f.readAhead(r)
	}
	return f
}

func (f *segmentFeed) readAhead(r io.Reader) {
	for k := f.cur.k + 1; ; k++ {
		s := readSegment(f.id, r, k, f.size)
		select {
		case f.next <- s:
		case <-f.stop:
			return
		}
		if s.last || s.err != nil {
			return
		}
	}
}

// close ends the read-ahead. A Read of the caller's reader in progress
// is not interrupted: its bytes are dropped when it returns.
func (f *segmentFeed) close() { f.once.Do(func() { close(f.stop) }) }

// spent says the feed moved past segment 0: another node could not be
// served the object from its start.
func (f *segmentFeed) spent() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.cur.k > 0
}

// open serves segment name: the current one again, or the next one once
// it is read (until ctx ends). A read error is the segment's answer, so
// that the member fails the Put with it and registers nothing.
func (f *segmentFeed) open(ctx context.Context, name string) (ObjectReader, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if name == SegmentName(f.id, f.cur.k) {
		return f.cur.reader()
	}
	if name != SegmentName(f.id, f.cur.k+1) || f.cur.last || f.cur.err != nil {
		return nil, messages.Errorf(messages.ErrorCode_NOT_FOUND, "put of %q: %q is not a segment this client serves now (it is at segment %d)", f.id, name, f.cur.k)
	}
	select {
	case s := <-f.next:
		f.cur = s
	case <-f.stop:
		return nil, messages.Errorf(messages.ErrorCode_CANCELED, "put of %q: the Put ended", f.id)
	case <-ctx.Done():
		return nil, messages.Errorf(messages.ErrorCode_TIMEOUT, "put of %q: segment %d not read from the caller's reader in time: %v", f.id, f.cur.k+1, ctx.Err())
	}
	return f.cur.reader()
}

func (s segment) reader() (ObjectReader, error) {
	if s.err != nil {
		return nil, s.err
	}
	return segmentReader(s.b), nil
}

// segmentReader serves one segment's bytes without a copy.
type segmentReader []byte

func (r segmentReader) Size() int64 { return int64(len(r)) }
func (r segmentReader) Close()      {}
func (r segmentReader) ReadAt(_ context.Context, off int64, limit int) ([]byte, error) {
	if off >= int64(len(r)) {
		return nil, io.EOF
	}
	return r[off:min(int64(len(r)), off+int64(limit))], nil
}
