package directory

import (
	"crypto/rand"
	"fmt"
	"hash/fnv"
	"time"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/sirupsen/logrus"
	"google.golang.org/protobuf/proto"

	"github.com/hoplite-go/hoplite/messages"
)

// ShardIndex maps an object id to one of n shards (FNV-1a), the same way
// on every node.
func ShardIndex(id string, n int) int {
	h := fnv.New32a()
	_, _ = h.Write([]byte(id))
	return int(h.Sum32() % uint32(n))
}

// ShardConfig configures a directory shard actor.
type ShardConfig struct {
	Table TableConfig
	// TickInterval is how often parked requests are checked for their
	// deadline (default 20ms).
	TickInterval time.Duration
	Log          *logrus.Entry
	// NewCoordinator returns the props of the coordinator of one Reduce
	// (injected so the directory does not depend on the coordinator).
	NewCoordinator func(reduceID string, start *messages.StartReduce, requester *actor.PID) *actor.Props
}

type tick struct{}

// Shard is the actor that owns one LocationTable. Its state is soft: after
// a restart it starts empty and store nodes republish what they hold.
type Shard struct {
	cfg   ShardConfig
	table *LocationTable
	stop  chan struct{} // stops the ticker goroutine
}

// NewShardProps returns the props of a directory shard actor.
func NewShardProps(cfg ShardConfig) *actor.Props {
	if cfg.TickInterval <= 0 {
		cfg.TickInterval = 20 * time.Millisecond
	}
	if cfg.Log == nil {
		cfg.Log = logrus.NewEntry(logrus.StandardLogger())
	}
	return actor.PropsFromProducer(func() actor.Actor { return &Shard{cfg: cfg} })
}

// Receive implements actor.Actor.
func (s *Shard) Receive(ctx actor.Context) {
	now := time.Now()
	var out []Send
	switch m := ctx.Message().(type) {
	case *actor.Started:
		s.table = NewLocationTable(s.cfg.Table)
		// Our own ticker: protoactor's scheduler has a data race between
		// its cancel func and its timer goroutine.
		s.stop = make(chan struct{})
		go ticker(ctx.ActorSystem(), ctx.Self(), s.cfg.TickInterval, s.stop)
		s.cfg.Log.WithField("shard", ctx.Self().GetId()).Debug("directory shard started")
		return
	case *actor.Stopping, *actor.Restarting:
		if s.stop != nil {
			close(s.stop)
			s.stop = nil
		}
		return
	case tick:
		out = s.table.Tick(now)
	case *messages.CreateObject:
		out = s.table.Create(m, ctx.Sender())
	case *messages.PublishLocation:
		out = s.table.Publish(m)
	case *messages.UnpublishLocation:
		out = s.table.Unpublish(m)
	case *messages.Locate:
		out = s.table.Locate(m, ctx.Sender(), now)
	case *messages.CancelLocate:
		out = s.table.CancelLocate(m)
	case *messages.FetchDone:
		out = s.table.FetchDone(m)
	case *messages.FetchAborted:
		out = s.table.FetchAborted(m)
	case *messages.DeleteObject:
		out = s.table.Delete(m, ctx.Sender())
	case *messages.Subscribe:
		if ctx.Sender() == nil {
			s.dropped(ctx, "subscribe without a sender")
			return
		}
		out = s.table.Subscribe(m, ctx.Sender().String(), ctx.Sender())
	case *messages.Unsubscribe:
		if ctx.Sender() != nil {
			out = s.table.Unsubscribe(m, ctx.Sender().String())
		}
	case *messages.QueryObject:
		out = s.table.Query(m, ctx.Sender(), now)
	case *messages.StartReduce:
		s.startReduce(ctx, m)
		return
	case *messages.ReleaseTarget:
		out = s.table.Release(m)
	case actor.SystemMessage, actor.AutoReceiveMessage:
		return
	default:
		s.dropped(ctx, "unknown message")
		return
	}
	s.deliver(ctx, out)
}

// startReduce reserves the target and spawns the Reduce's coordinator as a
// child: the target's shard is where Gets of the target wait, and it
// rejects a second Reduce or a Put of the same target meanwhile.
func (s *Shard) startReduce(ctx actor.Context, m *messages.StartReduce) {
	target := m.GetReduce().GetTargetId()
	fail := func(err *messages.Error) {
		if ctx.Sender() != nil {
			ctx.Respond(&messages.ReduceReply{TargetId: target, Error: err})
		}
	}
	if s.cfg.NewCoordinator == nil {
		fail(messages.Errorf(messages.ErrorCode_UNAVAILABLE, "this directory shard runs no reduce coordinators"))
		return
	}
	var nonce [6]byte
	_, _ = rand.Read(nonce[:])
	id := fmt.Sprintf("%s#%x", target, nonce)
	if err := s.table.Reserve(target, id); err != nil {
		fail(err)
		return
	}
	ctx.Spawn(s.cfg.NewCoordinator(id, m, ctx.Sender()))
}

func ticker(system *actor.ActorSystem, self *actor.PID, every time.Duration, stop <-chan struct{}) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			system.Root.Send(self, tick{})
		case <-stop:
			return
		}
	}
}

func (s *Shard) deliver(ctx actor.Context, out []Send) {
	for _, o := range out {
		switch to := o.To.(type) {
		case *actor.PID:
			ctx.Send(to, o.Msg)
		case *messages.NodeRef:
			ctx.Send(to.PID(), o.Msg)
		case nil:
			// The request was a tell: nobody waits for the answer.
		default:
			s.cfg.Log.WithField("type", to).Error("directory shard: send to an unknown target kind")
		}
	}
}

func (s *Shard) dropped(ctx actor.Context, why string) {
	entry := s.cfg.Log.WithFields(logrus.Fields{"shard": ctx.Self().GetId(), "type": typeName(ctx.Message())})
	if ctx.Sender() != nil {
		entry = entry.WithField("from", ctx.Sender().String())
	}
	entry.Warn("directory shard dropped a message: " + why)
}

func typeName(m any) string {
	if pm, ok := m.(proto.Message); ok {
		return string(pm.ProtoReflect().Descriptor().FullName())
	}
	return "non-protobuf"
}
