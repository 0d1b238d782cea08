package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/actor"

	"github.com/hoplite-go/hoplite/cluster"
	"github.com/hoplite-go/hoplite/internal/actorutil"
	"github.com/hoplite-go/hoplite/internal/experiments"
	"github.com/hoplite-go/hoplite/internal/loopback"
	"github.com/hoplite-go/hoplite/messages"
)

// opsProcesses is the processes mode: this process's member calls, and a
// `hoplite node -experiments bench-agent` process on loopback is the other member.
// Both run the TCP data plane, as a deployed cluster does.
type opsProcesses struct {
	m         *cluster.Member
	cmd       *exec.Cmd
	exited    chan struct{}
	stderr    *tailBuffer
	agent     *actor.PID
	other     *messages.NodeRef
	otherID   string
	otherData string
}

// opsStartTimeout bounds the node's start and both members' agreement on
// the membership.
const opsStartTimeout = 60 * time.Second

func openOpsProcesses(ctx context.Context, o *OpsOptions) (b *opsProcesses, err error) {
	ports, err := loopback.Ports(4)
	if err != nil {
		return nil, err
	}
	addr := func(p int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)) }
	seeds := []string{addr(ports[1]), addr(ports[3])}
	bind := addr(ports[2])
	b = &opsProcesses{exited: make(chan struct{}), stderr: &tailBuffer{max: 16 << 10}}
	b.cmd = exec.Command(o.Binary, "node", "-bind", bind, "-manage-port", strconv.Itoa(ports[3]),
		"-seeds", strings.Join(seeds, ","), "-capacity", "1GiB", "-"+experiments.Flag, experiments.Set{BenchAgent: true}.String(), "-log-level", "error")
	b.cmd.Stderr = b.stderr
	// Killed with this process if it dies first.
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	out, err := b.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := b.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s node: %w", o.Binary, err)
	}
	started := make(chan struct{}, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if startLine.MatchString(sc.Text()) {
				select {
				case started <- struct{}{}:
				default:
				}
			}
		}
		_ = b.cmd.Wait()
		close(b.exited)
	}()
	defer func() {
		if err != nil {
			b.close()
		}
	}()
	sctx, cancel := context.WithTimeout(ctx, opsStartTimeout)
	defer cancel()
	b.m, err = cluster.Join(sctx, cluster.MemberConfig{Bind: addr(ports[0]), ManagePort: ports[1], Seeds: seeds,
		Capacity: 1 << 30, DefaultTimeout: o.OpTimeout, Log: o.Log})
	if err != nil {
		return nil, err
	}
	select {
	case <-started:
	case <-b.exited:
		return nil, fmt.Errorf("the node exited before it joined: %s", b.stderr)
	case <-sctx.Done():
		return nil, fmt.Errorf("the node did not join within %v: %s", opsStartTimeout, b.stderr)
	}
	if err := b.m.WaitMembers(sctx, 2); err != nil {
		return nil, err
	}
	for _, n := range b.m.Members() {
		if n.GetNodeId() != b.m.ID() {
			b.other, b.otherID, b.otherData = n, n.GetNodeId(), n.GetDataAddress()
		}
	}
	if b.otherID == "" {
		return nil, errors.New("the node is not a member")
	}
	// The node must see both members too before the first Put: shards
	// are placed over the members a member sees.
	b.agent = actor.NewPID(bind, AgentName)
	for {
		res, err := actorutil.Request(sctx, b.m.System().Root, b.agent, &messages.BenchHello{})
		if r, ok := res.(*messages.BenchHelloReply); ok && err == nil && r.GetMembers() == 2 {
			return b, nil
		}
		select {
		case <-sctx.Done():
			return nil, fmt.Errorf("the node does not see both members within %v (last: %v %v)", opsStartTimeout, res, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (b *opsProcesses) put(ctx context.Context, id string, data []byte) error {
	return b.m.Client().Put(ctx, id, data)
}

// putOther Puts on the node's store node from this process, the bytes
// inside the Put request (objects of at most opsMemory here; untimed). The
// bench agent's BenchPut is not used: its node gives its free memory back
// to the kernel every 16 Puts (a full collection), which stalled the node
// for milliseconds inside the gets after puts and made its next
// allocations fault their pages in again.
func (b *opsProcesses) putOther(ctx context.Context, d DataSpec, data []byte) error {
	return b.m.ClientOf(b.other).Put(ctx, d.ID, data)
}

func (b *opsProcesses) get(ctx context.Context, id string) ([]byte, error) {
	return b.m.Client().Get(ctx, id)
}

func (b *opsProcesses) del(ctx context.Context, id string) error {
	return b.m.Client().Delete(ctx, id)
}

func (b *opsProcesses) ping(ctx context.Context) error { return b.m.PingData(ctx, b.otherData) }

func (b *opsProcesses) otherShard(id string) bool { return b.m.ShardOwner(id) == b.otherID }

// cpu is this process's CPU (its member and the callers) and the node's.
func (b *opsProcesses) cpu(ctx context.Context) (time.Duration, error) {
	own, err := processCPU()
	if err != nil {
		return 0, err
	}
	res, err := actorutil.Request(ctx, b.m.System().Root, b.agent, &messages.BenchCPU{})
	if err != nil {
		return 0, err
	}
	r, ok := res.(*messages.BenchCPUReply)
	if !ok {
		return 0, messages.Errorf(messages.ErrorCode_INTERNAL, "unexpected reply %T to BenchCPU", res)
	}
	return own + time.Duration(r.GetCpuNs()), nil
}

// close stops the node first (a graceful leave on SIGTERM; killed if it
// takes longer than 15 s), so that its leaving is no failure this
// member reports, then this member.
func (b *opsProcesses) close() {
	if b.cmd.Process != nil {
		_ = b.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-b.exited:
		case <-time.After(15 * time.Second):
			_ = b.cmd.Process.Kill()
			<-b.exited
		}
	}
	if b.m != nil {
		b.m.Stop()
	}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.b = append(t.b, p...)
	if over := len(t.b) - t.max; over > 0 {
		t.b = append(t.b[:0], t.b[over:]...)
	}
	return len(p), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return strings.TrimSpace(string(t.b))
}
