package storenode

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/internal/bufalloc"
	"github.com/hoplite-go/hoplite/internal/localput"
	"github.com/hoplite-go/hoplite/messages"
)

// DataPath moves a Client's object bytes on the data plane when its
// store node runs in another process (cluster.Dial sets one): inside a
// request they would be one remote message, encoded, copied and decoded
// whole, and capped in size. Each call is one attempt at node; raced
// says the node itself answered UNAVAILABLE (a placement race, retried
// there), any other UNAVAILABLE moves the Client to another node.
type DataPath interface {
	// Put has node fetch data as object id (a messages.PutFrom) and
	// returns its answer.
	Put(ctx context.Context, node *actor.PID, id string, data *PutData) (raced bool, err error)
	// Get has node bring a copy of id into its store and streams it from
	// there into sink.
	Get(ctx context.Context, node *actor.PID, id string, sink Sink) (raced bool, err error)
}

// SetDataPath makes Put, PutFrom, Get, GetReadOnly, GetInto and GetTo
// move their bytes through p (nil: inside the requests). Call it before
// the Client is used.
func (c *Client) SetDataPath(p DataPath) { c.data = p }

// dataPathMin is the size from which a Put takes the data path: below
// it the request carrying the bytes costs less than the round trips of
// a transfer.
const dataPathMin = localput.MinSize

// PutData is an object to Put: one slice (a Put's), the bounded chunks
// PutFrom read, a reader PutFrom serves from as the node asks (an
// io.ReaderAt, or a reader that is read once), or a reader of unknown
// length served in segments (see SegmentName).
type PutData struct {
	chunks [][]byte
	at     io.ReaderAt
	once   io.Reader
	feed   *segmentFeed
	size   int64 // -1 with feed

	mu   sync.Mutex
	next int64 // once: the offset it is at
}

// Size is the object's size, or -1 if it is not known: the object is
// then served in segments of SegmentSize bytes until a shorter one.
func (d *PutData) Size() int64 { return d.size }

// SegmentSize is the size of the segments an object of unknown size is
// served in (messages.PutFrom's segment_size), 0 for one of known size.
func (d *PutData) SegmentSize() int64 {
	if d.feed == nil {
		return 0
	}
	return int64(d.feed.size)
}

// ObjectReader reads the object a PutData serves, as the node that
// fetches it asks for its chunks.
type ObjectReader interface {
	// Size is the object's full size.
	Size() int64
	// ReadAt returns up to max bytes starting at off, waiting until ctx
	// ends for bytes not yet read from the caller's reader; at off ==
	// Size() it returns io.EOF. The bytes are valid until the next ReadAt
	// and must not be modified.
	ReadAt(ctx context.Context, off int64, max int) ([]byte, error)
	// Close releases the reader.
	Close()
}

// Open serves name to the node that fetches object id: the object
// itself (name id), or for one of unknown size its segment name (see
// SegmentName), waiting until ctx ends for it to be read.
func (d *PutData) Open(ctx context.Context, id, name string) (ObjectReader, error) {
	if d.feed != nil {
		return d.feed.open(ctx, name)
	}
	if name != id {
		return nil, messages.Errorf(messages.ErrorCode_NOT_FOUND, "object %q is not what this client puts here (%q)", name, id)
	}
	return &putDataReader{d: d}, nil
}

// putDataReader serves d to one stream. The data plane writes a chunk
// out before it reads the next (a stream's chunks are sequential), so a
// reader of d.at or d.once reads every chunk into one buffer of its own.
type putDataReader struct {
	d   *PutData
	buf []byte
}

func (r *putDataReader) Size() int64 { return r.d.size }
func (r *putDataReader) Close()      {}

// spent says d is a reader that is read once and was read from: another
// attempt could not serve it from the start.
func (d *PutData) spent() bool {
	if d.feed != nil {
		return d.feed.spent()
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.once != nil && d.next > 0
}

// ReadAt returns the bytes at off: within one chunk, served without a
// copy, or up to limit bytes read from the caller's reader into the
// reader's buffer, valid until the next ReadAt.
func (r *putDataReader) ReadAt(_ context.Context, off int64, limit int) ([]byte, error) {
	d := r.d
	if off >= d.size {
		return nil, io.EOF
	}
	if d.at != nil || d.once != nil {
		want := int(min(int64(limit), d.size-off))
		if cap(r.buf) < want {
			r.buf = make([]byte, want)
		}
		b := r.buf[:want]
		var n int
		var err error
		if d.at != nil {
			n, err = d.at.ReadAt(b, off)
		} else {
			d.mu.Lock()
			if off != d.next {
				d.mu.Unlock()
				return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "a reader read once is at byte %d, not %d", d.next, off)
			}
			n, err = io.ReadFull(d.once, b)
			d.next += int64(n)
			d.mu.Unlock()
		}
		if n == len(b) {
			return b, nil
		}
		if err == nil || errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "the reader ended at %d of %d bytes", off+int64(n), d.size)
		}
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "reading at byte %d: %v", off+int64(n), err)
	}
	for _, c := range d.chunks {
		if off < int64(len(c)) {
			return c[off:min(int64(len(c)), off+int64(limit))], nil
		}
		off -= int64(len(c))
	}
	return nil, io.EOF
}

// putChunk is how much of a reader PutFrom reads at a time.
const putChunk = 4 << 20

// readPutData reads r to its end (size bytes, or any number for size
// -1) in chunks of putChunk.
func readPutData(id string, r io.Reader, size int64) (*PutData, error) {
	if size < -1 {
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "put of %q: size %d (want -1 for unknown, or the size)", id, size)
	}
	d := &PutData{}
	for size < 0 || d.size < size {
		n := int64(putChunk)
		if size >= 0 {
			n = min(n, size-d.size)
		}
		c := make([]byte, n)
		k, err := io.ReadFull(r, c)
		if k > 0 {
			d.chunks = append(d.chunks, c[:k])
			d.size += int64(k)
		}
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			if size >= 0 && d.size < size {
				return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "put of %q: the reader ended at %d of %d bytes", id, d.size, size)
			}
			break
		}
		if err != nil {
			return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "put of %q: reading at byte %d: %v", id, d.size, err)
		}
	}
	return d, nil
}

// PutFrom creates object id from r's bytes: size of them, or all until
// EOF for size -1 (a reader that ends early, or a read error, is
// INVALID_ARGUMENT). It is Put otherwise.
//
// Through a DataPath (cluster.Dial), with the size given, the node reads
// r as it fetches the object, a chunk at a time, so the object is never
// whole in the caller's memory: r is read at the offsets the node asks
// for if it is an io.ReaderAt (an *os.File), and so is sent again to
// another node if its node fails; any other reader is read once, and a
// node that fails after its first byte was read fails the Put
// UNAVAILABLE (Put it again). For size -1 the node fetches r's bytes in
// segments of StreamSegment bytes as r yields them (the next one read
// while the node fetches one) and creates the object when r ends: at
// most two segments are in the Client's memory at a time. A read error
// fails the Put with INVALID_ARGUMENT, and the node registers nothing;
// a node that fails once the first segment was passed fails the Put
// UNAVAILABLE (Put it again), as for a reader of known size. If ctx
// ends while a Read of r blocks, PutFrom returns and that Read's bytes
// are dropped when it returns. Without a DataPath r is read whole and
// Put.
func (c *Client) PutFrom(ctx context.Context, id string, r io.Reader, size int64) error {
	if c.data != nil && size >= dataPathMin {
		d := &PutData{size: size, once: r}
		if at, ok := r.(io.ReaderAt); ok {
			d.at, d.once = at, nil
		}
		return c.putData(ctx, id, d)
	}
	if c.data != nil && size == -1 {
		return c.putStream(ctx, id, r)
	}
	d, err := readPutData(id, r, size)
	if err != nil {
		return err
	}
	if c.data == nil || d.size < dataPathMin {
		data := bytes.Join(d.chunks, nil)
		if data == nil {
			data = []byte{}
		}
		return c.Put(ctx, id, data)
	}
	return c.putData(ctx, id, d)
}

// putStream is PutFrom of unknown size through a DataPath. An object
// that ends within its first segment is Put as one of known size.
func (c *Client) putStream(ctx context.Context, id string, r io.Reader) error {
	first := readSegment(id, r, 0, StreamSegment)
	switch {
	case first.err != nil:
		return first.err
	case !first.last:
		d := &PutData{size: -1, feed: newSegmentFeed(id, r, first, StreamSegment)}
		defer d.feed.close()
		return c.putData(ctx, id, d)
	case len(first.b) < dataPathMin:
		return c.Put(ctx, id, first.b)
	}
	return c.putData(ctx, id, &PutData{chunks: [][]byte{first.b}, size: int64(len(first.b))})
}

func (c *Client) putData(ctx context.Context, id string, d *PutData) error {
	var spent error
	err := c.retry(ctx, func(ctx context.Context) (bool, error) {
		if d.spent() {
			// Not UNAVAILABLE to retry: no other attempt can serve it.
			spent = messages.Errorf(messages.ErrorCode_UNAVAILABLE,
				"put of %q: its node failed after its reader was read from, and a reader that is no io.ReaderAt is read once: Put it again", id)
			return false, errSpent
		}
		return c.data.Put(ctx, c.PID(), id, d)
	})
	if errors.Is(err, errSpent) {
		return spent
	}
	return err
}

// errSpent ends a Put's retries (see putData): no attempt can serve it.
var errSpent = errors.New("put: reader spent")

// Sink takes a Get's bytes from a DataPath, in order. A retry resumes
// at Offset (another node's copy holds the same bytes).
type Sink interface {
	// Begin gives the object's size before its bytes, on every attempt.
	Begin(size int64) error
	// Offset is how many bytes the sink has.
	Offset() int64
	// Buffer is where the next bytes go (then Advance), or nil to take
	// them by Write.
	Buffer() []byte
	// Advance counts n bytes put in Buffer.
	Advance(n int)
	// Write takes the next bytes; p is valid only during the call.
	Write(p []byte) error
}

// bufferSink collects a Get into one slice: the caller's (GetInto) or
// one of the object's size.
type bufferSink struct {
	id    string
	buf   []byte
	given bool // buf is the caller's
	size  int64
	off   int64
}

func (s *bufferSink) Begin(size int64) error {
	switch {
	case s.given && size > int64(len(s.buf)):
		return tooSmall(s.id, int(size), len(s.buf))
	case s.off > 0 && size != s.size:
		return messages.Errorf(messages.ErrorCode_RESET, "object %q: another copy has %d bytes, the first had %d", s.id, size, s.size)
	case !s.given && s.buf == nil:
		// Not zeroed, on huge pages where it can: every byte is written
		// before Get returns it, as a fetch's copy is (bufalloc).
		s.buf = bufalloc.Make(int(size))
	}
	s.size = size
	return nil
}

func (s *bufferSink) Offset() int64  { return s.off }
func (s *bufferSink) Buffer() []byte { return s.buf[s.off:s.size] }
func (s *bufferSink) Advance(n int)  { s.off += int64(n) }
func (s *bufferSink) Write(p []byte) error {
	s.off += int64(copy(s.buf[s.off:s.size], p))
	return nil
}

// writerSink hands a Get's bytes to an io.Writer as they arrive.
type writerSink struct {
	id   string
	w    io.Writer
	size int64
	off  int64
}

func (s *writerSink) Begin(size int64) error {
	if s.off > 0 && size != s.size {
		return messages.Errorf(messages.ErrorCode_RESET, "object %q: another copy has %d bytes, the first had %d (%d written already)", s.id, size, s.size, s.off)
	}
	s.size = size
	return nil
}

func (s *writerSink) Offset() int64  { return s.off }
func (s *writerSink) Buffer() []byte { return nil }
func (s *writerSink) Advance(int)    {}
func (s *writerSink) Write(p []byte) error {
	n, err := s.w.Write(p)
	s.off += int64(n)
	if err == nil && n < len(p) {
		err = io.ErrShortWrite
	}
	if err != nil {
		// Not the node's failure: nothing to retry or fail over.
		return messages.Errorf(messages.ErrorCode_CANCELED, "get of %q: the writer failed at byte %d: %v", s.id, s.off, err)
	}
	return nil
}

// getData runs a Get into sink through the data path, failing over as
// the other calls do.
func (c *Client) getData(ctx context.Context, id string, sink Sink) error {
	return c.retry(ctx, func(ctx context.Context) (bool, error) {
		return c.data.Get(ctx, c.PID(), id, sink)
	})
}

// GetTo writes object id to w as its bytes arrive and returns how many
// it wrote; it waits for the object as Get does. Through a data path
// (cluster.Dial) the bytes go from the node's data plane to w chunk by
// chunk, so the object is never whole in the caller's memory; a node
// that fails mid-transfer is replaced by another copy, resumed where w
// stopped. A failed Write ends it CANCELED. In the node's process it is
// GetReadOnly and one Write.
func (c *Client) GetTo(ctx context.Context, id string, w io.Writer) (int64, error) {
	if c.data != nil {
		s := &writerSink{id: id, w: w}
		err := c.getData(ctx, id, s)
		return s.off, err
	}
	b, err := c.GetReadOnly(ctx, id)
	if err != nil {
		return 0, err
	}
	s := &writerSink{id: id, w: w}
	err = s.Write(b)
	return s.off, err
}
