package member

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

	"github.com/hoplite-go/hoplite/internal/reduction"
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
		{"negative degree", func(c *MemberConfig) { c.exp.ReduceDegree = -1 }, "reduce degree -1"},
		{"unknown shape", func(c *MemberConfig) { c.exp.ReduceShape = "star" }, `unknown reduce shape "star"`},
		{"inline is not a choice", func(c *MemberConfig) { c.exp.ReduceShape = reduction.ShapeInline }, `unknown reduce shape "inline"`},
		{"negative link rate", func(c *MemberConfig) { c.LinkRate = -1 }, "link rate -1"},
		{"link rate NaN", func(c *MemberConfig) { c.LinkRate = math.NaN() }, "link rate NaN"},
		{"negative link burst", func(c *MemberConfig) { c.LinkRate, c.LinkBurst = 400e6, -1 }, "link burst -1"},
		{"link burst without a rate", func(c *MemberConfig) { c.LinkBurst = 200000 }, "link burst 200000"},
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

// TestPayloadRate: a link's TCP payload rate, 1448 bytes in every 1538
// on the wire; nothing for a rate not known.
func TestPayloadRate(t *testing.T) {
	for bits, want := range map[float64]float64{400e6: 400e6 / 8 * 1448 / 1538, 10e9: 10e9 / 8 * 1448 / 1538, 0: 0, -5: 0, math.Inf(1): 0, math.NaN(): 0} {
		if got := PayloadRate(bits); got != want {
			t.Errorf("PayloadRate(%v) = %v, want %v", bits, got, want)
		}
	}
	if r := PayloadRate(400e6); r < 47e6 || r > 47.8e6 {
		t.Errorf("PayloadRate(400 Mbit/s) = %v: not just under the 47.8 MB/s a tc-shaped 400 Mbit/s link carries", r)
	}
}

// TestMemberBurst: a stated burst reaches the cost model in payload
// bytes, as PayloadRate counts a rate's; none unless stated.
func TestMemberBurst(t *testing.T) {
	for _, c := range []struct {
		burst int64
		want  float64
	}{{0, 0}, {200000, 200000.0 * 1448 / 1538}} {
		m := &Member{cfg: MemberConfig{LinkRate: 400e6, LinkBurst: c.burst}}
		if got := m.burst(); got != c.want {
			t.Errorf("LinkBurst %d: burst %v, want %v", c.burst, got, c.want)
		}
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
			if p.GetShape() != reduction.ShapeDAry || p.GetDegree() != d {
				return fmt.Errorf("plan %s degree %d, want %s degree %d", p.GetShape(), p.GetDegree(), reduction.ShapeDAry, d)
			}
			return nil
		}
	}
	for _, c := range []struct {
		name  string
		mod   func(*MemberConfig)
		check func(p *messages.ReducePlan) error
	}{
		{"degree 2", func(c *MemberConfig) { c.exp.ReduceDegree = 2 }, forced(2)},
		{"degree 3", func(c *MemberConfig) { c.exp.ReduceDegree = 3 }, forced(3)},
		{"chain-leaf", func(c *MemberConfig) { c.exp.ReduceShape = reduction.ShapeChainLeaf }, func(p *messages.ReducePlan) error {
			if p.GetShape() != reduction.ShapeChainLeaf {
				return fmt.Errorf("plan shape %s, want %s", p.GetShape(), reduction.ShapeChainLeaf)
			}
			return nil
		}},
		{"naive", func(c *MemberConfig) { c.exp.Naive = true }, func(p *messages.ReducePlan) error {
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
