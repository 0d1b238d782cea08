package cluster

import (
	"context"
	"net"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/third_party/forked/protoactor-go/remote"
	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/internal/testutil"
)

// The tests of the facade start members and embedded clusters through it,
// as an application does; internal/member's tests hold the rest.

func randomBytes(seed uint64, n int) []byte { return testutil.RandomBytes(seed, n) }

// quietLog keeps test output readable; warnings still show.
// HOPLITE_TEST_LOG=debug (or any logrus level) shows more when replaying
// a failing seed.
func quietLog() *logrus.Logger {
	l := logrus.New()
	l.SetLevel(logrus.WarnLevel)
	if v := os.Getenv("HOPLITE_TEST_LOG"); v != "" {
		if lvl, err := logrus.ParseLevel(v); err == nil {
			l.SetLevel(lvl)
		}
	}
	return l
}

func start(t *testing.T, cfg Config) *Local {
	t.Helper()
	if cfg.Log == nil {
		cfg.Log = quietLog()
	}
	l, err := StartLocal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(l.Stop)
	return l
}

// remoteConfig is a plaintext remote's configuration.
func remoteConfig(host string, port int) *remote.Config { return RemoteConfig(host, port, nil, nil) }

type memberSlot struct{ bind, manage string }

func memberSlots(t testing.TB, n int) ([]memberSlot, []string) {
	binds, seeds := testutil.MemberSlots(t, n)
	var slots []memberSlot
	for i := range binds {
		slots = append(slots, memberSlot{bind: binds[i], manage: seeds[i]})
	}
	return slots, seeds
}

// managePort is the slot's manage port, checked free with its bind port.
func (s memberSlot) managePort() int {
	_, mp, _ := net.SplitHostPort(s.manage)
	port, _ := strconv.Atoi(mp)
	return port
}

func joinSlot(t testing.TB, s memberSlot, seeds []string, log *logrus.Logger, mod func(*MemberConfig)) (*Member, error) {
	t.Helper()
	cfg := MemberConfig{Bind: s.bind, ManagePort: s.managePort(), Seeds: seeds, Shards: 16, ChunkSize: 256 << 10,
		Log: log, RefreshInterval: 100 * time.Millisecond, JoinTimeout: 20 * time.Second, DefaultTimeout: 20 * time.Second}
	if mod != nil {
		mod(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	m, err := Join(ctx, cfg)
	if err == nil {
		t.Cleanup(m.Stop)
	}
	return m, err
}

// joinMembers starts n members that log to log, each seeded with all
// of them, and waits until every one sees all n.
func joinMembers(t testing.TB, n int, log *logrus.Logger) []*Member {
	t.Helper()
	slots, seeds := memberSlots(t, n)
	var ms []*Member
	for _, s := range slots {
		m, err := joinSlot(t, s, seeds, log, nil)
		if err != nil {
			t.Fatal(err)
		}
		ms = append(ms, m)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, m := range ms {
		if err := m.WaitMembers(ctx, n); err != nil {
			t.Fatalf("%s: %v", m.ID(), err)
		}
	}
	return ms
}
