package member

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hoplite-go/hoplite/internal/experiments"
	"github.com/hoplite-go/hoplite/internal/reduction"
	"github.com/hoplite-go/hoplite/messages"
)

// TestAllReduceLowersNAtEveryFailure: two participants of an AllReduce
// of every source die one after the other, each once the run it is in
// has started (the first in the first run, the second in the tree the
// first failure re-planned). Nothing can replace them, so each failure
// lowers n: every survivor ends with the exact sum of the four surviving
// sources, the reply names them, and nothing waits for the deadline. The
// first run is d-ary (a tree that cannot repair without a backup) or
// sliced (which re-plans as a tree at the first failure).
func TestAllReduceLowersNAtEveryFailure(t *testing.T) {
	for _, shape := range []string{reduction.ShapeDAry, reduction.ShapeSliced} {
		t.Run(shape, func(t *testing.T) {
			const nodes = 6
			victims := []int{2, 4}
			target := idOnNode("shrink-"+shape, 0, nodes, nodes) // the coordinator runs on node 0, the caller
			// The coordinator is held at a task start of each run (a
			// re-planned tree's generations are newer) until that run's
			// victim is dead: the first run's once every source was
			// located (a d-ary tree starts a position as its source
			// arrives; a victim whose source was never located is known
			// to be lost only by its shard's word, which a shard on the
			// victim itself takes with it: the AllReduce would wait for
			// it as for any source not Put yet, to its deadline; see
			// TestAllReduceOfASourceLostBeforeItBegan), a re-planned
			// one's at its first.
			//
			// The held runs' reduce chunks wait until the run after the
			// last victim's started, so that none can finish its target
			// before its victim's failure reaches the coordinator: the participants' Gets
			// would copy it, and a finished target that a Get copied is
			// the result (the directory seals it; see
			// TestReduceKeepsAFinishedResultAGetReturned), with the
			// victim's source in it.
			held := make(chan int, len(victims))
			resume := make(chan struct{})
			var mu sync.Mutex
			runs := map[int32]bool{}
			located := map[string]bool{}
			firstGen := int32(1)
			var stall chan struct{} // closed when the run after the last victim's starts
			stalledGen := int32(0)
			unstall := func() { // under mu
				if stalledGen != 0 {
					close(stall)
					stalledGen = 0
				}
			}
			cfg := Config{exp: experiments.Set{AllReduceShape: shape}, Nodes: nodes, ChunkSize: 16 << 10, Log: faultLog()}
			cfg.hooks.Store.BeforeReduceChunk = func(string, string, int64) {
				mu.Lock()
				ch := stall
				if stalledGen == 0 {
					ch = nil
				}
				mu.Unlock()
				if ch != nil {
					select {
					case <-ch:
					case <-time.After(30 * time.Second):
					}
				}
			}
			cfg.hooks.Coordinator = func(_ string, msg any) {
				if u, ok := msg.(*messages.LocationUpdate); ok && u.GetNode().GetNodeId() != "" && strings.HasPrefix(u.GetObjectId(), shape+"-") {
					mu.Lock()
					located[u.GetObjectId()] = true
					mu.Unlock()
					return
				}
				m, ok := msg.(*messages.ReduceTaskStarted)
				if !ok {
					return
				}
				mu.Lock()
				g := m.GetGeneration()
				if stalledGen != 0 && len(runs) == len(victims) && g > maxKey(runs) {
					// The run after the last victim's started: the held
					// ones were abandoned and released before it (their
					// releases went ahead of its tasks). Unstalled when
					// only their successor started, an abandoned run could
					// still finish its target before its workers heard of
					// the release (CI failed so once).
					unstall()
				}
				hold := len(runs) < len(victims) && !runs[g] &&
					(len(runs) == 0 && g == firstGen && len(located) >= nodes || len(runs) > 0 && g > maxKey(runs))
				if hold {
					runs[g] = true
					if stalledGen == 0 {
						stall = make(chan struct{})
					}
					stalledGen = g
				}
				mu.Unlock()
				if hold {
					held <- int(g)
					<-resume
				}
			}
			l := start(t, cfg)
			ctx := deadline(t, 90*time.Second)
			var ids []string
			byID := map[string][]byte{}
			for i := 0; i < nodes; i++ {
				id := fmt.Sprintf("%s-%d", shape, i)
				b := int64s(uint64(i+1), 40000) // 320 KB
				rdPut(t, ctx, l, i, id, b)
				ids, byID[id] = append(ids, id), b
			}
			done := goReduce(ctx, 30*time.Second, func(rctx context.Context) (*messages.ReduceReply, error) {
				return l.Client(0).AllReduce(rctx, target, ids, nodes, messages.ReduceOp_SUM, messages.DType_INT64)
			})
			for k, v := range victims {
				select {
				case g := <-held:
					t.Logf("run %d (generation %d) started: killing node-%d", k+1, g, v)
				case res := <-done:
					t.Fatalf("the AllReduce ended before run %d started: %v, %v", k+1, res.reply, res.err)
				}
				err := l.Kill(v)
				resume <- struct{}{}
				if err != nil {
					t.Fatal(err)
				}
			}
			close(resume)
			res := <-done
			mu.Lock()
			unstall()
			mu.Unlock()
			if res.err != nil {
				t.Fatalf("AllReduce with node-%d and node-%d killed: %v", victims[0], victims[1], res.err)
			}
			r := res.reply
			if r.GetPlan().GetShape() != reduction.ShapeDAry {
				t.Fatalf("plan shape %q after the kills, want the re-planned %q", r.GetPlan().GetShape(), reduction.ShapeDAry)
			}
			inputs := rdCheckSets(t, r, ids, nodes-len(victims), byID)
			if un := slices.Sorted(slices.Values(r.GetUnreducedIds())); !slices.Equal(un, []string{ids[victims[0]], ids[victims[1]]}) {
				t.Fatalf("unreduced %v, want the victims' %s and %s", un, ids[victims[0]], ids[victims[1]])
			}
			want := make([]byte, len(inputs[0]))
			for _, in := range inputs {
				for e := 0; e < len(want); e += 8 {
					binary.LittleEndian.PutUint64(want[e:], binary.LittleEndian.Uint64(want[e:])+binary.LittleEndian.Uint64(in[e:]))
				}
			}
			for i := range nodes {
				if slices.Contains(victims, i) {
					continue
				}
				if got, err := l.Client(i).Get(ctx, target); err != nil || !bytes.Equal(got, want) {
					t.Fatalf("Get on node %d: err %v, equal %v (first difference at byte %d)", i, err, bytes.Equal(got, want), firstDiff(got, want))
				}
			}
			rdNoIntermediates(t, l)
		})
	}
}

func maxKey(m map[int32]bool) int32 {
	var out int32
	for k := range m {
		out = max(out, k)
	}
	return out
}
