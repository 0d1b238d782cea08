package sim

import (
	"github.com/hoplite-go/hoplite/internal/barrier/policy"
)

// flatBarrier is the barrier without its tree, the baseline the tree is
// measured against: every host's Enter goes to the manager, which
// answers each label itself.
func flatBarrier(c Config) (*Outcome, error) {
	w := newWorld(c.Params)
	out := &Outcome{Scenario: "barrier", Nodes: c.N, Seed: c.Seed}
	const name = "barrier"
	mgr := w.shardHost(w.shardFor(name))
	b, err := policy.New(policy.Options{MaxParticipants: c.N})
	if err != nil {
		return nil, err
	}
	released := make([]bool, c.N)
	fire := func(labels []string) {
		for _, l := range labels {
			h := w.byName[l]
			w.send(mgr, h, qStore, viaActor, func() {
				released[h.idx] = true
				out.Time = max(out.Time, w.eng.now)
			})
		}
	}
	for _, h := range w.hosts {
		w.send(h, mgr, qCoord, viaActor, func() {
			d := b.Step(w.now(), policy.Enter{Label: h.name, Host: h.name})
			if d.Err != nil {
				w.violate("enter %s: %v", h.name, d.Err)
				return
			}
			fire(d.Release)
			fire(d.LateFire)
		})
	}
	w.eng.run(c.Timeout, nil)
	for i, ok := range released {
		if !ok {
			w.violate("%s was never released", w.hosts[i].name)
		}
	}
	out.Messages = w.msgs
	out.Violations = append(out.Violations, w.violations...)
	return out, nil
}
