// Package getinto is what a Client's GetInto and its store node in the
// same process hand each other: the request, which lends the caller's
// memory (Buffer), and the reply. None of it crosses a process, and none
// of it is part of package storenode's API.
package getinto

import (
	"context"
	"sync"
	"time"
)

// Buffer is the destination of one GetInto: the caller's memory,
// lent to the store node that fills it. At most one goroutine holds it at
// a time (Hold), and once the caller's GetInto returns nobody can hold it
// again; GetInto returns only after the holder let go, so the caller may
// reuse the memory at once.
type Buffer struct {
	b   []byte
	ctx context.Context

	mu     sync.Mutex
	held   bool
	closed bool
	holder sync.WaitGroup
}

// NewBuffer lends b until Close; ctx ends when the caller stops
// waiting, and with it every write.
func NewBuffer(ctx context.Context, b []byte) *Buffer {
	return &Buffer{b: b, ctx: ctx}
}

// Len is how many bytes the buffer holds.
func (d *Buffer) Len() int64 { return int64(len(d.b)) }

// Context ends when the caller stops waiting: a writer's I/O is bound to
// it, so that the caller's wait for the writer to let go is short.
func (d *Buffer) Context() context.Context { return d.ctx }

// Hold gives the caller's memory to one writer until Release. It fails if
// another writer holds it (a second one would race the first) or the
// caller has returned (the memory is the caller's again).
func (d *Buffer) Hold() ([]byte, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.held || d.closed {
		return nil, false
	}
	d.held = true
	d.holder.Add(1)
	return d.b, true
}

// Release ends a Hold.
func (d *Buffer) Release() {
	d.mu.Lock()
	d.held = false
	d.mu.Unlock()
	d.holder.Done()
}

// Close takes the memory back: no Hold succeeds after it, and it returns
// once the current holder (if any) released it.
func (d *Buffer) Close() {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	d.holder.Wait()
}

// Request asks the store node in this process for object
// ObjectID in Dst (storenode.Client.GetInto). It carries the caller's memory, so it
// is no protobuf message and never crosses a process.
type Request struct {
	ObjectID string
	Dst      *Buffer
	Deadline time.Time
}

// Reply answers a Request: Err, or N bytes of the object,
// which are in Dst already unless Data is set (inline bytes the directory
// sent, which the caller copies; a local copy is answered with a
// messages.GetReply to copy from instead).
type Reply struct {
	ObjectID string
	N        int64
	Data     []byte
	Err      error
}
