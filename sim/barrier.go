package sim

import (
	"github.com/hoplite-go/hoplite/internal/barrier/policy"
)

// barrier runs one traditional barrier of every host: the real policy
// core on the host its name places it on (the shard host of the name,
// as a directory shard would), every host entering at time zero. Its
// time is the last release reaching its host. The manager's replica
// (primary/backup) is not simulated.
func (w *world) barrier(c Config, out *Outcome) error {
	const name = "barrier"
	mgr := w.shardHost(w.shardFor(name))
	b, err := policy.New(policy.Options{MaxParticipants: c.N})
	if err != nil {
		return err
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
			d, err := b.Enter(w.now(), h.name, h.name)
			if err != nil {
				w.violate("enter %s: %v", h.name, err)
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
	return nil
}
