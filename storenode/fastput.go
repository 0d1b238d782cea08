package storenode

import (
	"context"

	"github.com/hoplite-go/hoplite/internal/fastget"
)

// fastPut is a Put's fast path when the client's store node runs in this
// process and the object is inline: the node's Putter makes the creator
// copy, registers it with the object's shard from this goroutine and
// stores the bytes, without a message to or from the node on the way
// (see internal/actors/storeactor's fastPutter). ok false: the ordinary
// Put follows and answers.
func (c *Client) fastPut(ctx context.Context, id string, data []byte) (ok bool, err error) {
	p := fastget.LookupPutter(c.PID())
	if p == nil {
		return false, nil
	}
	ctx, cancel := c.withDeadline(ctx)
	defer cancel()
	if ok, err = p.Put(ctx, id, data); ok {
		fastget.NotePutAnswered()
	}
	return ok, err
}
