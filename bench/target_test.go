package bench

import (
	"context"
	"slices"
	"testing"
)

// targetBackend answers TargetID only.
type targetBackend struct {
	backend
	asked []string
}

func (b *targetBackend) TargetID(_ context.Context, prefix string) (string, error) {
	b.asked = append(b.asked, prefix)
	return prefix + "-on-host-0", nil
}

// ours asks the backend for a target whose shard is on host 0, the
// caller's; ours-any-target names the repetition's own id and asks
// nothing, so that its coordinator lands where an application's would.
func TestReduceTargetPlacement(t *testing.T) {
	ctx := context.Background()
	b := &targetBackend{}
	m := &measurement{b: b, tag: "reduce-1KiB-r3", sys: system{name: SysOurs}}
	got, err := m.target(ctx)
	if err != nil || got != "reduce-1KiB-r3-sum-on-host-0" || len(b.asked) != 1 {
		t.Fatalf("ours: target %q, %v, backend asked %v; want the backend's id on host 0", got, err, b.asked)
	}
	b.asked = nil
	m.sys = system{name: SysAnyTarget, anyTarget: true}
	got, err = m.target(ctx)
	if err != nil || got != "reduce-1KiB-r3-sum" || len(b.asked) != 0 {
		t.Fatalf("any-target: target %q, %v, backend asked %v; want the rep's own id, nothing asked", got, err, b.asked)
	}
	o := &Options{Scenario: "reduce", Nodes: 8, Peers: []string{"any-target"}}
	if !slices.ContainsFunc(o.systems(), func(s system) bool { return s.name == SysAnyTarget && s.anyTarget }) {
		t.Errorf("--peers any-target: systems %v, want %s among them", o.systems(), SysAnyTarget)
	}
}
