package transport

import (
	"bytes"
	"context"
	"io"
	"sync"
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

// Memory is the in-process Transport of the embedded cluster. A chunk is
// handed over as a shared read-only slice (Next), or copied into the
// receiver's memory (NextInto: the one copy into its store), optionally paced by an emulated link per node so that a
// broadcast tree can be compared with the naive pattern on one machine.
type Memory struct {
	// LinkBandwidth, in bytes per second, limits each node's uplink and
	// downlink separately, like a full-duplex NIC. 0 means unlimited.
	LinkBandwidth float64

	mu    sync.Mutex
	nodes map[string]*memoryNode
}

type memoryNode struct {
	src        Source
	up, down   link
	closed     chan struct{}
	closedOnce sync.Once
}

// NewMemory returns an in-memory transport; bandwidth 0 is unlimited.
func NewMemory(bandwidth float64) *Memory {
	return &Memory{LinkBandwidth: bandwidth, nodes: map[string]*memoryNode{}}
}

// Serve implements Transport. The address is "mem://" + node.
func (m *Memory) Serve(node string, src Source) (string, error) {
	addr := "mem://" + node
	m.mu.Lock()
	defer m.mu.Unlock()
	if old := m.nodes[addr]; old != nil {
		old.close()
	}
	m.nodes[addr] = &memoryNode{src: src, up: link{bps: m.LinkBandwidth}, down: link{bps: m.LinkBandwidth}, closed: make(chan struct{})}
	return addr, nil
}

// Unserve implements Transport.
func (m *Memory) Unserve(addr string) {
	m.mu.Lock()
	n := m.nodes[addr]
	delete(m.nodes, addr)
	m.mu.Unlock()
	if n != nil {
		n.close()
	}
}

func (n *memoryNode) close() { n.closedOnce.Do(func() { close(n.closed) }) }

func (m *Memory) node(addr string) *memoryNode {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.nodes[addr]
}

// Open implements Transport.
func (m *Memory) Open(ctx context.Context, self, addr, id string, offset int64, chunk int) (Stream, error) {
	peer := m.node(addr)
	if peer == nil {
		return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "no data endpoint at %s", addr)
	}
	if chunk <= 0 {
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "chunk size %d", chunk)
	}
	r, err := peer.src.OpenObject(ctx, id)
	if err != nil {
		return nil, err
	}
	if offset < 0 || offset > r.Size() {
		r.Close()
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "offset %d outside object %q of %d bytes", offset, id, r.Size())
	}
	return &memoryStream{peer: peer, local: m.node(self), r: r, off: offset, chunk: chunk}, nil
}

type memoryStream struct {
	peer, local *memoryNode
	r           ObjectReader
	off         int64
	chunk       int
}

func (s *memoryStream) Size() int64 { return s.r.Size() }

func (s *memoryStream) Next(ctx context.Context) ([]byte, error) {
	select {
	case <-s.peer.closed:
		return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "sender stopped serving")
	default:
	}
	if s.off >= s.r.Size() {
		return nil, io.EOF
	}
	// A sender that stops serving also fails its store's objects, which
	// wakes a ReadAt waiting on a partial copy.
	b, err := s.r.ReadAt(ctx, s.off, s.chunk)
	if err != nil {
		return nil, err
	}
	var localDown *link
	if s.local != nil {
		localDown = &s.local.down
	}
	if err := pace(ctx, &s.peer.up, localDown, len(b)); err != nil {
		return nil, err
	}
	s.off += int64(len(b))
	return b, nil
}

// NextInto implements Stream: the sender's bytes are copied into dst,
// the one copy on this side, as a socket read would.
func (s *memoryStream) NextInto(ctx context.Context, dst []byte) (int, error) {
	if want := min(int64(s.chunk), s.r.Size()-s.off); want > 0 && int64(len(dst)) < want {
		return 0, messages.Errorf(messages.ErrorCode_INTERNAL, "stream: a buffer of %d bytes for chunks of up to %d", len(dst), want)
	}
	b, err := s.Next(ctx)
	if err != nil {
		return 0, err
	}
	if len(b) > len(dst) {
		return 0, messages.Errorf(messages.ErrorCode_INTERNAL, "stream: a chunk of %d bytes for a buffer of %d", len(b), len(dst))
	}
	return copy(dst, b), nil
}

func (s *memoryStream) Close() { s.r.Close() }

// link is a token bucket with no burst: it books transmission slots in
// order, so n bytes occupy the link for n/bps seconds.
type link struct {
	mu   sync.Mutex
	bps  float64
	next time.Time
}

func (l *link) book(now time.Time, n int) time.Time {
	if l == nil || l.bps <= 0 {
		return now
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	start := now
	if l.next.After(start) {
		start = l.next
	}
	l.next = start.Add(time.Duration(float64(n) / l.bps * float64(time.Second)))
	return l.next
}

// pace waits until n bytes have crossed both the sender's uplink and the
// receiver's downlink.
func pace(ctx context.Context, up, down *link, n int) error {
	now := time.Now()
	until := up.book(now, n)
	if d := down.book(now, n); d.After(until) {
		until = d
	}
	wait := time.Until(until)
	if wait <= 0 {
		return nil
	}
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return messages.AsError(ctx.Err())
	}
}

// Call implements Caller: the peer's Controller runs on the caller's
// goroutine. Its ctx also ends when the peer stops serving, as a TCP
// handler's does when its process dies, and the call then fails
// UNAVAILABLE whatever the handler returns.
func (m *Memory) Call(ctx context.Context, addr string, kind byte, req []byte) ([]byte, error) {
	if err := checkCall(ctx, addr, req); err != nil {
		return nil, err
	}
	peer := m.node(addr)
	if peer == nil {
		return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "no data endpoint at %s", addr)
	}
	h, ok := peer.src.(Controller)
	if !ok {
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "node at %s takes no control requests", addr)
	}
	cctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		select {
		case <-peer.closed:
			cancel()
		case <-stop:
		}
	}()
	// The request and the answer are the caller's and the peer's own, as
	// if they had crossed a wire.
	reply, err := h.Control(cctx, kind, bytes.Clone(req))
	select {
	case <-peer.closed:
		return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "data endpoint %s stopped serving during a control request", addr)
	default:
	}
	if err != nil {
		if e := ctxErr(ctx); e != nil {
			return nil, e
		}
		return nil, answered{messages.AsError(err)}
	}
	if len(reply) > MaxControlReply {
		return nil, messages.Errorf(messages.ErrorCode_INTERNAL, "control reply of %d bytes exceeds %d", len(reply), MaxControlReply)
	}
	return bytes.Clone(reply), nil
}
