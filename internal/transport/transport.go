// Package transport moves object bytes between store nodes: the data plane,
// kept apart from the actor messages that control it.
//
// A receiver pulls: it opens a Stream of one object from a peer at an
// offset and reads chunks as fast as it consumes them, so a slow receiver
// never makes a sender or a mailbox buffer without bound. Senders serve
// from partial copies: a read waits until the bytes exist.
//
// It is internal: a member's data plane is wired by package cluster, and
// an application that runs store nodes in its own actor system gets one
// from actors.NewMemoryTransport or actors.NewTCPTransport.
package transport

import "context"

// ObjectReader reads one object held by the local store. Bytes it returns
// are immutable and may be shared without copying.
type ObjectReader interface {
	// Size is the object's full size.
	Size() int64
	// ReadAt returns up to max bytes starting at off, waiting until at
	// least one byte past off exists (the copy may still be arriving).
	// At off == Size() it returns io.EOF.
	ReadAt(ctx context.Context, off int64, max int) ([]byte, error)
	// Close releases the reader (a held object is not evicted).
	Close()
}

// Source is what a node serves: its local store.
type Source interface {
	// OpenObject opens id for reading. A copy that the directory already
	// announced but whose size the node is still learning is waited for,
	// until ctx ends.
	OpenObject(ctx context.Context, id string) (ObjectReader, error)
}

// Stream is one object arriving from a peer. Both transports implement
// all of it; a wrapper must forward NextInto as well as Next, or the
// bytes it carries take one more copy.
type Stream interface {
	// Size is the object's full size as the sender knows it.
	Size() int64
	// Next returns the next chunk; io.EOF after the last. The chunk is
	// valid until the next call and must not be modified.
	Next(ctx context.Context) ([]byte, error)
	// NextInto puts the next chunk into dst and returns its length;
	// io.EOF after the last. dst must hold min(chunk, bytes left). It is
	// how the receiving side copies each byte once: on TCP the payload is
	// read from the socket straight into dst (the object's own buffer);
	// in memory it is copied there from the sender's. After an error with
	// the stream still usable (ctx ended mid-chunk), call again with the
	// same dst: part of the chunk may already be in it.
	NextInto(ctx context.Context, dst []byte) (int, error)
	Close()
}

// PayloadCounter is a Stream that counts the payload bytes it received,
// those of a chunk that has not come whole yet included (TCP's). A
// caller that bounds each NextInto by a stall timeout tells by it a
// chunk that is still arriving, on a link slower than a chunk per stall
// timeout, from one of which nothing came. Call it between NextIntos,
// not during one.
type PayloadCounter interface {
	PayloadReceived() int64
}

// Transport connects store nodes' data planes: streams of objects, and
// control requests (Caller) on the same connections. Both transports,
// Memory and TCP, implement all of it.
type Transport interface {
	Caller
	// Serve makes src reachable for node and returns the data address that
	// node publishes in its NodeRef.
	Serve(node string, src Source) (addr string, err error)
	// Unserve stops serving node's data address; open streams fail.
	Unserve(addr string)
	// Open streams object id from the peer at addr to the local node at
	// self, starting at offset, in chunks of at most chunk bytes.
	Open(ctx context.Context, self, addr, id string, offset int64, chunk int) (Stream, error)
}

// PacedOpener is a Transport whose streams can ask their sender to pace
// them: the sender sends every such stream of its node through one
// EgressPacer, at its link's rate, so that many streams that leave a node
// at once share its link evenly (a sliced AllReduce's).
type PacedOpener interface {
	// OpenPaced is Transport.Open for a paced stream.
	OpenPaced(ctx context.Context, self, addr, id string, offset int64, chunk int) (Stream, error)
}

// OpenPaced opens a paced stream on t if it paces (PacedOpener), else an
// ordinary one: pacing changes when bytes leave, never which.
func OpenPaced(ctx context.Context, t Transport, self, addr, id string, offset int64, chunk int) (Stream, error) {
	if p, ok := t.(PacedOpener); ok {
		return p.OpenPaced(ctx, self, addr, id, offset, chunk)
	}
	return t.Open(ctx, self, addr, id, offset, chunk)
}
