package storenode

import (
	"context"

	"github.com/hoplite-go/hoplite/internal/fastget"
)

// fastGet is a Get's fast path when the client's store node runs in this
// process: the node's Getter sends the Locate to the object's shard from
// this goroutine, and an answer with the bytes returns them without a
// message to or from the node (see internal/actors/storeactor's
// fastGetter). ok false: the ordinary Get follows and answers.
func (c *Client) fastGet(ctx context.Context, id string, readOnly bool) (data []byte, ok bool) {
	g := fastget.Lookup(c.PID())
	if g == nil {
		return nil, false
	}
	ctx, cancel := c.withDeadline(ctx)
	defer cancel()
	if data, ok = g.Get(ctx, id, readOnly); ok {
		fastget.NoteAnswered()
	}
	return data, ok
}
