package sim

import (
	"math"
	"testing"
)

// TestValidationAgainstTestbed compares the simulator's predictions at
// the testbed's settings with the measured medians: within 10 % at
// 32 MiB, 20 % at 1 MiB, and a case the model misses (Testbed.Miss)
// within its MissBound.
func TestValidationAgainstTestbed(t *testing.T) {
	for _, m := range TestbedMedians {
		o, err := Run(m.Config(1))
		if err != nil {
			t.Fatal(err)
		}
		if len(o.Violations) > 0 {
			t.Errorf("%s N=%d: %v", m.Scenario, m.Nodes, o.Violations)
		}
		got := o.Time.Seconds()
		off := got/m.Median - 1
		t.Logf("%-9s %-7s N=%-2d S=%-8d measured %.4f s, simulated %.4f s (%+.1f %%), CPU %.1f ms", m.Scenario, m.Shape, m.Nodes, m.Size, m.Median, got, 100*off, o.CPU.Seconds()*1e3)
		if m.Miss != "" {
			t.Logf("  outside %.0f %%, held within %.0f %%: %s", 100*Testbed{Size: m.Size}.Tolerance(), 100*m.Tolerance(), m.Miss)
		}
		if math.Abs(off) > m.Tolerance() {
			t.Errorf("%s N=%d S=%d: simulated %.4f s, measured %.4f s: %+.1f %%, more than %.0f %%", m.Scenario, m.Nodes, m.Size, got, m.Median, 100*off, 100*m.Tolerance())
		}
	}
}
