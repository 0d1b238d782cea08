package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"
	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/remote"

	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/fingerprint"
	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/loopback"
	"github.com/hoplite-go/hoplite/messages"
)

// routesCluster is what `hoplite bench routes` runs on: this process's
// member M, the `hoplite node` processes P and Q, a Dial client of each,
// and an actor system of no member's for the remote actor.
type routesCluster struct {
	o      *RoutesOptions
	m      *cluster.Member
	nodes  [2]*routesNode // P, Q
	dial   [2]*cluster.Client
	system *actor.ActorSystem // the remote actor's
	remote *remote.Remote
	// actorDial is a Dial client of P made from system, the remote
	// actor's data path.
	actorDial *cluster.Client
	dir       string // the CLI's file
	file      string
	data      []byte // the object's bytes, every route's
	want      uint64 // their fingerprint
	dst       []byte // every GetInto's and the CLI get's buffer
	// at0 is what the kernel counted for the processes when the timed
	// section began, counted what it counted in it (begin, end).
	at0, counted procCounters
}

// begin starts an operation's timed section.
func (c *routesCluster) begin() time.Time {
	c.at0 = c.counters()
	return time.Now()
}

// end ends the timed section begun at t0: its time, and what the kernel
// counted in it for the processes (c.counted).
func (c *routesCluster) end(t0 time.Time) time.Duration {
	d := time.Since(t0)
	c.counted = c.counters().sub(c.at0)
	return d
}

// counters are this process's, P's, Q's and the waited-for CLI
// processes' minor faults, and the first three's threads' time waiting
// for a CPU (zero where /proc has none).
func (c *routesCluster) counters() procCounters {
	sum, _ := readProcCounters(os.Getpid())
	for _, n := range c.nodes {
		if n != nil && n.cmd.Process != nil {
			pc, _ := readProcCounters(n.cmd.Process.Pid)
			sum = sum.add(pc)
		}
	}
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru) == nil {
		sum.minflt += ru.Minflt
	}
	return sum
}

// routesNode is one `hoplite node` process.
type routesNode struct {
	cmd     *exec.Cmd
	exited  chan struct{}
	stderr  *tailBuffer
	started chan []string // its start line's fields
	id      string
	address string
	store   *actor.PID
}

func openRoutes(ctx context.Context, o *RoutesOptions) (c *routesCluster, err error) {
	c = &routesCluster{o: o}
	defer func() {
		if err != nil {
			c.close()
		}
	}()
	ports, err := loopback.Ports(7)
	if err != nil {
		return nil, err
	}
	addr := func(p int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)) }
	seeds := []string{addr(ports[1]), addr(ports[3]), addr(ports[5])}
	// Each member holds at most the object four times over (P: the
	// baseline's source, an embedded Get's, a Put's), and room besides.
	capacity := 4*o.Size + 256<<20
	for i := range c.nodes {
		n, err := startRoutesNode(o.Binary, addr(ports[2+2*i]), ports[3+2*i], seeds, capacity)
		if err != nil {
			return c, err
		}
		c.nodes[i] = n
	}
	sctx, cancel := context.WithTimeout(ctx, opsStartTimeout)
	defer cancel()
	c.m, err = cluster.Join(sctx, cluster.MemberConfig{Bind: addr(ports[0]), ManagePort: ports[1], Seeds: seeds,
		Capacity: capacity, DefaultTimeout: o.OpTimeout, Log: o.Log})
	if err != nil {
		return c, err
	}
	for _, n := range c.nodes {
		select {
		case f := <-n.started:
			n.id, n.address = f[1], f[2]
		case <-n.exited:
			return c, fmt.Errorf("a node exited before it joined: %s", n.stderr)
		case <-sctx.Done():
			return c, fmt.Errorf("a node did not join within %v: %s", opsStartTimeout, n.stderr)
		}
	}
	if err := c.m.WaitMembers(sctx, 3); err != nil {
		return c, err
	}
	for _, ref := range c.m.Members() {
		for _, n := range c.nodes {
			if ref.GetNodeId() == n.id {
				n.store = actor.NewPID(ref.GetAddress(), ref.GetActorId())
			}
		}
	}
	for i, n := range c.nodes {
		if n.store == nil {
			return c, fmt.Errorf("node %s is not among the members", n.id)
		}
		if c.dial[i], err = cluster.Dial(sctx, n.address, cluster.WithTimeout(o.OpTimeout)); err != nil {
			return c, err
		}
		// Shards are placed over the members a member sees: both nodes
		// must see all three before the first Put.
		for {
			ms, err := c.dial[i].Members(sctx)
			if err == nil && len(ms) == 3 {
				break
			}
			select {
			case <-sctx.Done():
				return c, fmt.Errorf("node %s does not see the three members within %v (last: %d, %v)", n.id, opsStartTimeout, len(ms), err)
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	port, err := loopback.Ports(1)
	if err != nil {
		return c, err
	}
	c.system = actor.NewActorSystem(actor.WithLoggerFactory(func(*actor.ActorSystem) *slog.Logger {
		return slog.New(slog.DiscardHandler)
	}))
	c.remote = remote.NewRemote(c.system, cluster.RemoteConfig("127.0.0.1", port[0], nil, nil))
	if err := startRemoteSystem(c.remote); err != nil {
		return c, err
	}
	if c.actorDial, err = cluster.Dial(sctx, c.nodes[0].address, cluster.WithActorSystem(c.system), cluster.WithTimeout(o.OpTimeout)); err != nil {
		return c, err
	}
	if c.dir, err = os.MkdirTemp("", "hoplite-bench-routes-"); err != nil {
		return c, err
	}
	c.data = Generate(DataSpec{ID: "routes", Size: o.Size})
	c.want = fingerprint.Of(c.data)
	c.dst = make([]byte, o.Size)
	if c.file, err = writeTemp(c.dir, c.data); err != nil {
		return c, err
	}
	return c, nil
}

// startRemoteSystem starts r, whose failure to listen is a panic.
func startRemoteSystem(r *remote.Remote) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("start the remote actor's system: %v", p)
		}
	}()
	r.Start()
	return nil
}

func startRoutesNode(binary, bind string, manage int, seeds []string, capacity int64) (*routesNode, error) {
	n := &routesNode{exited: make(chan struct{}), stderr: &tailBuffer{max: 16 << 10}, started: make(chan []string, 1)}
	n.cmd = exec.Command(binary, "node", "-bind", bind, "-manage-port", strconv.Itoa(manage),
		"-seeds", strings.Join(seeds, ","), "-capacity", strconv.FormatInt(capacity, 10), "-log-level", "error")
	n.cmd.Stderr = n.stderr
	// Killed with this process if it dies first.
	n.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out, err := n.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := n.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s node: %w", binary, err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if f := startLine.FindStringSubmatch(sc.Text()); f != nil {
				select {
				case n.started <- f:
				default:
				}
			}
		}
		_ = n.cmd.Wait()
		close(n.exited)
	}()
	return n, nil
}

// close stops the nodes first (a graceful leave on SIGTERM; killed if
// one takes longer than 15 s), then the clients and this member.
func (c *routesCluster) close() {
	for _, n := range c.nodes {
		if n != nil && n.cmd.Process != nil {
			_ = n.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, n := range c.nodes {
		if n == nil || n.cmd.Process == nil {
			continue
		}
		select {
		case <-n.exited:
		case <-time.After(15 * time.Second):
			_ = n.cmd.Process.Kill()
			<-n.exited
		}
	}
	for _, d := range c.dial {
		if d != nil {
			d.Close()
		}
	}
	if c.actorDial != nil {
		c.actorDial.Close()
	}
	if c.remote != nil {
		c.remote.Shutdown(true)
	}
	if c.m != nil {
		c.m.Stop()
	}
	if c.dir != "" {
		_ = os.RemoveAll(c.dir)
	}
}

// ops are the timed operations of one round, in the order they run: the
// baseline first, then the Gets, the Puts, and the CLI's start.
func (c *routesCluster) ops() []routeOp {
	p, q := c.dial[0], c.dial[1]
	size := c.o.Size
	src := func(rep int) string { return fmt.Sprintf("routes-src-%d", rep) }
	// get times one Get of a new object created on P (untimed): got
	// returns the bytes it got, checked after the timed section.
	getNew := func(name string, get func(ctx context.Context, id string) ([]byte, error)) func(ctx context.Context, rep int) (time.Duration, error) {
		return func(ctx context.Context, rep int) (time.Duration, error) {
			id := fmt.Sprintf("routes-get-%s-%d", name, rep)
			if err := p.Put(ctx, id, c.data); err != nil {
				return 0, fmt.Errorf("put %s on P: %w", id, err)
			}
			defer func() { _ = p.Delete(context.WithoutCancel(ctx), id) }()
			clear(c.dst) // for the GetIntos: a stale buffer cannot pass for the bytes
			t0 := c.begin()
			got, err := get(ctx, id)
			d := c.end(t0)
			if err != nil {
				return 0, err
			}
			return d, checkBytes(name+" get", got, size, c.want)
		}
	}
	// getSrc times one Get of the round's source object, which P holds.
	getSrc := func(name string, get func(ctx context.Context, id string) ([]byte, error)) func(ctx context.Context, rep int) (time.Duration, error) {
		return func(ctx context.Context, rep int) (time.Duration, error) {
			clear(c.dst) // as in getNew
			t0 := c.begin()
			got, err := get(ctx, src(rep))
			d := c.end(t0)
			if err != nil {
				return d, err
			}
			return d, checkBytes(name+" get", got, size, c.want)
		}
	}
	// put times one Put through a route, then reads the object back
	// through Q and deletes it (untimed).
	put := func(name string, put func(ctx context.Context, id string) error) func(ctx context.Context, rep int) (time.Duration, error) {
		return func(ctx context.Context, rep int) (time.Duration, error) {
			id := fmt.Sprintf("routes-put-%s-%d", name, rep)
			t0 := c.begin()
			err := put(ctx, id)
			d := c.end(t0)
			if err != nil {
				return d, err
			}
			defer func() { _ = p.Delete(context.WithoutCancel(ctx), id) }()
			n, err := q.GetInto(ctx, id, c.dst)
			if err != nil {
				return d, fmt.Errorf("read %s back through Q: %w", id, err)
			}
			return d, checkBytes(name+" put, read back through Q,", c.dst[:n], size, c.want)
		}
	}
	into := func(get func(ctx context.Context, id string, dst []byte) (int, error)) func(ctx context.Context, id string) ([]byte, error) {
		return func(ctx context.Context, id string) ([]byte, error) {
			// c.dst was cleared before the timed section (getNew, getSrc).
			n, err := get(ctx, id, c.dst)
			return c.dst[:n], err
		}
	}
	return []routeOp{
		{RoutesGet, RouteM2M, func(ctx context.Context, rep int) (time.Duration, error) {
			// The round's source: created on P, Got there by the routes
			// from outside after the baseline, deleted at the round's end.
			if err := p.Put(ctx, src(rep), c.data); err != nil {
				return 0, fmt.Errorf("put the source on P: %w", err)
			}
			t0 := c.begin()
			res, err := actorutil.Request(ctx, c.m.System().Root, c.nodes[1].store, &messages.Get{ObjectId: src(rep), Prefetch: true, TimeoutMs: actorutil.TimeoutMs(ctx)})
			d := c.end(t0)
			if err == nil {
				err = replyErr(res)
			}
			if err != nil {
				return d, fmt.Errorf("Q's prefetch: %w", err)
			}
			// Q's copy, read from Q (which holds it now).
			n, err := q.GetInto(ctx, src(rep), c.dst)
			if err != nil {
				return d, fmt.Errorf("read Q's copy: %w", err)
			}
			return d, checkBytes("Q's copy", c.dst[:n], size, c.want)
		}},
		{RoutesGet, RouteClient, getNew(RouteClient, c.m.Client().Get)},
		{RoutesGet, RouteClientInto, getNew(RouteClientInto, into(c.m.Client().GetInto))},
		{RoutesGet, RouteActor, getNew(RouteActor, func(ctx context.Context, id string) ([]byte, error) {
			res, err := c.actorRequest(ctx, true, c.m.StoreNode(), &messages.Get{ObjectId: id, ReadOnly: true, TimeoutMs: actorutil.TimeoutMs(ctx)})
			if err != nil {
				return nil, err
			}
			return res.(*messages.GetReply).GetData(), nil
		})},
		{RoutesGet, RouteRemoteActor, getSrc(RouteRemoteActor, func(ctx context.Context, id string) ([]byte, error) {
			res, err := c.actorRequest(ctx, false, c.nodes[0].store, &messages.Get{ObjectId: id, TimeoutMs: actorutil.TimeoutMs(ctx)})
			if err != nil {
				return nil, err
			}
			return res.(*messages.GetReply).GetData(), nil
		})},
		{RoutesGet, RouteRemoteActorData, getSrc(RouteRemoteActorData, func(ctx context.Context, id string) ([]byte, error) {
			return c.actorCall(ctx, func(ctx context.Context) ([]byte, error) { return c.actorDial.Get(ctx, id) })
		})},
		{RoutesGet, RouteDial, getSrc(RouteDial, p.Get)},
		{RoutesGet, RouteDialInto, getSrc(RouteDialInto, into(p.GetInto))},
		{RoutesGet, RouteCLI, func(ctx context.Context, rep int) (time.Duration, error) {
			defer func() { _ = p.Delete(context.WithoutCancel(ctx), src(rep)) }()
			clear(c.dst)
			w := &sliceWriter{buf: c.dst}
			var errs strings.Builder
			cmd := exec.CommandContext(ctx, c.o.Binary, "get", "--addr="+c.nodes[0].address, "--timeout", c.o.OpTimeout.String(), src(rep))
			cmd.Stdout, cmd.Stderr = w, &errs
			t0 := c.begin()
			err := cmd.Run()
			d := c.end(t0)
			if err != nil {
				return d, fmt.Errorf("hoplite get: %w: %s", err, strings.TrimSpace(errs.String()))
			}
			return d, checkBytes("hoplite get", c.dst[:w.n], size, c.want)
		}},
		{RoutesPut, RouteM2M, nil}, // the get row's times
		{RoutesPut, RouteClient, put(RouteClient, func(ctx context.Context, id string) error { return c.m.Client().Put(ctx, id, c.data) })},
		{RoutesPut, RouteActor, put(RouteActor, func(ctx context.Context, id string) error {
			_, err := c.actorRequest(ctx, true, c.m.StoreNode(), &messages.Put{ObjectId: id, Data: c.data, TimeoutMs: actorutil.TimeoutMs(ctx)})
			return err
		})},
		{RoutesPut, RouteRemoteActor, put(RouteRemoteActor, func(ctx context.Context, id string) error {
			_, err := c.actorRequest(ctx, false, c.nodes[0].store, &messages.Put{ObjectId: id, Data: c.data, TimeoutMs: actorutil.TimeoutMs(ctx)})
			return err
		})},
		{RoutesPut, RouteRemoteActorData, put(RouteRemoteActorData, func(ctx context.Context, id string) error {
			_, err := c.actorCall(ctx, func(ctx context.Context) ([]byte, error) { return nil, c.actorDial.Put(ctx, id, c.data) })
			return err
		})},
		{RoutesPut, RouteDial, put(RouteDial, func(ctx context.Context, id string) error { return p.Put(ctx, id, c.data) })},
		{RoutesPut, RouteCLI, put(RouteCLI, func(ctx context.Context, id string) error {
			out, err := exec.CommandContext(ctx, c.o.Binary, "put", "--addr="+c.nodes[0].address, "--timeout", c.o.OpTimeout.String(), id, c.file).CombinedOutput()
			if err != nil {
				return fmt.Errorf("hoplite put: %w: %s", err, strings.TrimSpace(string(out)))
			}
			return nil
		})},
		{RoutesCLIStart, RouteCLIVersion, func(ctx context.Context, _ int) (time.Duration, error) {
			t0 := c.begin()
			out, err := exec.CommandContext(ctx, c.o.Binary, "version").CombinedOutput()
			d := c.end(t0)
			if err != nil || !strings.HasPrefix(string(out), "hoplite ") {
				return d, fmt.Errorf("hoplite version: %v: %s", err, out)
			}
			return d, nil
		}},
		{RoutesCLIStart, RouteCLIMembers, func(ctx context.Context, _ int) (time.Duration, error) {
			t0 := c.begin()
			out, err := exec.CommandContext(ctx, c.o.Binary, "members", "--addr="+c.nodes[0].address).CombinedOutput()
			d := c.end(t0)
			if err != nil || !strings.Contains(string(out), c.nodes[1].address) {
				return d, fmt.Errorf("hoplite members: %v: %s", err, out)
			}
			return d, nil
		}},
	}
}

// actorRequest sends msg to target from an actor spawned for it, in
// M's actor system (inMember) or in the remote actor's, and returns its
// reply, an error if the reply carries one. The remote route's refusal
// of an object past one remote message (INVALID_ARGUMENT) is
// errRouteRefused.
func (c *routesCluster) actorRequest(ctx context.Context, inMember bool, target *actor.PID, msg any) (any, error) {
	replies := make(chan any, 1)
	props := actor.PropsFromFunc(func(a actor.Context) {
		switch m := a.Message().(type) {
		case *actor.Started:
			a.Request(target, msg)
		case *messages.PutReply, *messages.GetReply:
			replies <- m
		}
	})
	var pid *actor.PID
	if inMember {
		pid = c.m.Spawn(props)
		defer c.m.System().Root.Stop(pid)
	} else {
		pid = c.system.Root.Spawn(props)
		defer c.system.Root.Stop(pid)
	}
	select {
	case r := <-replies:
		err := replyErr(r)
		// Only the documented refusal: past what one remote message
		// carries. Any other error fails the run.
		if !inMember && errors.Is(err, messages.ErrInvalidArgument) && strings.Contains(err.Error(), "remote message") {
			return r, fmt.Errorf("%w: %v", errRouteRefused, err)
		}
		return r, err
	case <-ctx.Done():
		return nil, messages.Errorf(messages.ErrorCode_TIMEOUT, "%T to %s: no reply: %v", msg, target, ctx.Err())
	}
}

// actorCall runs call from an actor spawned for it in the remote actor's
// system, as an application actor uses a client: on a goroutine of its
// own (a call blocks; the actor's mailbox must not), the result sent to
// the actor as a message.
func (c *routesCluster) actorCall(ctx context.Context, call func(ctx context.Context) ([]byte, error)) ([]byte, error) {
	type result struct {
		data []byte
		err  error
	}
	results := make(chan result, 1)
	pid := c.system.Root.Spawn(actor.PropsFromFunc(func(a actor.Context) {
		switch m := a.Message().(type) {
		case *actor.Started:
			self, system := a.Self(), a.ActorSystem()
			go func() {
				data, err := call(ctx)
				system.Root.Send(self, &result{data, err})
			}()
		case *result:
			results <- *m
		}
	}))
	defer c.system.Root.Stop(pid)
	select {
	case r := <-results:
		return r.data, r.err
	case <-ctx.Done():
		return nil, messages.Errorf(messages.ErrorCode_TIMEOUT, "the actor's call: no result: %v", ctx.Err())
	}
}
