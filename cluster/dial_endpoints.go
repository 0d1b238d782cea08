package cluster

import (
	"context"
	"crypto/tls"
	"errors"
	"net"
	"slices"
	"strings"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/internal/member"
	"github.com/hoplite-go/hoplite/internal/memberview"
	"github.com/hoplite-go/hoplite/messages"
)

// maxEndpoints bounds the member addresses a Client keeps: those Dial
// was given and those the members listed since.
const maxEndpoints = 64

// refreshEvery is how often a client asks its member for the live
// members.
const refreshEvery = 5 * time.Second

// startRefresh starts asking the member in use for the live members
// every refreshEvery, until the client closes.
func (c *Client) startRefresh() {
	c.ep.stop = make(chan struct{})
	go func() {
		t := time.NewTicker(refreshEvery)
		defer t.Stop()
		for {
			select {
			case <-c.ep.stop:
				return
			case <-t.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), refreshEvery)
			c.refresh(ctx) // a failure is the next call's to report
			cancel()
		}
	}()
}

func (c *Client) stopRefresh() {
	c.ep.stopOnce.Do(func() {
		if c.ep.stop != nil {
			close(c.ep.stop)
		}
	})
}

// SplitEndpoints parses a Dial address: one member's actor system
// address HOST:PORT, or several separated by commas (blanks around them
// are ignored, a repeated one counts once). INVALID_ARGUMENT names the
// first that is not HOST:PORT, or says there are none or too many.
func SplitEndpoints(addrs string) ([]string, error) {
	var out []string
	for _, a := range strings.Split(addrs, ",") {
		a = strings.TrimSpace(a)
		if a == "" {
			continue
		}
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" || port == "" {
			return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "member address %q: want HOST:PORT", a)
		}
		if !slices.Contains(out, a) {
			out = append(out, a)
		}
	}
	switch {
	case len(out) == 0:
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "member address %q: want HOST:PORT[,HOST:PORT...]", addrs)
	case len(out) > maxEndpoints:
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "%d member addresses: at most %d", len(out), maxEndpoints)
	}
	return out, nil
}

// memberAddr is the address of the member the client's calls go to.
func (c *Client) memberAddr() string {
	c.ep.mu.Lock()
	defer c.ep.mu.Unlock()
	return c.ep.inUse
}

// Endpoints are the member addresses the client may fail over to, the
// one in use first: the live members as a member last listed them, then
// those given to Dial.
func (c *Client) Endpoints() []string {
	c.ep.mu.Lock()
	defer c.ep.mu.Unlock()
	out := []string{c.ep.inUse}
	for _, a := range append(slices.Clone(c.ep.known), c.ep.given...) {
		if !slices.Contains(out, a) && len(out) < maxEndpoints {
			out = append(out, a)
		}
	}
	return out
}

// use makes the member at addr, which answered r, the one calls go to,
// and learns the live members from r.
func (c *Client) use(addr string, r *messages.MemberHelloReply) {
	c.ep.mu.Lock()
	defer c.ep.mu.Unlock()
	c.ep.inUse = addr
	c.learnLocked(r)
}

func (c *Client) learnLocked(r *messages.MemberHelloReply) {
	if r.GetViewSame() {
		return // the view the client holds
	}
	c.ep.view = slices.Clone(r.GetView())
	addrs := r.GetViewAddresses()
	c.ep.known = slices.Clone(addrs[:min(len(addrs), maxEndpoints)])
	if c.ep.data == nil || len(c.ep.data) > 4*maxEndpoints {
		// Members that left do not pile up: a store named since is
		// in this reply or learned again from the next.
		c.ep.data = map[string]string{}
	}
	for _, n := range append([]*messages.NodeRef{r.GetStore()}, r.GetViewStores()...) {
		if n.GetDataAddress() != "" {
			c.ep.data[member.PIDKey(n.PID())] = n.GetDataAddress()
		}
	}
}

// helloFirst greets the addresses in order until one answers, sharing
// ctx's time among those left; it returns the last error if none does.
func (c *Client) helloFirst(ctx context.Context, addrs []string) (string, *messages.MemberHelloReply, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	var err error
	for i, a := range addrs {
		tctx, cancel := context.WithTimeout(ctx, tryTime(ctx, len(addrs)-i))
		var r *messages.MemberHelloReply
		r, err = c.hello(tctx, a)
		cancel()
		if err == nil {
			return a, r, nil
		}
		var e *messages.Error
		if ctx.Err() != nil || errors.As(err, &e) && e.GetCode() != messages.ErrorCode_UNAVAILABLE {
			// Another protocol version: the next member speaks it too.
			break
		}
	}
	return "", nil, err
}

// tryTime is one of n attempts' share of ctx's remaining time: an
// address that does not answer (a host that is down) must not use the
// time of those after it; one that refuses fails at once anyway.
func tryTime(ctx context.Context, n int) time.Duration {
	d, _ := ctx.Deadline()
	left := time.Until(d)
	return min(left, max(2*time.Second, left/time.Duration(max(n, 1))))
}

// failover moves the client from the store node failed (a request to it
// failed UNAVAILABLE) to a live member's, found by greeting the
// endpoints other than failed's address in order (the live members as
// last listed first). A client already moved by another call stays.
func (c *Client) failover(ctx context.Context, failed *actor.PID) (*actor.PID, error) {
	c.ep.moving.Lock()
	defer c.ep.moving.Unlock()
	if cur := c.Client.PID(); failed != nil && !cur.Equal(failed) {
		return cur, nil
	}
	var cands []string
	for _, a := range c.Endpoints() {
		if a != failed.GetAddress() {
			cands = append(cands, a)
		}
	}
	if len(cands) == 0 {
		return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "the member at %s failed and the client knows no other", failed.GetAddress())
	}
	a, r, err := c.helloFirst(ctx, cands)
	if err != nil {
		return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "the member at %s failed and none of %s answered: %v",
			failed.GetAddress(), strings.Join(cands, ","), err)
	}
	c.use(a, r)
	return r.GetStore().PID(), nil
}

// refresh asks the member in use whether the live members changed since
// the client last learned them (the digest of its view: an unchanged
// view is answered without it) and learns them if so; a member that does
// not answer is failed over from as liveHello does.
func (c *Client) refresh(ctx context.Context) {
	addr := c.memberAddr()
	c.ep.mu.Lock()
	var digest uint64
	if len(c.ep.view) > 0 {
		digest = memberview.Digest(c.ep.view)
	}
	c.ep.mu.Unlock()
	r, err := c.helloDigest(ctx, addr, digest)
	if err == nil {
		c.ep.mu.Lock()
		if c.ep.inUse == addr {
			c.learnLocked(r)
		}
		c.ep.mu.Unlock()
		return
	}
	_, _ = c.liveHello(ctx)
}

// liveHello is the handshake of the member in use, or, if it does not
// answer, of the first other endpoint that does (which the client then
// uses).
func (c *Client) liveHello(ctx context.Context) (*messages.MemberHelloReply, error) {
	addr := c.memberAddr()
	r, err := c.hello(ctx, addr)
	if err == nil {
		c.ep.mu.Lock()
		if c.ep.inUse == addr {
			c.learnLocked(r)
		}
		c.ep.mu.Unlock()
		return r, nil
	}
	if !errors.Is(err, messages.ErrUnavailable) {
		return nil, err
	}
	if _, ferr := c.failover(ctx, c.Client.PID()); ferr != nil {
		return nil, ferr
	}
	return c.hello(ctx, c.memberAddr())
}

// dialManagePort is Dial's error when addrs failed and one of them is a
// member's manage port (the seeds list those, so a user may well pass
// one): INVALID_ARGUMENT naming the member's address; err otherwise.
func dialManagePort(ctx context.Context, addrs []string, tlsCfg *tls.Config, err error) error {
	for _, a := range addrs {
		if member := manageMember(ctx, a, tlsCfg); member != "" {
			return messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT,
				"%s is the manage port of the member at %s: dial the member's address, %s", a, member, member)
		}
	}
	return err
}
