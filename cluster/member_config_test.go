package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/hoplite-go/hoplite/coordinator"
	"github.com/hoplite-go/hoplite/messages"
)

// Bad benchmark settings are refused by Join before anything starts (no
// port is taken: the same address joins right after).
func TestMemberConfigRejectsBadReduceSettings(t *testing.T) {
	slots, _ := memberSlots(t, 1)
	for _, c := range []struct {
		name string
		mod  func(*MemberConfig)
		want string
	}{
		{"negative degree", func(c *MemberConfig) { c.ReduceDegree = -1 }, "reduce degree -1"},
		{"unknown shape", func(c *MemberConfig) { c.ReduceShape = "star" }, `unknown reduce shape "star"`},
		{"inline is not a choice", func(c *MemberConfig) { c.ReduceShape = coordinator.ShapeInline }, `unknown reduce shape "inline"`},
	} {
		t.Run(c.name, func(t *testing.T) {
			m, err := joinSlot(t, slots[0], nil, quietLog(), c.mod)
			if err == nil {
				m.Stop()
				t.Fatal("Join accepted the configuration")
			}
			if !errors.Is(err, messages.ErrInvalidArgument) || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("want INVALID_ARGUMENT naming %q, got %v", c.want, err)
			}
		})
	}
}

// One member holding every source still plans a whole tree.

// putFloats puts n float32 sources of size bytes on m, source i all i+1.
func putFloats(t *testing.T, ctx context.Context, m *Member, prefix string, n, size int) []string {
	t.Helper()
	var ids []string
	for i := 0; i < n; i++ {
		b := make([]byte, size)
		for k := 0; k < size; k += 4 {
			binary.LittleEndian.PutUint32(b[k:], math.Float32bits(float32(i+1)))
		}
		id := fmt.Sprintf("%s-%d", prefix, i)
		if err := m.Client().Put(ctx, id, b); err != nil {
			t.Fatalf("put %s: %v", id, err)
		}
		ids = append(ids, id)
	}
	return ids
}

// checkSum checks that every float32 of target is 1+2+...+n.
func checkSum(t *testing.T, ctx context.Context, m *Member, target string, n, size int) {
	t.Helper()
	got, err := m.Client().Get(ctx, target)
	if err != nil {
		t.Fatalf("get %s: %v", target, err)
	}
	want := float32(n * (n + 1) / 2)
	if len(got) != size {
		t.Fatalf("%s: %d bytes, want %d", target, len(got), size)
	}
	for k := 0; k < size; k += 4 {
		if v := math.Float32frombits(binary.LittleEndian.Uint32(got[k:])); v != want {
			t.Fatalf("%s[%d] = %v, want %v", target, k/4, v, want)
		}
	}
}

// MemberConfig's reduce settings reach the coordinators and the store
// node: a forced degree and shape are the plan's, and a naive member
// gathers at the caller. Without them every plan would be the cost
// model's d-ary tree, which cannot have both degree 2 and degree 3.
func TestMemberReduceSettings(t *testing.T) {
	const n, size = 4, 256 << 10 // above the inline limit: a real tree
	forced := func(d int32) func(p *messages.ReducePlan) error {
		return func(p *messages.ReducePlan) error {
			if p.GetShape() != coordinator.ShapeDAry || p.GetDegree() != d {
				return fmt.Errorf("plan %s degree %d, want %s degree %d", p.GetShape(), p.GetDegree(), coordinator.ShapeDAry, d)
			}
			return nil
		}
	}
	for _, c := range []struct {
		name  string
		mod   func(*MemberConfig)
		check func(p *messages.ReducePlan) error
	}{
		{"degree 2", func(c *MemberConfig) { c.ReduceDegree = 2 }, forced(2)},
		{"degree 3", func(c *MemberConfig) { c.ReduceDegree = 3 }, forced(3)},
		{"chain-leaf", func(c *MemberConfig) { c.ReduceShape = coordinator.ShapeChainLeaf }, func(p *messages.ReducePlan) error {
			if p.GetShape() != coordinator.ShapeChainLeaf {
				return fmt.Errorf("plan shape %s, want %s", p.GetShape(), coordinator.ShapeChainLeaf)
			}
			return nil
		}},
		{"naive", func(c *MemberConfig) { c.Naive = true }, func(p *messages.ReducePlan) error {
			if p.GetShape() != "naive-gather" {
				return fmt.Errorf("plan shape %s, want naive-gather", p.GetShape())
			}
			return nil
		}},
	} {
		t.Run(c.name, func(t *testing.T) {
			slots, seeds := memberSlots(t, 1)
			m, err := joinSlot(t, slots[0], seeds, testLogger(t, logrus.WarnLevel), c.mod)
			if err != nil {
				t.Fatal(err)
			}
			defer m.Stop()
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			ids := putFloats(t, ctx, m, "src", n, size)
			r, err := m.Client().Reduce(ctx, "sum", ids, n, messages.ReduceOp_SUM, messages.DType_FLOAT32)
			if err != nil {
				t.Fatalf("reduce: %v", err)
			}
			checkSum(t, ctx, m, "sum", n, size)
			if err := c.check(r.GetPlan()); err != nil {
				t.Error(err)
			}
			if c.name == "naive" {
				// The baseline has no knee policy: only a naive store node
				// refuses a Reduce without num_objects.
				_, err := m.Client().ReduceUntilKnee(ctx, "knee", ids, &messages.ReduceKnee{MinPercent: 50}, messages.ReduceOp_SUM, messages.DType_FLOAT32)
				if !errors.Is(err, messages.ErrInvalidArgument) || !strings.Contains(err.Error(), "naive baseline") {
					t.Errorf("knee reduce on a naive member: want INVALID_ARGUMENT from the naive baseline, got %v", err)
				}
			}
		})
	}
}

// `hoplite node -naive` members are the baseline end to end: receivers
// that Get at the same time all fetch from the creator. Chunks are slowed
// so that the transfers overlap: a member that ignored -naive would send
// the second receiver to the first one's partial copy.
func TestProcessNaiveNodesFetchFromTheCreator(t *testing.T) {
	bin := hopliteBinary(t)
	slots, seeds := memberSlots(t, 3)
	var nodes []*nodeProc
	for _, s := range slots {
		nodes = append(nodes, startNode(t, bin, s, seeds, "-naive", "-test-chunk-delay", "2ms"))
	}
	for _, n := range nodes {
		n.waitStarted(t, 60*time.Second)
	}
	c := newTestClient(t)
	c.converge(t, nodes...)
	data := randomBytes(11, 2<<20+17)
	putRetry(t, c.of(nodes[0]), "naive-obj", data)
	errs := make(chan error, 2)
	for _, n := range nodes[1:] {
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			got, err := c.of(n).Get(ctx, "naive-obj")
			if err == nil && len(got) != len(data) {
				err = fmt.Errorf("%d bytes, want %d", len(got), len(data))
			}
			if err != nil {
				err = fmt.Errorf("get on %s: %w", n.id, err)
			}
			errs <- err
		}()
	}
	for range nodes[1:] {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes[1:] {
		getExact(t, c.of(n), "naive-obj", data)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := c.of(nodes[0]).Info(ctx, "naive-obj", false)
	if err != nil {
		t.Fatal(err)
	}
	senders := senderOf(info)
	if len(senders) != 2 {
		t.Fatalf("transfers to %d receivers, want 2: %v", len(senders), senders)
	}
	for r, s := range senders {
		if s != nodes[0].id {
			t.Errorf("naive %s fetched from %s, not the creator %s", r, s, nodes[0].id)
		}
	}
}
