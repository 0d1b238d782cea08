package member

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/hoplite-go/hoplite/internal/etcdtest"
	"github.com/hoplite-go/hoplite/messages"
)

// The etcd provider against a real etcd server (etcd's embeddable server,
// in this test process), with members in this process.

// TestJoinEtcdNotEtcd: a provider address that is an open port but not
// etcd is a typed error naming the address, within the join timeout, and
// so is a join cancelled by its context.
func TestJoinEtcdNotEtcd(t *testing.T) {
	addr := etcdtest.NotEtcd(t)
	slots, _ := memberSlots(t, 1)
	// The manage port is the slot's, not the default (bind port + 1000):
	// that port was never checked free, and another package's test or an
	// outgoing connection may hold it, failing the join before etcd.
	cfg := MemberConfig{Bind: slots[0].bind, ManagePort: slots[0].managePort(), Provider: ProviderEtcd,
		ProviderAddress: addr, JoinTimeout: 2 * time.Second, Log: quietLog()}
	m, err := Join(context.Background(), cfg)
	if err == nil {
		m.Stop()
		t.Fatal("joined through a server that is not etcd")
	}
	var pe *ProviderError
	if !errors.As(err, &pe) || pe.Address != addr || pe.Provider != ProviderEtcd ||
		!errors.Is(err, messages.ErrUnavailable) || !errors.Is(err, context.DeadlineExceeded) ||
		!strings.Contains(err.Error(), "etcd server at "+addr) {
		t.Fatalf("error %v (%T), want a *ProviderError naming %s", err, err, addr)
	}

	// Cancelled (SIGTERM in `hoplite node`): the join ends with the
	// cancellation, though its timeout is far away.
	cfg.JoinTimeout = 10 * time.Minute
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(200*time.Millisecond, cancel)
	m, err = Join(ctx, cfg)
	if err == nil {
		m.Stop()
		t.Fatal("joined through a server that is not etcd")
	}
	if !errors.As(err, &pe) || !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled join: %v, want a *ProviderError wrapping context.Canceled", err)
	}
}

// TestMembersEtcd: members in this test process on the etcd provider
// (so that -race sees the provider's loops): they see each other, move an
// object, ride out an etcd restart, and a graceful leave takes the
// leaver's key away at once.
func TestMembersEtcd(t *testing.T) {
	srv := etcdtest.Start(t)
	log := logrus.New()
	log.SetLevel(logrus.InfoLevel)
	log.SetOutput(&syncBuffer{})
	hook := logtest.NewLocal(log)
	slots, _ := memberSlots(t, 2)
	etcd := func(c *MemberConfig) { c.Provider, c.ProviderAddress = ProviderEtcd, srv.Endpoint() }
	a, err := joinSlot(t, slots[0], nil, log, etcd)
	if err != nil {
		t.Fatal(err)
	}
	// b was given seeds as well: they do not matter, and it says so.
	b, err := joinSlot(t, slots[1], []string{slots[0].manage}, log, etcd)
	if err != nil {
		t.Fatal(err)
	}
	waitSameView(t, a, b)
	data := randomBytes(41, 300<<10)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := a.Client().Put(ctx, "members-etcd", data); err != nil {
		t.Fatal(err)
	}
	logs := func(msg string, member *Member) func() bool {
		return func() bool {
			for _, e := range hook.AllEntries() {
				if e.Message == msg && e.Data["member"] == member.ID() {
					return true
				}
			}
			return false
		}
	}
	if !logs("seeds are ignored with the etcd provider: the members are the keys in etcd", b)() ||
		logs("seeds are ignored with the etcd provider: the members are the keys in etcd", a)() {
		t.Fatal("only the member given seeds should say they are ignored")
	}
	srv.Stop()
	for _, m := range []*Member{a, b} {
		eventually(t, 10*time.Second, m.ID()+" logs the outage", logs(
			"membership provider unreachable: the membership is frozen at its last view; this member keeps serving what it holds", m))
	}
	got, err := b.Client().Get(ctx, "members-etcd")
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("get during the outage: %d bytes, %v", len(got), err)
	}
	srv.Restart()
	for _, m := range []*Member{a, b} {
		eventually(t, 10*time.Second, m.ID()+" logs the end of the outage", logs("membership provider reachable again: membership resumed", m))
	}
	waitSameView(t, a, b)
	if _, err := b.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	waitSameView(t, a)
}

// TestJoinCancelledWhileSettling: a join cancelled while it waits for
// the handshake with a member etcd lists but that does not answer (a key
// whose lease has not expired yet) ends with the cancellation, not when
// the handshakes give up.
func TestJoinCancelledWhileSettling(t *testing.T) {
	srv := etcdtest.Start(t)
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{srv.Endpoint()}, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ghost := fmt.Sprintf("127.0.0.1:%d#0badf00d", freePorts(t, 1)[0])
	host, port, _ := strings.Cut(strings.Split(ghost, "#")[0], ":")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Put(ctx, "/hoplite/hoplite/members/"+ghost,
		fmt.Sprintf(`{"id":%q,"host":%q,"port":%s}`, ghost, host, port)); err != nil {
		t.Fatal(err)
	}
	log := logrus.New()
	log.SetLevel(logrus.DebugLevel)
	log.SetOutput(&syncBuffer{})
	hook := logtest.NewLocal(log)
	slots, _ := memberSlots(t, 1)
	jctx, jcancel := context.WithCancel(context.Background())
	defer jcancel()
	go func() {
		for jctx.Err() == nil {
			for _, e := range hook.AllEntries() {
				if e.Message == "member appeared in the topology" && e.Data["joined"] == ghost {
					jcancel() // in the handshake with the ghost now
					return
				}
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	m, err := Join(jctx, MemberConfig{Bind: slots[0].bind, ManagePort: slots[0].managePort(), Provider: ProviderEtcd,
		ProviderAddress: srv.Endpoint(), JoinTimeout: time.Minute, Log: log})
	if err == nil {
		m.Stop()
		t.Fatal("the join ignored its cancellation")
	}
	var pe *ProviderError
	if !errors.Is(err, context.Canceled) || errors.As(err, &pe) {
		t.Fatalf("join: %v, want the cancellation during the handshake", err)
	}
}

// TestEtcdStatusErrorIsClassifiedByItsContext: the Status check's error
// says DeadlineExceeded or Canceled with errors.Is whatever shape the
// client gave it, the race that made TestJoinEtcdNotEtcd fail on a busy
// machine: gRPC's timer fired first and a bare gRPC status came back.
func TestEtcdStatusErrorIsClassifiedByItsContext(t *testing.T) {
	live, cancelLive := context.WithTimeout(context.Background(), time.Hour)
	defer cancelLive()
	bare := status.Error(codes.DeadlineExceeded, "context deadline exceeded")
	if err := statusErr(live, bare); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a gRPC DeadlineExceeded status: %v, want it to wrap context.DeadlineExceeded", err)
	}
	past, cancelPast := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
	defer cancelPast()
	unavailable := status.Error(codes.Unavailable, "unexpected HTTP status code received from server: 400")
	if err := statusErr(past, unavailable); !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "400") {
		t.Errorf("the last attempt's error after the deadline: %v, want DeadlineExceeded and the cause", err)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	if err := statusErr(cancelled, status.Error(codes.Canceled, "context canceled")); !errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a cancelled check: %v, want context.Canceled only", err)
	}
	refused := errors.New("connection refused")
	if err := statusErr(live, refused); errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		t.Errorf("a refused check in time: %v, want neither context error", err)
	}
}
