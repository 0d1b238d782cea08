package member

import (
	"context"
	"net/http"
	"net/http/pprof"
	"sync"
	"time"

	"github.com/labstack/echo"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/hoplite-go/hoplite/internal/bufalloc"

	"github.com/hoplite-go/hoplite/events"
	"github.com/hoplite-go/hoplite/internal/actors/shardactor"
	"github.com/hoplite-go/hoplite/internal/objstore"
	"github.com/hoplite-go/hoplite/internal/transport"
)

type storeUsage = objstore.Usage

func newMemberMetrics(m *Member) *memberMetrics {
	mm := &memberMetrics{
		reg: prometheus.NewRegistry(),
		received: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hoplite_data_received_bytes_total",
			Help: "Object bytes this member's fetches received, by the member that sent them (the sum over receivers of one peer's label is what that peer sent)."},
			[]string{"peer"}),
		sent: prometheus.NewCounter(prometheus.CounterOpts{Name: "hoplite_data_sent_bytes_total",
			Help: "Object bytes this member's data plane sent to other members."}),
		fetches: prometheus.NewCounter(prometheus.CounterOpts{Name: "hoplite_transfers_total",
			Help: "Transfers (fetch streams) this member opened as a receiver."}),
		fetchSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "hoplite_transfer_duration_seconds",
			Help:    "Duration of this member's completed transfers as a receiver (a broadcast is made of them).",
			Buckets: prometheus.ExponentialBuckets(0.0005, 4, 10)}),
		failovers: prometheus.NewCounter(prometheus.CounterOpts{Name: "hoplite_failovers_total",
			Help: "Transfers that switched to another sender after theirs failed (events.SenderSwitched)."}),
		repairs: prometheus.NewCounter(prometheus.CounterOpts{Name: "hoplite_reduce_repairs_total",
			Help: "Reduce tree positions replaced after a failure (events.TreeNodeReplaced), by coordinators on this member."}),
		replans: prometheus.NewCounter(prometheus.CounterOpts{Name: "hoplite_allreduce_replans_total",
			Help: "AllReduces whose run lost a participant it could not do without and went on as reduce-then-broadcast over the surviving sources (events.AllReduceReplanned), by coordinators on this member."}),
		failures: prometheus.NewCounter(prometheus.CounterOpts{Name: "hoplite_member_failures_total",
			Help: "Failures of other members this member published (events.NodeFailed)."}),
		reduces: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "hoplite_reduce_duration_seconds",
			Help:    "Duration of the Reduces coordinated on this member (events.ReduceDone), by result.",
			Buckets: prometheus.ExponentialBuckets(0.001, 4, 10)}, []string{"result"}),
		locates: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hoplite_data_plane_locates_total",
			Help: "Locates from other members that this member's shards answered on the data plane, by result: ok (the answer: inline bytes, or a sender to stream from), or the error code."},
			[]string{"result"}),
		pushes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hoplite_data_plane_pushes_total",
			Help: "Inline AllReduce results that coordinators on other members pushed to this member's store node on the data plane, by result: ok, or the error code of the store node's answer or of the push itself."},
			[]string{"result"}),
		subscribes: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "hoplite_data_plane_subscribes_total",
			Help: "Reduce coordinators' SubscribeBatches (a coordinator's Subscribes to the sources whose shards are on this member) that this member served on the data plane, by result: inline (inline sources' bytes came back in the answer), sent (every update went as actor messages), or the error code."},
			[]string{"result"}),
	}
	mm.locatesOK = mm.locates.WithLabelValues("ok")
	mm.reg.MustRegister(mm.received, mm.sent, mm.fetches, mm.fetchSeconds, mm.failovers, mm.repairs, mm.replans, mm.failures, mm.reduces, mm.locates, mm.pushes, mm.subscribes,
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if m.manage != nil {
		mm.reg.MustRegister(m.manage.collectors()...)
	}
	mm.reg.MustRegister(m.wireCollectors()...)
	deputy := func(count func(d *locateDeputy) int64) func() float64 {
		return func() float64 { return float64(count(m.deputy)) }
	}
	mm.reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "hoplite_locate_deputy_sent_alone_total",
			Help: "Locates this member sent on alone to a directory shard's member as a Locate deputy (an object's first, or a streamed object's)."},
			deputy(func(d *locateDeputy) int64 { return d.sentAlone.Load() })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "hoplite_locate_deputy_batched_total",
			Help: "Locates this member sent on in batches as a Locate deputy."},
			deputy(func(d *locateDeputy) int64 { return d.batched.Load() })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "hoplite_locate_deputy_batches_total",
			Help: "Batches of Locates this member sent as a Locate deputy."},
			deputy(func(d *locateDeputy) int64 { return d.batches.Load() })))

	usage := func(f func(u storeUsage) float64) func() float64 {
		return func() float64 { return f(m.store.Usage()) }
	}
	gauge := func(name, help string, f func() float64) {
		mm.reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, f))
	}
	gauge("hoplite_store_pinned_bytes", "Bytes of creator copies in this member's store (never evicted before Delete).",
		usage(func(u storeUsage) float64 { return float64(u.Pinned) }))
	gauge("hoplite_store_cached_bytes", "Bytes of other copies in this member's store (evictable once idle).",
		usage(func(u storeUsage) float64 { return float64(u.Cached) }))
	gauge("hoplite_store_capacity_bytes", "This member's store capacity.",
		usage(func(u storeUsage) float64 { return float64(u.Capacity) }))
	gauge("hoplite_store_objects", "Objects in this member's store.",
		usage(func(u storeUsage) float64 { return float64(u.Objects) }))
	mm.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "hoplite_store_evictions_total",
		Help: "Copies this member's store evicted to make room."}, usage(func(u storeUsage) float64 { return float64(u.Evictions) })))
	gauge("hoplite_warm_memory_bytes", "Memory for large object buffers that this process holds faulted in, ready for the next ones: what is left of the reserve its warm-up faulted in (all of it again once nothing references the buffers cut from it), and the buffers nothing references any more that it kept (hoplite node -warm-memory).",
		func() float64 { return float64(bufalloc.Reserved() + bufalloc.Kept()) })
	gauge("hoplite_latency_seconds", "The control-plane latency L this member measured (the reduce cost model's).", func() float64 {
		if m.estimator == nil {
			return 0
		}
		l, _, _, _ := m.estimator.Estimate()
		return l.Seconds()
	})
	gauge("hoplite_bandwidth_bytes_per_second", "The data-plane bandwidth B this member measured (the reduce cost model's).", func() float64 {
		if m.estimator == nil {
			return 0
		}
		_, b, _, _ := m.estimator.Estimate()
		return b
	})
	mm.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "hoplite_data_plane_paced_bytes_total",
		Help: "Bytes this member sent on paced data-plane streams (a sliced AllReduce's; paced at the member's link rate, -link-rate, if set)."},
		func() float64 {
			if p, ok := m.data.(interface{ PacedBytes() int64 }); ok {
				return float64(p.PacedBytes())
			}
			return 0
		}))
	mm.reg.MustRegister(&shardCollector{m: m, desc: prometheus.NewDesc("hoplite_directory_objects",
		"Objects known to each directory shard hosted on this member.", []string{"shard"}, nil)})
	return mm
}

// observe counts what the member's EventStream reports.
func (mm *memberMetrics) observe(e any) {
	switch e := e.(type) {
	case *events.SenderSwitched:
		mm.failovers.Inc()
	case *events.TreeNodeReplaced:
		mm.repairs.Inc()
	case *events.AllReduceReplanned:
		mm.replans.Inc()
	case *events.NodeFailed:
		mm.failures.Inc()
		// Labels of members that are gone would pile up over restarts.
		mm.received.DeleteLabelValues(e.Node)
	case *events.ReduceDone:
		result := "ok"
		if e.Err != nil {
			result = "error"
		}
		mm.reduces.WithLabelValues(result).Observe(e.Elapsed.Seconds())
	}
}

func (mm *memberMetrics) handler() http.Handler {
	return promhttp.HandlerFor(mm.reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// shardCollector asks the local directory shards for their sizes at
// each scrape (they are actors: their tables are theirs alone).
type shardCollector struct {
	m    *Member
	desc *prometheus.Desc
}

func (c *shardCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *shardCollector) Collect(ch chan<- prometheus.Metric) {
	shards := c.m.localShards()
	var wg sync.WaitGroup
	for _, pid := range shards {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Local actors: a second is long; a shard that is moving is
			// left out of this scrape.
			res, err := c.m.system.Root.RequestFuture(pid, shardactor.CountObjects{}, time.Second).Result()
			if n, ok := res.(shardactor.ObjectCount); err == nil && ok {
				ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n.Objects), pid.GetId())
			}
		}()
	}
	wg.Wait()
}

// countingSource counts the object bytes the data plane serves.
type countingSource struct {
	transport.Source
	sent prometheus.Counter
}

func (s *countingSource) OpenObject(ctx context.Context, id string) (transport.ObjectReader, error) {
	r, err := s.Source.OpenObject(ctx, id)
	if err != nil {
		return nil, err
	}
	return &countingReader{ObjectReader: r, sent: s.sent}, nil
}

type countingReader struct {
	transport.ObjectReader
	sent prometheus.Counter
}

func (r *countingReader) ReadAt(ctx context.Context, off int64, max int) ([]byte, error) {
	b, err := r.ObjectReader.ReadAt(ctx, off, max)
	r.sent.Add(float64(len(b)))
	return b, err
}

// manageRoutes adds the operator endpoints to the manage port: /metrics,
// and /debug/pprof when MemberConfig.Pprof is set.
func (m *Member) manageRoutes(e *echo.Echo) {
	e.GET("/metrics", echo.WrapHandler(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if m.metrics == nil {
			http.Error(w, "starting", http.StatusServiceUnavailable)
			return
		}
		m.metrics.handler().ServeHTTP(w, r)
	})))
	m.liveRoutes(e)
	if m.cfg.Pprof {
		e.GET("/debug/pprof/*", echo.WrapHandler(http.HandlerFunc(pprof.Index)))
		e.GET("/debug/pprof/cmdline", echo.WrapHandler(http.HandlerFunc(pprof.Cmdline)))
		e.GET("/debug/pprof/profile", echo.WrapHandler(http.HandlerFunc(pprof.Profile)))
		e.GET("/debug/pprof/symbol", echo.WrapHandler(http.HandlerFunc(pprof.Symbol)))
		e.GET("/debug/pprof/trace", echo.WrapHandler(http.HandlerFunc(pprof.Trace)))
	}
}
