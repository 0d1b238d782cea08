package member

import (
	"context"
	"errors"
	"strings"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/internal/actors/shardactor"
	"github.com/hoplite-go/hoplite/internal/actors/storeactor"
	"github.com/hoplite-go/hoplite/internal/directory"
	"github.com/hoplite-go/hoplite/internal/transport"
	"github.com/hoplite-go/hoplite/messages"
)

// locator is how this member's store node asks a directory shard
// (storeactor.Locator): in process when the shard is on this member (an
// actor message in process is cheaper than any socket), on the data
// plane (data) to another member whose data address this member knows,
// else, and always with the actor-locates experiment, as an actor message. Every answer
// comes back as the call's result.
func (m *Member) locator(data transport.Caller) storeactor.Locator {
	return func(ctx context.Context, pid *actor.PID, l *messages.Locate) (*messages.LocateReply, error) {
		if !m.cfg.exp.ActorLocates && pid.GetAddress() == m.system.Address() {
			return shardactor.LocateHere(ctx, m.system.Root, pid, l)
		}
		if addr := m.locateAt(pid); addr != "" {
			switch via, self := m.deputyFor(pid); {
			case self:
				return m.deputy.Locate(ctx, addr, l)
			case via != "":
				r, err := shardactor.CallLocateVia(ctx, data, via, l)
				if err == nil || ctx.Err() != nil {
					return r, err
				}
				// The deputy failed it (gone, of an older version, or the
				// shard moved under it): straight to the shard.
				m.log.WithFields(logrus.Fields{"deputy": via, "object": l.GetObjectId(), "error": err}).Debug("Locate deputy failed; asking the shard")
			}
			return shardactor.CallLocate(ctx, data, addr, l)
		}
		return shardactor.RequestLocate(ctx, m.system.Root, pid, l)
	}
}

// creator is how this member's fast Puts register with a directory shard
// (storeactor.Creator): as a Locate goes (locator), an actor request to a
// shard on this member or one whose member's data address is not known,
// a control request on the data plane (data) to another member's, when
// it fits in one (an object near the inline limit does not).
func (m *Member) creator(data transport.Caller) storeactor.Creator {
	return func(ctx context.Context, pid *actor.PID, c *messages.CreateObject) (*messages.CreateObjectReply, error) {
		if addr := m.locateAt(pid); addr != "" && proto.Size(c) <= transport.MaxControlRequest {
			r, err := shardactor.CallCreate(ctx, data, addr, c)
			if !errors.Is(err, messages.ErrInvalidArgument) {
				return r, err
			}
			// A member that does not know the kind refuses it (one built
			// before it): the shard is asked as an actor.
		}
		return shardactor.RequestCreate(ctx, m.system.Root, pid, c)
	}
}

// deleter carries a store node's DeleteObject to a shard on another
// member on the data plane; storeactor.ErrAskAsActor where it cannot (a
// shard on this member, a member whose data address is not known yet, or
// one built before the kind, which refuses it): the node then asks the
// shard with an actor request.
func (m *Member) deleter(data transport.Caller) storeactor.Deleter {
	return func(ctx context.Context, pid *actor.PID, d *messages.DeleteObject) (*messages.DeleteObjectReply, error) {
		addr := m.locateAt(pid)
		if addr == "" {
			return nil, storeactor.ErrAskAsActor
		}
		r, err := shardactor.CallDelete(ctx, data, addr, d)
		if errors.Is(err, messages.ErrInvalidArgument) {
			return nil, storeactor.ErrAskAsActor
		}
		return r, err
	}
}

// locateAt is where a Locate to shard goes on the data plane: its
// member's data address, or "" for a shard on this member (an actor
// message in process is cheaper than any socket) or on a member whose
// data address this member does not know yet.
//
// The data address is that of the incarnation the shard's PID names: a
// PID of an incarnation gone from that address (a table this member has
// not updated yet) goes as an actor message, to the dead letters there,
// rather than to the data plane of the member at its address now.
func (m *Member) locateAt(shard *actor.PID) string {
	if m.cfg.exp.ActorLocates || shard == nil || shard.GetAddress() == m.system.Address() {
		return ""
	}
	idx := m.peers.Load()
	if idx == nil {
		return ""
	}
	ref := idx.storeOf[idx.byAddr[shard.GetAddress()]]
	if root, _, _ := strings.Cut(shard.GetId(), "/"); ref == nil || root != RootOf(ref) {
		return ""
	}
	return ref.GetDataAddress()
}

// controlSource is what a member serves on the data plane: its store's
// objects, and the Locates of other members for the shards it hosts.
type controlSource struct {
	countingSource
	m *Member
}

// TryControl implements transport.QuickController: a ping, and a Locate
// of an inline object its shard publishes (shardactor.TryServeLocate),
// are answered at once.
func (s *controlSource) TryControl(kind byte, req, scratch []byte) ([]byte, bool, error) {
	m := s.m
	switch kind {
	case messages.ControlPing:
		return nil, true, nil
	case messages.ControlLocate:
		if m.table.Load() == nil || m.storePID.Load() == nil {
			return nil, false, nil // Control says why
		}
		b, ok := shardactor.TryServeLocate(m.system, m.shardFor, req, scratch)
		if ok {
			m.metrics.locatesOK.Inc()
		}
		return b, ok, nil
	}
	return nil, false, nil
}

// countLocate counts a Locate served on the data plane, by its result.
func (m *Member) countLocate(err error) {
	if err == nil {
		m.metrics.locatesOK.Inc()
		return
	}
	m.metrics.locates.WithLabelValues(messages.AsError(err).GetCode().String()).Inc()
}

// Control implements transport.Controller.
func (s *controlSource) Control(ctx context.Context, kind byte, req []byte) ([]byte, error) {
	if b, ok, err := s.TryControl(kind, req, nil); ok {
		return b, err // on a transport that does not try it first
	}
	m := s.m
	if kind == messages.ControlPing {
		return nil, nil
	}
	if kind == messages.ControlPush {
		return m.servePush(ctx, req)
	}
	if kind == messages.ControlSubscribe {
		return m.serveSubscribe(ctx, req)
	}
	if kind == messages.ControlLive {
		return m.serveLive(req)
	}
	if kind == messages.ControlLocateVia || kind == messages.ControlLocateBatch {
		if m.table.Load() == nil || m.storePID.Load() == nil {
			return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "member %s is still starting", m.id)
		}
		if kind == messages.ControlLocateBatch {
			return shardactor.ServeLocateBatch(m.system, m.shardFor, req)
		}
		return m.serveLocateVia(ctx, req)
	}
	if kind == messages.ControlCreate || kind == messages.ControlDelete {
		if m.table.Load() == nil {
			return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "member %s is still starting", m.id)
		}
		if kind == messages.ControlDelete {
			return shardactor.ServeDelete(ctx, m.system.Root, m.shardFor, req)
		}
		return shardactor.ServeCreate(ctx, m.system.Root, m.shardFor, req)
	}
	if kind != messages.ControlLocate {
		return nil, messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "unknown control request kind %q", kind)
	}
	if m.table.Load() == nil || m.storePID.Load() == nil {
		return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "member %s is still starting", m.id)
	}
	b, err := shardactor.ServeLocate(ctx, m.system.Root, m.shardFor, req)
	m.countLocate(err)
	return b, err
}

// subscribeAt is the data address of the member hosting shard, to which a
// coordinator's Subscribe goes as a control request; "" sends it as an
// actor message (a shard on this member, or one whose data address this
// member does not know yet).
func (m *Member) subscribeAt(shard *actor.PID) string {
	if m.cfg.exp.ActorSubscribes {
		return ""
	}
	return m.locateAt(shard)
}

// serveSubscribe hands a Reduce coordinator's Subscribe on the data plane
// to the source's shard here (see shardactor.ServeSubscribe).
func (m *Member) serveSubscribe(ctx context.Context, req []byte) ([]byte, error) {
	if m.table.Load() == nil {
		return nil, messages.Errorf(messages.ErrorCode_UNAVAILABLE, "member %s is still starting", m.id)
	}
	b, err := shardactor.ServeSubscribe(ctx, m.system.Root, m.shardFor, req)
	result := "sent"
	switch {
	case err != nil:
		result = messages.AsError(err).GetCode().String()
	case len(b) > 0:
		result = "inline" // an empty SubscribeAnswer encodes to nothing
	}
	m.metrics.subscribes.WithLabelValues(result).Inc()
	return b, err
}

func (m *Member) shardFor(id string) *actor.PID {
	t := *m.table.Load()
	return t[directory.ShardIndex(id, len(t))]
}

// revokePeer is where a member's broadcaster lives (its incarnation's).
func (m *Member) revokePeer(id string) *actor.PID { return m.peerPID(id, revokeName) }
