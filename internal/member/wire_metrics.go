package member

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/hoplite-go/hoplite/internal/actors/storeactor"
	"github.com/hoplite-go/hoplite/internal/transport"
)

// wireCollectors are the counters of what this member refused or
// survived from the network on its remote and data ports: malformed
// remote batches, data-plane connections refused by their limits, panics
// recovered while serving a peer. They read the counters the remote and
// the transport keep, at scrape time.
func (m *Member) wireCollectors() []prometheus.Collector {
	counter := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, f)
	}
	cs := []prometheus.Collector{
		counter("hoplite_remote_rejected_batches_total",
			"Proto.Actor remote message batches this member refused (malformed, a panic while handling them, or a Stop from another process); each closed the stream of the peer that sent it.",
			func() float64 {
				if m.pc == nil || m.pc.Remote == nil {
					return 0
				}
				return float64(m.pc.Remote.RejectedBatches())
			}),
		counter("hoplite_remote_refused_busy_total",
			"Messages this member refused at a full queue: another process's to an actor with 65,536 queued, or its own to a peer whose connection holds 65,536 unsent (a request is answered RESOURCE_EXHAUSTED).",
			func() float64 {
				if m.pc == nil || m.pc.Remote == nil {
					return 0
				}
				return float64(m.pc.Remote.RefusedBusy())
			}),
		counter("hoplite_store_panics_recovered_total",
			"Panics this process's store nodes recovered in the goroutines that serve a peer's reduce task or a fetch's stream (a bug: each failed that position or stream with INTERNAL, logged with its stack, instead of ending the process). Counted per process: the members of an embedded cluster share it.",
			func() float64 { return float64(storeactor.RecoveredPanics()) }),
	}
	// The data plane starts after the metrics: read it at scrape time.
	stats := func() transport.TCPStats {
		if tcp, ok := m.data.(*transport.TCP); ok {
			return tcp.Stats()
		}
		return transport.TCPStats{} // the in-memory data plane takes no connections
	}
	refused := prometheus.NewDesc("hoplite_data_refused_total",
		"Data-plane connections or requests this member refused, by reason (the limits per source and in all, handshake or first request too late, TLS handshake failed).",
		[]string{"reason"}, nil)
	return append(cs,
		counter("hoplite_data_panics_recovered_total",
			"Panics recovered while serving a data-plane connection (a bug: each closed its connection and was logged with its stack).",
			func() float64 { return float64(stats().PanicsRecovered) }),
		counter("hoplite_data_idle_reaped_total",
			"Pooled data-plane connections this member closed because they were idle too long or their peer left.",
			func() float64 { return float64(stats().IdleReaped) }),
		&dataRefusals{stats: stats, desc: refused})
}

// dataRefusals exports a TCP transport's refusals as one counter by
// reason.
type dataRefusals struct {
	stats func() transport.TCPStats
	desc  *prometheus.Desc
}

func (d *dataRefusals) Describe(ch chan<- *prometheus.Desc) { ch <- d.desc }

func (d *dataRefusals) Collect(ch chan<- prometheus.Metric) {
	s := d.stats()
	for _, r := range []struct {
		reason string
		n      int64
	}{
		{"total", s.RefusedTotal}, {"pending", s.RefusedPending}, {"pending_per_source", s.RefusedSourcePending},
		{"per_source", s.RefusedSource}, {"parked_per_source", s.RefusedParked},
		{"handshake_timeout", s.HandshakeTimeouts}, {"handshake_failed", s.HandshakeFailures},
	} {
		ch <- prometheus.MustNewConstMetric(d.desc, prometheus.CounterValue, float64(r.n), r.reason)
	}
}
