package sim

import "time"

// Floor is hoplite bench's round-trip floor in the model: at time zero
// host 0 sends a bare request to every other host at once (the reduce
// pattern: a coordinator's fan-out) or every other host sends one to
// host 0 (fanIn: the broadcast pattern, receivers asking one shard), each
// as a Proto.Actor message or, dataPlane, a control request on the data
// plane, and each is answered at once; Floor is when the last answer has
// been taken in. A bare request costs its plane's latency and CPU and no
// processing. The testbed's actor-rtt and data-rtt are these round trips
// between its nodes, measured beside its collectives: ActorLatency,
// ActorCPU, RequestLatency and RequestCPU are fitted to them.
func Floor(p Params, dataPlane, fanIn bool) time.Duration {
	w := newWorld(p)
	via := viaActor
	if dataPlane {
		via = viaRequest
	}
	var last time.Duration
	for _, h := range w.hosts[1:] {
		a, b := w.hosts[0], h
		if fanIn {
			a, b = b, a
		}
		w.post(a, b, qStore, via, 0, func() {
			w.post(b, a, qStore, via, 0, func() { last = max(last, w.eng.now) })
		})
	}
	w.eng.run(time.Minute, nil)
	return last
}
