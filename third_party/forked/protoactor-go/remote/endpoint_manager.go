package remote

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/eventstream"
)

type endpointLazy struct {
	// valueFunc func() *endpoint
	unloaded atomic.Bool
	once     sync.Once
	endpoint atomic.Value
	manager  *endpointManager
	address  string
}

func NewEndpointLazy(em *endpointManager, address string) *endpointLazy {
	return &endpointLazy{
		manager: em,
		address: address,
	}
}

// connectTimeout bounds the wait for the endpoint supervisor's answer
// (Hoplite patch; see connect).
const connectTimeout = 10 * time.Second

func (el *endpointLazy) connect() {
	el.manager.remote.actorSystem.Logger().Debug("connecting to remote address", slog.String("address", el.address))
	em := el.manager
	system := em.remote.actorSystem
	// Hoplite patch: a bounded wait. A request still in the supervisor's
	// mailbox when it stops is dropped unanswered, and without a timeout
	// this sender, and every later one to the address (they wait on the
	// same once), would block for good. Spawning an endpoint takes
	// microseconds; a supervisor this late is stopping or wedged.
	rst, err := system.Root.RequestFuture(em.endpointSupervisor, el.address, connectTimeout).Result()
	// Hoplite patch: the supervisor may be gone (the system is shutting
	// down, or a node was killed under a test) and the future then
	// answers nil, which the unchecked assertion turned into a panic; and
	// as the once was spent, every later Get of this address panicked too,
	// outside any actor (removeEndpoint runs on the event stream), which
	// killed the process. Without an endpoint, Get returns nil and the
	// callers drop the message.
	ep, ok := rst.(*endpoint)
	if !ok {
		system.Logger().Debug("no endpoint for remote address", slog.String("address", el.address), slog.Any("error", err))
		return
	}
	el.Set(ep)
}

func (el *endpointLazy) Set(ep *endpoint) {
	el.endpoint.Store(ep)
}

// Get returns the endpoint, connecting the first time; nil if that
// connect failed (Hoplite patch: see connect).
func (el *endpointLazy) Get() *endpoint {
	el.once.Do(el.connect)
	ep, _ := el.endpoint.Load().(*endpoint)
	return ep
}

type endpoint struct {
	writer  *actor.PID
	watcher *actor.PID
}

func (ep *endpoint) Address() string {
	return ep.watcher.GetAddress()
}

type endpointManager struct {
	connections               *sync.Map
	remote                    *Remote
	endpointSub               *eventstream.Subscription
	endpointSupervisor        *actor.PID
	activator                 *actor.PID
	stopped                   atomic.Bool // Hoplite patch: read by every sender, written by stop
	endpointReaderConnections *sync.Map
	// Hoplite patch: streamCtx is the context of every endpoint writer's
	// stream, canceled when the manager stops. A writer waiting for a
	// peer's answer to its connect request (a peer whose reader is
	// suspended because it is shutting down answers nothing) then stops
	// at once; upstream's writer waited without end, so stopping the
	// endpoint supervisor timed out after 10 s.
	streamCtx    context.Context
	cancelStream context.CancelFunc
}

func newEndpointManager(r *Remote) *endpointManager {
	ctx, cancel := context.WithCancel(context.Background())
	return &endpointManager{
		connections:               &sync.Map{},
		remote:                    r,
		endpointReaderConnections: &sync.Map{},
		streamCtx:                 ctx,
		cancelStream:              cancel,
	}
}

func (em *endpointManager) start() {
	eventStream := em.remote.actorSystem.EventStream
	em.endpointSub = eventStream.
		SubscribeWithPredicate(em.endpointEvent, func(m interface{}) bool {
			switch m.(type) {
			case *EndpointTerminatedEvent, *EndpointConnectedEvent:
				return true
			}
			return false
		})
	em.startActivator()
	em.startSupervisor()

	if err := em.waiting(3 * time.Second); err != nil {
		panic(err)
	}

	em.remote.Logger().Info("Started EndpointManager")
}

func (em *endpointManager) waiting(timeout time.Duration) error {
	ctx := em.remote.actorSystem.Root
	if _, err := ctx.RequestFuture(em.activator, &Ping{}, timeout).Result(); err != nil {
		return err
	}
	return nil
}

func (em *endpointManager) stop() {
	em.stopped.Store(true)
	if em.cancelStream != nil {
		em.cancelStream()
	}
	r := em.remote
	r.actorSystem.EventStream.Unsubscribe(em.endpointSub)
	if err := em.stopActivator(); err != nil {
		em.remote.Logger().Error("stop endpoint activator failed", slog.Any("error", err))
	}
	if err := em.stopSupervisor(); err != nil {
		em.remote.Logger().Error("stop endpoint supervisor failed", slog.Any("error", err))
	}
	// Hoplite patch: connections is left as it is (an endpoint event
	// delivered meanwhile still reads it: upstream's nil write raced), and
	// a reader's channel is never closed, so telling it never panics.
	em.endpointSub = nil
	if em.endpointReaderConnections != nil {
		em.endpointReaderConnections.Range(func(key interface{}, value interface{}) bool {
			channel := value.(chan bool)
			select {
			case channel <- true:
			default: // it already knows: its stream ended
			}
			em.endpointReaderConnections.Delete(key)
			return true
		})
	}
	em.remote.Logger().Info("Stopped EndpointManager")
}

func (em *endpointManager) startActivator() {
	p := newActivatorActor(em.remote)
	props := actor.PropsFromProducer(p, actor.WithGuardian(actor.RestartingSupervisorStrategy()))
	pid, err := em.remote.actorSystem.Root.SpawnNamed(props, "activator")
	if err != nil {
		panic(err)
	}
	em.activator = pid
}

func (em *endpointManager) stopActivator() error {
	return em.remote.actorSystem.Root.StopFuture(em.activator).Wait()
}

func (em *endpointManager) startSupervisor() {
	r := em.remote
	props := actor.PropsFromProducer(func() actor.Actor {
		return newEndpointSupervisor(r)
	},
		actor.WithGuardian(actor.RestartingSupervisorStrategy()),
		actor.WithSupervisor(actor.RestartingSupervisorStrategy()),
		actor.WithDispatcher(actor.NewSynchronizedDispatcher(300)))

	pid, err := r.actorSystem.Root.SpawnNamed(props, "EndpointSupervisor")
	if err != nil {
		panic(err)
	}
	em.endpointSupervisor = pid
}

func (em *endpointManager) stopSupervisor() error {
	r := em.remote
	return r.actorSystem.Root.StopFuture(em.endpointSupervisor).Wait()
}

func (em *endpointManager) endpointEvent(evn interface{}) {
	switch msg := evn.(type) {
	case *EndpointTerminatedEvent:
		em.remote.Logger().Debug("EndpointManager received endpoint terminated event, removing endpoint", slog.Any("message", evn))
		em.removeEndpoint(msg)
		// Hoplite patch: the requests still waiting on the address are
		// answered (pending_requests_hoplite.go).
		em.remote.pending.terminated(msg.Address)
	case *EndpointConnectedEvent:
		if endpoint := em.ensureConnected(msg.Address); endpoint != nil {
			em.remote.actorSystem.Root.Send(endpoint.watcher, msg)
		}
	}
}

func (em *endpointManager) remoteTerminate(msg *remoteTerminate) {
	if em.stopped.Load() {
		return
	}
	address := msg.Watchee.Address
	if endpoint := em.ensureConnected(address); endpoint != nil {
		em.remote.actorSystem.Root.Send(endpoint.watcher, msg)
	}
}

func (em *endpointManager) remoteWatch(msg *remoteWatch) {
	if em.stopped.Load() {
		return
	}
	address := msg.Watchee.Address
	if endpoint := em.ensureConnected(address); endpoint != nil {
		em.remote.actorSystem.Root.Send(endpoint.watcher, msg)
	}
}

func (em *endpointManager) remoteUnwatch(msg *remoteUnwatch) {
	if em.stopped.Load() {
		return
	}
	address := msg.Watchee.Address
	if endpoint := em.ensureConnected(address); endpoint != nil {
		em.remote.actorSystem.Root.Send(endpoint.watcher, msg)
	}
}

func (em *endpointManager) remoteDeliver(msg *remoteDeliver) {
	if em.stopped.Load() {
		// send to deadletter
		em.remote.actorSystem.EventStream.Publish(&actor.DeadLetterEvent{
			PID:     msg.target,
			Message: msg.message,
			Sender:  msg.sender,
		})
		return
	}
	address := msg.target.Address
	endpoint, lazy := em.ensureConnectedLazy(address)
	if endpoint == nil {
		em.remote.actorSystem.EventStream.Publish(&actor.DeadLetterEvent{
			PID:     msg.target,
			Message: msg.message,
			Sender:  msg.sender,
		})
		return
	}
	// Hoplite patch: remembered until answered (pending_requests_hoplite.go).
	em.remote.pending.sent(msg.target, msg.message, msg.sender)
	em.remote.actorSystem.Root.Send(endpoint.writer, msg)
	// Hoplite patch: an endpoint removed by now may have been removed
	// before this message reached its writer, which then stopped without
	// it (removeEndpoint marks the endpoint before it tells the writer):
	// the request is answered here unless something answered it already.
	if lazy.unloaded.Load() {
		em.remote.pending.handedToRemoved(msg.target, msg.message, msg.sender)
	}
}

func (em *endpointManager) ensureConnected(address string) *endpoint {
	ep, _ := em.ensureConnectedLazy(address)
	return ep
}

// ensureConnectedLazy is ensureConnected, also returning the lazy
// endpoint the endpoint came from (Hoplite patch: remoteDeliver reads
// whether it was removed).
func (em *endpointManager) ensureConnectedLazy(address string) (*endpoint, *endpointLazy) {
	e, ok := em.connections.Load(address)
	if !ok {
		el := NewEndpointLazy(em, address)
		e, _ = em.connections.LoadOrStore(address, el)
	}
	el := e.(*endpointLazy)
	ep := el.Get()
	if ep == nil {
		// Hoplite patch: a connect that failed is not kept, so that the
		// next message to the address tries again.
		em.connections.CompareAndDelete(address, el)
	}
	return ep, el
}

// func (em *endpointManager) ensureConnected(address string) *endpoint {
// 	e, ok := em.connections.Load(address)
// 	if !ok {
// 		el := &endpointLazy{}
// 		var once sync.Once
// 		el.valueFunc = func() *endpoint {
// 			once.Do(func() {
// 				rst, _ := em.remote.actorSystem.Root.RequestFuture(em.endpointSupervisor, address, -1).Result()
// 				ep := rst.(*endpoint)
// 				el.valueFunc = func() *endpoint {
// 					return ep
// 				}
// 			})
// 			return el.valueFunc()
// 		}
// 		e, _ = em.connections.LoadOrStore(address, el)
// 	}

// 	el := e.(*endpointLazy)
// 	return el.valueFunc()
// }

func (em *endpointManager) removeEndpoint(msg *EndpointTerminatedEvent) {
	v, ok := em.connections.Load(msg.Address)
	if ok {
		le := v.(*endpointLazy)
		if le.unloaded.CompareAndSwap(false, true) {
			em.connections.Delete(msg.Address)
			ep := le.Get()
			if ep == nil {
				return // its connect failed: no writer or watcher to stop (Hoplite patch)
			}
			em.remote.Logger().Debug("Sending EndpointTerminatedEvent to EndpointWatcher and EndpointWriter", slog.String("address", msg.Address))
			em.remote.actorSystem.Root.Send(ep.watcher, msg)
			em.remote.actorSystem.Root.Send(ep.writer, msg)
		}
	}
}

type endpointSupervisor struct {
	remote *Remote
	// Hoplite patch: set once the supervisor is stopping; it then spawns
	// no endpoint. Such an endpoint's writer and watcher were never
	// stopped: the supervisor sends Stop only to the children it has when
	// it starts stopping, and the manager, which has already stopped
	// listening for endpoint events by then, does not stop them either.
	// The supervisor then waited for them without end, and Shutdown gave up
	// after 10 s. A request still reaches a stopping supervisor: its sender
	// saw the manager running a moment before, or the request was queued
	// behind the Stop, which as a system message is handled first.
	stopping bool
}

func newEndpointSupervisor(remote *Remote) actor.Actor {
	return &endpointSupervisor{
		remote: remote,
	}
}

func (state *endpointSupervisor) Receive(ctx actor.Context) {
	if _, ok := ctx.Message().(*actor.Stopping); ok {
		state.stopping = true
	}
	if address, ok := ctx.Message().(string); ok {
		if state.stopping {
			// Hoplite patch: no endpoint, so the requester's Get returns
			// nil and the message is dead-lettered (see connect).
			ctx.Logger().Debug("EndpointSupervisor stopping, no endpoint spawned", slog.String("address", address))
			ctx.Respond(nil)
			return
		}
		ctx.Logger().Debug("EndpointSupervisor spawning EndpointWriter and EndpointWatcher", slog.String("address", address))
		e := &endpoint{
			writer:  state.spawnEndpointWriter(state.remote, address, ctx),
			watcher: state.spawnEndpointWatcher(state.remote, address, ctx),
		}
		ctx.Logger().Debug("id", slog.String("ewr", e.writer.Id), slog.String("ewa", e.watcher.Id))
		ctx.Respond(e)
	}
}

func (state *endpointSupervisor) HandleFailure(actorSystem *actor.ActorSystem, supervisor actor.Supervisor, child *actor.PID, rs *actor.RestartStatistics, reason interface{}, message interface{}) {
	actorSystem.Logger().Debug("EndpointSupervisor handling failure", slog.Any("reason", reason), slog.Any("message", message))
	// use restart will cause a start loop, just stop it for now
	// supervisor.RestartChildren(child)

	// TODO: an extra stop is sent to the deadletter caused by EndpointTerminatedEvent
	supervisor.StopChildren(child)
}

func (state *endpointSupervisor) spawnEndpointWriter(remote *Remote, address string, ctx actor.Context) *actor.PID {
	props := actor.
		PropsFromProducer(endpointWriterProducer(remote, address, remote.config),
			actor.WithMailbox(endpointWriterMailboxProducer(remote.config.EndpointWriterBatchSize, remote.config.EndpointWriterQueueSize,
				remote.config.MaxQueuedToRemote, func(rd *remoteDeliver, queued int64) { remote.queueFull(address, rd, queued) })))
	pid := ctx.Spawn(props)
	return pid
}

func (state *endpointSupervisor) spawnEndpointWatcher(remote *Remote, address string, ctx actor.Context) *actor.PID {
	props := actor.
		PropsFromProducer(newEndpointWatcher(remote, address))
	pid := ctx.Spawn(props)
	return pid
}
