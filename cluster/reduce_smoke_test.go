package cluster

import (
	"encoding/binary"
	"fmt"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/messages"
)

func int64s(seed uint64, n int) []byte {
	b := randomBytes(seed, n*8)
	for i := 0; i < n; i++ {
		v := int64(binary.LittleEndian.Uint64(b[i*8:])) >> 20 // no overflow in sums
		binary.LittleEndian.PutUint64(b[i*8:], uint64(v))
	}
	return b
}

func TestReduceSmoke(t *testing.T) {
	for _, elems := range []int{1000, 1 << 18} {
		t.Run(fmt.Sprint(elems), func(t *testing.T) {
			l := start(t, Config{Nodes: 6, ChunkSize: 64 << 10})
			ctx := deadline(t, 20*time.Second)
			var ids []string
			want := make([]int64, elems)
			for i := 0; i < 6; i++ {
				id := fmt.Sprintf("src-%d", i)
				data := int64s(uint64(i), elems)
				if err := l.Client(i).Put(ctx, id, data); err != nil {
					t.Fatal(err)
				}
				ids = append(ids, id)
			}
			r, err := l.Client(0).Reduce(ctx, "sum", ids, 4, messages.ReduceOp_SUM, messages.DType_INT64)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("plan %v reduced %v", r.GetPlan().GetShape(), r.GetReducedIds())
			for _, id := range r.GetReducedIds() {
				var i int
				fmt.Sscanf(id, "src-%d", &i)
				d := int64s(uint64(i), elems)
				for k := range want {
					want[k] += int64(binary.LittleEndian.Uint64(d[k*8:]))
				}
			}
			got, err := l.Client(5).Get(ctx, "sum")
			if err != nil {
				t.Fatal(err)
			}
			for k := range want {
				if int64(binary.LittleEndian.Uint64(got[k*8:])) != want[k] {
					t.Fatalf("element %d differs", k)
				}
			}
			if len(r.GetUnreducedIds()) != 2 {
				t.Fatalf("unreduced %v", r.GetUnreducedIds())
			}
		})
	}
}
