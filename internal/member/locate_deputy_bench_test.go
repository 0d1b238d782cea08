package member

import (
	"slices"
	"testing"

	"github.com/hoplite-go/hoplite/messages"
)

// BenchmarkInlineGetThroughADeputy: what a Locate deputy costs a lone
// small Get, one at a time, with nothing to batch. Three TCP members in
// one process; the objects' shards are on m0 and m1 Gets them,
// straight (-1 deputies), or through m2 as its deputy (3 groups, m1's
// group set so that its deputy for m0 is m2): the hop the deputy adds,
// in latency and in the three members' CPU.
func BenchmarkInlineGetThroughADeputy(b *testing.B) {
	for _, c := range []struct {
		name     string
		deputies int
	}{{"straight", -1}, {"deputy", 3}} {
		b.Run(c.name, func(b *testing.B) {
			slots, seeds := memberSlots(b, 3)
			ms := make([]*Member, 3)
			for i := range ms {
				m, err := joinSlot(b, slots[i], seeds, quietLog(), func(cfg *MemberConfig) { cfg.LocateDeputies = c.deputies })
				if err != nil {
					b.Fatal(err)
				}
				ms[i] = m
			}
			waitMembers(b, 3, ms...)
			m0, m1, m2 := ms[0], ms[1], ms[2]
			ctx := benchContext(b, benchTimeout)
			ids := benchIDs(b, b.N, "dep", func(id string) bool { return m1.ShardOwner(id) == m0.ID() })
			if c.deputies > 0 {
				stores := m1.storeNodes()
				pos := func(id string) int {
					return slices.IndexFunc(stores, func(s *messages.NodeRef) bool { return s.GetNodeId() == id })
				}
				m1.deputyGroup = uint64((pos(m2.ID()) - pos(m0.ID()) - 1 + 2*len(stores)) % len(stores))
				if via, self := m1.deputyFor(m1.shardFor(ids[0])); via != m2.DataAddress() || self {
					b.Fatalf("m1's deputy for m0's shard is %q (self %v), want m2 at %s", via, self, m2.DataAddress())
				}
			}
			data := make([][]byte, b.N)
			base := randomBytes(9, benchSmallSize)
			for i := range data {
				data[i] = benchSmallPayload(base, i)
				if err := m0.Client().Put(ctx, ids[i], data[i]); err != nil {
					b.Fatalf("put %s: %v", ids[i], err)
				}
			}
			b.ResetTimer()
			cpu0 := processCPU(b)
			lat := timedGets(b, ctx, m1.Client(), ids, data)
			cpu := processCPU(b) - cpu0
			b.StopTimer()
			if c.deputies > 0 && m2.deputy.sentAlone.Load() == 0 {
				b.Fatal("no Locate went through m2")
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Nanoseconds()), "get-p50-ns")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "get-cpu-ns")
		})
	}
}
