package bench

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/clock"
	"github.com/hoplite-go/hoplite/messages"
)

// AgentName is the bench agent's actor name in a `hoplite node
// -experiments bench-agent`.
const AgentName = "bench-agent"

// StartAgent spawns the bench agent in member m: the testbed driver asks
// it (messages.Bench*) to generate objects and Put them from inside the
// node, and to verify the node's copies, so that bulk bytes never cross
// the driver's link.
func StartAgent(m *cluster.Member) (*actor.PID, error) {
	a := &agent{m: m, prepared: map[string][]byte{}}
	return m.System().Root.SpawnNamed(actorutil.Props(func() actor.Actor { return a }), AgentName)
}

type agent struct {
	m        *cluster.Member
	mu       sync.Mutex
	prepared map[string][]byte
	puts     int
}

func (a *agent) Receive(ctx actor.Context) {
	system, sender := ctx.ActorSystem(), ctx.Sender()
	respond := func(msg any) {
		if sender != nil {
			system.Root.Send(sender, msg)
		}
	}
	switch m := ctx.Message().(type) {
	case *messages.BenchHello:
		ctx.Respond(&messages.BenchHelloReply{MemberId: a.m.ID(), Members: int32(len(a.m.Members()))})
	case *messages.BenchPrepare:
		go func() {
			d := specOf(m.GetData())
			r := &messages.BenchPrepareReply{ObjectId: d.ID}
			if d.ID == "" || d.Size <= 0 || d.Size > 1<<40 {
				r.Error = messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "prepare %q of %d bytes", d.ID, d.Size)
			} else {
				data := Generate(d)
				a.mu.Lock()
				a.prepared[d.ID] = data
				a.mu.Unlock()
			}
			respond(r)
		}()
	case *messages.BenchPut:
		go func() { respond(a.put(m)) }()
	case *messages.BenchVerify:
		go func() { respond(a.verify(m)) }()
	case *messages.BenchEcho:
		ctx.Respond(&messages.BenchEchoReply{})
	case *messages.BenchRoundTrips:
		go func() { respond(a.roundTrips(system, m)) }()
	case *messages.BenchCPU:
		cpu, _ := processCPU() // getrusage(RUSAGE_SELF) does not fail
		ctx.Respond(&messages.BenchCPUReply{CpuNs: int64(cpu)})
	case *messages.BenchFetch:
		go func() { respond(a.fetch(m)) }()
	case *messages.BenchReduce:
		go func() { respond(a.reduce(m)) }()
	case *messages.BenchTargetID:
		ctx.Respond(targetID(m.GetPrefix(), a.m.ID(), len(a.m.Members()), a.m.ShardOwner))
	}
}

// targetID is the first id with prefix whose directory shard is on the
// member self (owner names an id's shard's member). NOT_FOUND: self hosts
// no shard (the testbed starts such a cluster again, testbedRun.open).
// UNAVAILABLE: with other members, self still holds every shard, the
// table a member starts with until its first placement (the testbed
// asks again).
func targetID(prefix, self string, members int, owner func(id string) string) *messages.BenchTargetIDReply {
	r := &messages.BenchTargetIDReply{}
	elsewhere := members <= 1 // alone, every shard is self's
	for n := 0; n < 1<<20 && (r.ObjectId == "" || !elsewhere); n++ {
		id := fmt.Sprintf("%s-%d", prefix, n)
		switch {
		case owner(id) != self:
			elsewhere = true
		case r.ObjectId == "":
			r.ObjectId = id
		}
	}
	switch {
	case !elsewhere:
		r.ObjectId = ""
		r.Error = messages.Errorf(messages.ErrorCode_UNAVAILABLE, "%s holds every directory shard of a cluster of %d members: its placement is not settled yet", self, members)
	case r.ObjectId == "":
		r.Error = messages.Errorf(messages.ErrorCode_NOT_FOUND, "no id with prefix %q has its shard on %s", prefix, self)
	}
	return r
}

func opContext(ms int64) (context.Context, context.CancelFunc) {
	if ms <= 0 {
		ms = 60_000
	}
	return context.WithTimeout(context.Background(), time.Duration(ms)*time.Millisecond)
}

func (a *agent) put(m *messages.BenchPut) *messages.BenchPutReply {
	r := &messages.BenchPutReply{ObjectId: m.GetObjectId()}
	a.mu.Lock()
	data, ok := a.prepared[m.GetObjectId()]
	delete(a.prepared, m.GetObjectId())
	a.mu.Unlock()
	if !ok {
		r.Error = messages.Errorf(messages.ErrorCode_NOT_FOUND, "put %q: not prepared", m.GetObjectId())
		return r
	}
	ctx, cancel := opContext(m.GetTimeoutMs())
	defer cancel()
	if at := m.GetAtUnixNano(); at > 0 {
		if err := sleepUntil(ctx, time.Unix(0, at)); err != nil {
			r.Error = messages.AsError(err)
			return r
		}
	}
	start := time.Now()
	err := a.m.Client().Put(ctx, m.GetObjectId(), data)
	r.StartedUnixNano, r.DoneUnixNano = start.UnixNano(), time.Now().UnixNano()
	if err != nil {
		r.Error = messages.AsError(err)
	}
	a.mu.Lock()
	a.puts++
	release := a.puts%16 == 0
	a.mu.Unlock()
	if release {
		// The store holds its own copy: give the generated buffers back
		// to the OS now and then, or a long run's peak grows.
		debug.FreeOSMemory()
	}
	return r
}

func (a *agent) verify(m *messages.BenchVerify) *messages.BenchVerifyReply {
	r := &messages.BenchVerifyReply{ObjectId: m.GetObjectId()}
	ctx, cancel := opContext(m.GetTimeoutMs())
	defer cancel()
	got, err := a.m.Client().GetReadOnly(ctx, m.GetObjectId())
	if err != nil {
		r.Error = messages.AsError(err)
		return r
	}
	var srcs []DataSpec
	for _, s := range m.GetSources() {
		srcs = append(srcs, specOf(s))
	}
	if err := Check(m.GetObjectId(), got, srcs); err != nil {
		r.Error = messages.Errorf(messages.ErrorCode_INTERNAL, "%s: %v", a.m.ID(), err)
	}
	return r
}

// fetch Gets an object into the agent's node at the scheduled time and
// times the Get by the node's clock.
func (a *agent) fetch(m *messages.BenchFetch) *messages.BenchFetchReply {
	r := &messages.BenchFetchReply{ObjectId: m.GetObjectId()}
	ctx, cancel := opContext(m.GetTimeoutMs())
	defer cancel()
	if err := sleepUntil(ctx, unixNano(m.GetAtUnixNano())); err != nil {
		r.Error = messages.AsError(err)
		return r
	}
	start := time.Now()
	err := prefetch(ctx, a.m.System().Root, a.m.StoreNode(), m.GetObjectId())
	done := time.Now()
	r.StartedUnixNano, r.DoneUnixNano = start.UnixNano(), done.UnixNano()
	if err != nil {
		r.Error = messages.AsError(err)
	}
	holdReply(ctx, start, done)
	return r
}

// minReplyHold and maxReplyHold bound how long an agent holds a timed
// call's reply.
const (
	minReplyHold = 10 * time.Millisecond
	maxReplyHold = time.Second
)

// replyAt is when an agent sends the reply of a timed call (a Get, an
// (All)Reduce, a floor's round trips) that ran from start to done: as long
// after done as the call took, at least minReplyHold and at most
// maxReplyHold. A reply sent while the other participants still work is
// a gRPC write here and a wake-up of the driver, on the CPUs the
// testbed's hosts share. Held as long as the Get took, a 1 KiB
// broadcast to 7 took 1.22 and 1.04 ms against 1.41 and 1.44 ms sent at
// once (21 reps each, alternating runs); but a receiver whose Get took
// 0.1 ms still replied while the slowest fetched for another millisecond,
// and perf samples of those windows put a tenth of the CPU in the
// replies' gRPC writes and the driver. The times are the node's clock at
// start and done either way; the peers' scripts, like this, report only
// after their timed calls.
func replyAt(start, done time.Time) time.Time {
	return done.Add(min(max(done.Sub(start), minReplyHold), maxReplyHold))
}

// holdReply waits until replyAt(start, done), or for ctx. A Go timer: a
// millisecond late costs nothing here.
func holdReply(ctx context.Context, start, done time.Time) {
	_ = clock.Wait(ctx, replyAt(start, done)) // ctx's end: reply now
}

// reduce calls a float32 SUM (All)Reduce on the agent's node at the
// scheduled time and times it by the node's clock.
func (a *agent) reduce(m *messages.BenchReduce) *messages.BenchReduceReply {
	r := &messages.BenchReduceReply{}
	ctx, cancel := opContext(m.GetTimeoutMs())
	defer cancel()
	if err := sleepUntil(ctx, unixNano(m.GetAtUnixNano())); err != nil {
		r.Error = messages.AsError(err)
		return r
	}
	c := a.m.Client()
	start := time.Now()
	var err error
	if m.GetAllReduce() {
		r.Reply, err = c.AllReduce(ctx, m.GetTargetId(), m.GetSourceIds(), int(m.GetNumObjects()), messages.ReduceOp_SUM, messages.DType_FLOAT32)
	} else {
		r.Reply, err = c.Reduce(ctx, m.GetTargetId(), m.GetSourceIds(), int(m.GetNumObjects()), messages.ReduceOp_SUM, messages.DType_FLOAT32)
	}
	done := time.Now()
	r.StartedUnixNano, r.DoneUnixNano = start.UnixNano(), done.UnixNano()
	if err != nil {
		r.Error = messages.AsError(err)
	}
	holdReply(ctx, start, done)
	return r
}

// maxRoundTrips bounds the goroutines one BenchRoundTrips starts (one per
// host of a testbed, which has at most 200).
const maxRoundTrips = 1024

// roundTrips makes one bare request and response to the agent at each
// address (or, data_plane, a bare control request on the data plane to
// its member), all at once, at the scheduled time, and times them.
func (a *agent) roundTrips(system *actor.ActorSystem, m *messages.BenchRoundTrips) *messages.BenchRoundTripsReply {
	r := &messages.BenchRoundTripsReply{}
	if n := len(m.GetAddresses()); n > maxRoundTrips {
		r.Error = messages.Errorf(messages.ErrorCode_INVALID_ARGUMENT, "%d round trips asked at once, at most %d", n, maxRoundTrips)
		return r
	}
	ctx, cancel := opContext(m.GetTimeoutMs())
	defer cancel()
	if err := sleepUntil(ctx, unixNano(m.GetAtUnixNano())); err != nil {
		r.Error = messages.AsError(err)
		return r
	}
	wait := time.Until(deadlineOf(ctx))
	var data []string
	if m.GetDataPlane() {
		byActor := map[string]string{}
		for _, n := range a.m.Members() {
			byActor[n.GetAddress()] = n.GetDataAddress()
		}
		for _, addr := range m.GetAddresses() {
			d := byActor[addr]
			if d == "" {
				r.Error = messages.Errorf(messages.ErrorCode_NOT_FOUND, "no member with a data address at %s", addr)
				return r
			}
			data = append(data, d)
		}
	}
	start := time.Now()
	errs := make([]error, len(m.GetAddresses()))
	var wg sync.WaitGroup
	for i, addr := range m.GetAddresses() {
		wg.Go(func() {
			if data != nil {
				errs[i] = a.m.PingData(ctx, data[i])
				return
			}
			_, errs[i] = system.Root.RequestFuture(actor.NewPID(addr, AgentName), &messages.BenchEcho{}, wait).Result()
		})
	}
	wg.Wait()
	done := time.Now()
	r.StartedUnixNano, r.DoneUnixNano = start.UnixNano(), done.UnixNano()
	if err := errors.Join(errs...); err != nil {
		r.Error = messages.AsError(err)
	}
	holdReply(ctx, start, done)
	return r
}

func deadlineOf(ctx context.Context) time.Time {
	d, _ := ctx.Deadline() // opContext always sets one
	return d
}

// unixNano is the time of a message's at_unix_nano (0: the zero time, at
// once).
func unixNano(ns int64) time.Time {
	if ns <= 0 {
		return time.Time{}
	}
	return time.Unix(0, ns)
}
