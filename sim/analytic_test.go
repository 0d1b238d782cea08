package sim

import (
	"testing"
	"time"
)

// TestAnalyticChargesTheCoresCPU: the peers' curves pay the simulated
// cores' CPU. On links faster than a host's CPU per byte (10 Gbit/s
// against 2.1 ns a byte) every stream moves at the CPU's rate, so no
// curve beats S·ByteCost; on slow links the link still bounds it; a
// reduce's combines cost more than a broadcast's copies; and on shared
// cores the hosts' bytes together bound the time.
func TestAnalyticChargesTheCoresCPU(t *testing.T) {
	const S = 32 << 20
	fast := DefaultParams(64)
	fast.Bandwidth, fast.Latency = 10e9, 20*time.Microsecond
	slow := DefaultParams(64)
	for _, sys := range []string{SysBinomial, SysChain, SysRing, SysThesis, SysThesisFill} {
		for _, sc := range []string{"broadcast", "reduce", "allreduce"} {
			got := Analytic(sys, sc, 64, S, fast).Seconds()
			if cpu := S * fast.ByteCost; got < cpu {
				t.Errorf("%s %s on 10 Gbit/s: %.4f s, under the CPU's %.4f s for S", sys, sc, got, cpu)
			}
			if link := Ideal(sc, 64, S, fast).Seconds() * 2; sc != "allreduce" && sys != SysBinomial && got < link {
				t.Errorf("%s %s on 10 Gbit/s: %.4f s, under twice the link's S/B %.4f s: the CPU is not charged", sys, sc, got, link)
			}
			if got, link := Analytic(sys, sc, 64, S, slow).Seconds(), Ideal(sc, 64, S, slow).Seconds(); got < link {
				t.Errorf("%s %s on 400 Mbit/s: %.4f s, under the link's ideal %.4f s", sys, sc, got, link)
			}
		}
		if b, r := Analytic(sys, "broadcast", 64, S, fast), Analytic(sys, "reduce", 64, S, fast); r <= b {
			t.Errorf("%s: a reduce (%v) no slower than a broadcast (%v) though it combines every byte", sys, r, b)
		}
	}
	shared := fast
	shared.CPUs = 2
	for _, sys := range []string{SysRing, SysChain} {
		got := Analytic(sys, "broadcast", 64, S, shared).Seconds()
		if all := 63 * S * shared.ByteCost / 2; got < all-1e-9 {
			t.Errorf("%s broadcast to 63 on 2 shared cores: %.3f s, under the %.3f s their bytes take those cores", sys, got, all)
		}
	}
	// The link-bound chain is the link's formula plus the CPU's part
	// of each hop and the operation's.
	chain := Analytic(SysChain, "broadcast", 8, S, slow).Seconds()
	B := slow.Bandwidth / 8 * slow.PayloadEfficiency
	if linkOnly := float64(S) / B; chain < linkOnly || chain > linkOnly*1.2 {
		t.Errorf("chain broadcast to 7 on 400 Mbit/s: %.4f s, want within 20 %% above S/B %.4f s", chain, linkOnly)
	}
}
