package member

import (
	"context"

	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/messages"
)

// An inline AllReduce's coordinator pushes the result to its
// participants with their Gets (messages.Get.pushed). Across members the
// push rides on the data plane as a control request, like a Locate: bare
// fan-outs of actor requests to seven members cost two to three times
// the same fan-outs of data-plane requests on the testbed (the actor-rtt
// and data-rtt floors of a 1 KiB reduce); within a whole 1 KiB AllReduce
// the difference is smaller, but still there (docs/benchmarks.md).

// servePush hands a coordinator's push of an inline AllReduce result
// (messages.ControlPush) to this member's store node, as the actor
// message it would otherwise have been, and returns the node's GetReply.
// Only pushes come this way: a Get that may wait for an object stays an
// actor message.
func (m *Member) servePush(ctx context.Context, req []byte) ([]byte, error) {
	b, code, err := m.pushToStore(ctx, req)
	m.metrics.pushes.WithLabelValues(code).Inc()
	return b, err
}

// pushToStore is servePush, with the result for the metrics.
func (m *Member) pushToStore(ctx context.Context, req []byte) (b []byte, result string, err error) {
	defer func() {
		if err != nil {
			result = messages.AsError(err).GetCode().String()
		}
	}()
	var get messages.Get
	if err := proto.Unmarshal(req, &get); err != nil {
		return nil, "", messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "malformed push on the data plane: %v", err)
	}
	if !get.GetPrefetch() || !get.GetPushed() {
		return nil, "", messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "a Get of %q on the data plane that pushes nothing", get.GetObjectId())
	}
	res, err := actorutil.Request(ctx, m.system.Root, m.storePID.Load(), &get)
	if err != nil {
		return nil, "", err
	}
	reply, ok := res.(*messages.GetReply)
	if !ok {
		return nil, "", messages.Errorf(messages.ErrorCode_INTERNAL, "store node answered a push with %T", res)
	}
	b, err = proto.Marshal(reply)
	if err != nil {
		return nil, "", messages.Errorf(messages.ErrorCode_INTERNAL, "encode GetReply: %v", err)
	}
	result = "ok"
	if e := reply.GetError(); e != nil {
		result = e.GetCode().String()
	}
	return b, result, nil
}

// pushAt is where a coordinator's push to node goes on the data plane:
// its member's data address, or "" to send it as an actor message (a node
// on this member, one without a data address, or the actor-locates experiment).
func (m *Member) pushAt(node *messages.NodeRef) string {
	if m.cfg.exp.ActorLocates || node.GetAddress() == m.system.Address() {
		return ""
	}
	return node.GetDataAddress()
}

// callData sends a control request on this member's data plane.
func (m *Member) callData(ctx context.Context, addr string, kind byte, req []byte) ([]byte, error) {
	if m.data == nil {
		return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "member %s: no data plane yet", m.id)
	}
	return m.data.Call(ctx, addr, kind, req)
}
