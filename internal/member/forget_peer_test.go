package member

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/internal/transport"
)

// A member closes its pooled data-plane connections to a member that
// left as soon as its view drops it, not when the idle reaper finds them
// (they held a descriptor here and a slot at the departed address).
func TestDepartedPeersPooledConnectionsClosed(t *testing.T) {
	ms := joinMembers(t, 3, testLogger(t, logrus.WarnLevel))
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	big := bytes.Repeat([]byte("pooled"), 200<<10) // streamed, not inline
	if err := ms[0].Client().Put(ctx, "from-0", big); err != nil {
		t.Fatal(err)
	}
	got, err := ms[1].Client().Get(ctx, "from-0")
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("get: %v", err)
	}
	tcp, ok := ms[1].data.(*transport.TCP)
	if !ok {
		t.Fatalf("member 1's data plane is %T, not TCP", ms[1].data)
	}
	before := tcp.Stats().IdleReaped
	ms[0].Stop()
	waitMembers(t, 2, ms[1], ms[2])
	end := time.Now().Add(10 * time.Second)
	for tcp.Stats().IdleReaped == before {
		if time.Now().After(end) {
			t.Fatal("member 1 kept its pooled connections to member 0 after member 0 left")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
