// Package metrics holds hookbox's Prometheus metrics, on a registry of their
// own (never the process-global default), served at GET /metrics.
//
// Labels are bounded and carry no secret: a source label is only ever a
// configured source name ("" for anything else, such as a request to an
// unknown source); no payload, header, delivery id or error text becomes a
// label.
//
// The metrics:
//
//	hookbox_deliveries_total{source,outcome}  deliveries received; outcome is
//	    new, duplicate, handshake (a sender's URL check, answered, not
//	    stored), or why one was refused: bad_signature, malformed (400, and
//	    415: a compressed body), too_large, too_slow (408: the body came too
//	    slowly), unknown_source,
//	    forbidden (allow_ips), unavailable
//	hookbox_ingest_seconds                    receipt to reply of stored deliveries,
//	    the sender's upload of the body included
//	hookbox_ingest_store_seconds              the database's share of it: the
//	    wait for the commit, from after the body was read and verified
//	hookbox_ingest_batch_size                 deliveries per group commit that
//	    committed
//	hookbox_attempts_total{source,outcome}    attempts: done, retry, dead, lost,
//	    released (cut short by shutdown and given back, not counted); an
//	    event ended dead without running (its last attempt's worker
//	    stopped) counts under dead
//	hookbox_attempt_seconds{source}           how long an attempt's work ran
//	    (buckets 5 ms, 25 ms, 100 ms, 500 ms, 1 s, 5 s, 30 s, 2 min)
//	hookbox_dead_total{source}                events that went dead
//	hookbox_events{status}                    events by status (at scrape time)
//	hookbox_oldest_due_seconds                age of the longest-waiting due event
//	hookbox_target_circuit_open{target}       1 while a target's circuit is open
//	hookbox_target_keys_held{target}          order keys of a target (order_by,
//	    on_dead: hold) whose first delivery is dead while later ones of
//	    the key wait behind it, until it is replayed or skipped (at scrape
//	    time, cached as hookbox_events; see WatchHeldKeys)
//	hookbox_worker_store_errors_total         the workers' calls to the database
//	    that failed (claims, outcomes, the due-queue question, ...)
//	hookbox_worker_slots                      the workers' slots
//	    (workers.concurrency): a target's delivery or a two-phase
//	    handler's Prepare holds one while it runs
//	hookbox_worker_slots_busy                 the slots held now (at scrape
//	    time); at hookbox_worker_slots for long, deliveries wait for slots
//	hookbox_rejections_unlogged_total{source,why}  refused deliveries left out
//	    of the rejected-deliveries log: rate_limited, queue_full, store_failed,
//	    stopped (refused while hookbox stopped)
//
// A named target's deliveries are counted under the label "source/target".
// The series that can move are there at 0 from the start (see NewQueues):
// the delivery outcomes of each source, and the attempt series of each
// queue something works.
//
// plus the Go runtime and process collectors.
package metrics

import (
	"context"
	"errors"
	"log/slog"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	dto "github.com/prometheus/client_model/go"

	"github.com/hookbox/hookbox"
)

// Delivery outcomes, the values of hookbox_deliveries_total's outcome label.
const (
	OutcomeNew          = "new"
	OutcomeDuplicate    = "duplicate"
	OutcomeBadSignature = "bad_signature"
	OutcomeMalformed    = "malformed"
	OutcomeTooLarge     = "too_large"
	// OutcomeTooSlow is a body that did not arrive at the minimum rate.
	OutcomeTooSlow       = "too_slow"
	OutcomeUnknownSource = "unknown_source"
	OutcomeForbidden     = "forbidden"
	OutcomeUnavailable   = "unavailable"
	// OutcomeHandshake is a sender's verified URL check, answered and not
	// stored.
	OutcomeHandshake = "handshake"
)

// deliveryOutcomes are the outcomes known in advance; any other value is
// counted as "other" so a caller's typo cannot grow the label set.
var deliveryOutcomes = []string{
	OutcomeNew, OutcomeDuplicate, OutcomeBadSignature, OutcomeMalformed,
	OutcomeTooLarge, OutcomeTooSlow, OutcomeUnknownSource, OutcomeForbidden, OutcomeUnavailable, OutcomeHandshake,
}

// attemptOutcomes are the values of hookbox_attempts_total's outcome label.
var attemptOutcomes = []string{hookbox.AttemptDone, hookbox.AttemptRetry, hookbox.AttemptDead, hookbox.AttemptLost, hookbox.AttemptReleased}

// ingestBuckets are the buckets of the ingest histograms, in seconds.
var ingestBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}

// attemptBuckets are the buckets of hookbox_attempt_seconds, in seconds:
// eight, each four or five times the last but for 1 s, from 5 ms to the
// two minutes a long exec may take. The histogram has a series per
// bucket for each worked queue, so its buckets are most of a scrape:
// with fifteen (1 ms to 120 s, these among them), 594 queues made
// 17,051 series and 1.27 MB, 10,692 of them this histogram's; with these
// eight, 12,893.
var attemptBuckets = []float64{.005, .025, .1, .5, 1, 5, 30, 120}

// DefaultStatsCache is how long the result of one Stats query serves
// scrapes.
const DefaultStatsCache = 5 * time.Second

// Metrics is one process's metrics. Its methods are safe for concurrent use
// and cheap enough for the ingest path.
type Metrics struct {
	reg     *prometheus.Registry
	sources map[string]bool

	deliveries     *prometheus.CounterVec
	ingestSeconds  prometheus.Histogram
	storeSeconds   prometheus.Histogram
	batchSize      prometheus.Histogram
	attempts       *prometheus.CounterVec
	attemptSeconds *prometheus.HistogramVec
	dead           *prometheus.CounterVec
	circuit        *prometheus.GaugeVec
	unlogged       *prometheus.CounterVec
	connRefused    prometheus.Counter
	workerStore    prometheus.Counter

	// Pre-resolved children of the configured sources, read-only after
	// New: the hot paths look up a map instead of hashing label values.
	deliveryChild map[string]map[string]prometheus.Counter
	attemptChild  map[string]map[string]prometheus.Counter
	seconds       map[string]prometheus.Observer
	deadChild     map[string]prometheus.Counter
}

// New returns metrics for the given configured source names on a new
// registry, with every per-source series of each name created at 0: the
// names both receive deliveries and have their events worked. It is
// NewQueues(sources, sources).
func New(sources []string) *Metrics { return NewQueues(sources, sources) }

// NewQueues returns metrics on a new registry for the configured names:
// sources receive HTTP deliveries, worked are the queue names whose
// events are worked (a source with its own forward, exec or Go handlers,
// and a named target's "source/target"). A name in either list is a
// label value the metrics may carry; any other becomes "".
//
// Series are created at 0 only where they can move, so that rate() and
// increase() see their first event and alerts see a zero before it:
// hookbox_deliveries_total's for each source (and unknown_source for ""),
// hookbox_attempts_total's, hookbox_attempt_seconds and hookbox_dead_total
// for each worked name. A queue name is never sent a delivery, and the
// events of a source with named targets or store_only are never worked
// themselves (their deliveries are), so at 200 sources of 5 targets
// each, creating every series for every name put about 14,000 series
// that always read 0 in each scrape. A series of a listed name that was
// not created in advance is still counted once it occurs.
func NewQueues(sources, worked []string) *Metrics {
	m := &Metrics{
		reg:     prometheus.NewRegistry(),
		sources: map[string]bool{},
		deliveries: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookbox_deliveries_total",
			Help: "Deliveries received, by source and outcome (new, duplicate, or the reason for refusing one). source is empty for an unknown source.",
		}, []string{"source", "outcome"}),
		ingestSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hookbox_ingest_seconds",
			Help:    "Time from receiving a delivery's request to replying 202, for stored deliveries (new or duplicate). It includes the sender's upload of the body: hookbox_ingest_store_seconds is the database's share.",
			Buckets: ingestBuckets,
		}),
		storeSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hookbox_ingest_store_seconds",
			Help:    "Time a stored delivery (new or duplicate) waited for the database to commit it, from after its body was read and verified: the database's share of hookbox_ingest_seconds.",
			Buckets: ingestBuckets,
		}),
		batchSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "hookbox_ingest_batch_size",
			Help:    "Deliveries committed together in one group-commit transaction.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 11), // 1 … 1024
		}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookbox_attempts_total",
			Help: "Recorded attempts at events, by source and outcome (done, retry, dead, lost, released).",
		}, []string{"source", "outcome"}),
		attemptSeconds: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "hookbox_attempt_seconds",
			Help:    "How long the work of one attempt (handler or target) ran.",
			Buckets: attemptBuckets,
		}, []string{"source"}),
		dead: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookbox_dead_total",
			Help: "Events that went dead after their last attempt, by source.",
		}, []string{"source"}),
		circuit: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "hookbox_target_circuit_open",
			Help: "1 while a target's circuit is open: it failed too often in a row and waits before a trial delivery.",
		}, []string{"target"}),
		unlogged: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "hookbox_rejections_unlogged_total",
			Help: "Refused deliveries left out of the rejected-deliveries log, by source (empty for unknown ones) and why: rate_limited, queue_full, store_failed or stopped.",
		}, []string{"source", "why"}),
		connRefused: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hookbox_connections_refused_total",
			Help: "Connections closed as soon as they were accepted because their client already held max_client_connections.",
		}),
		workerStore: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "hookbox_worker_store_errors_total",
			Help: "The workers' calls to the database that failed: claims, outcomes, the question which queues have events due, lease extensions. The log's \"worker: ...\" lines say which and why.",
		}),
		deliveryChild: map[string]map[string]prometheus.Counter{},
		attemptChild:  map[string]map[string]prometheus.Counter{},
		seconds:       map[string]prometheus.Observer{},
		deadChild:     map[string]prometheus.Counter{},
	}
	m.reg.MustRegister(m.deliveries, m.ingestSeconds, m.storeSeconds, m.batchSize, m.attempts, m.attemptSeconds, m.dead, m.circuit, m.unlogged, m.connRefused, m.workerStore,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	for _, s := range slices.Concat(sources, worked) {
		if s != "" {
			m.sources[s] = true
		}
	}
	// The label "" stands for every unknown source.
	for _, s := range append([]string{""}, sources...) {
		if _, done := m.deliveryChild[s]; done {
			continue
		}
		dc := map[string]prometheus.Counter{}
		for _, o := range deliveryOutcomes {
			if (s == "") == (o == OutcomeUnknownSource) {
				dc[o] = m.deliveries.WithLabelValues(s, o)
			}
		}
		m.deliveryChild[s] = dc
	}
	// Attempts at events of an unknown source, or of a name not worked
	// in advance, are resolved lazily.
	for _, s := range worked {
		if _, done := m.attemptChild[s]; done || s == "" {
			continue
		}
		ac := map[string]prometheus.Counter{}
		for _, o := range attemptOutcomes {
			ac[o] = m.attempts.WithLabelValues(s, o)
		}
		m.attemptChild[s] = ac
		m.seconds[s] = m.attemptSeconds.WithLabelValues(s)
		m.deadChild[s] = m.dead.WithLabelValues(s)
	}
	return m
}

// Registry returns the registry the metrics live in, to add collectors to.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Handler serves the registry in the Prometheus exposition format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{Registry: m.reg})
}

// source bounds a source name to the configured ones.
func (m *Metrics) source(name string) string {
	if m.sources[name] {
		return name
	}
	return ""
}

// Delivery counts one delivery that ended with outcome (one of the Outcome
// constants); took is the time from receipt to reply. It has the shape of
// server.Config.Observe.
func (m *Metrics) Delivery(source, outcome string, took time.Duration) {
	src := m.source(source)
	c, ok := m.deliveryChild[src][outcome]
	if !ok {
		if !slices.Contains(deliveryOutcomes, outcome) {
			outcome = "other"
		}
		c = m.deliveries.WithLabelValues(src, outcome)
	}
	c.Inc()
	if (outcome == OutcomeNew || outcome == OutcomeDuplicate) && took > 0 {
		m.ingestSeconds.Observe(took.Seconds())
	}
}

// RejectionUnlogged counts one refused delivery the rejected-deliveries
// log did not keep, and why. It has the shape of rejected.Options.Dropped.
func (m *Metrics) RejectionUnlogged(source, why string) {
	m.unlogged.WithLabelValues(m.source(source), why).Inc()
}

// ConnectionRefused counts one connection closed because its client held
// as many as it may (server.LimitClients).
func (m *Metrics) ConnectionRefused() { m.connRefused.Inc() }

// WorkerStoreError counts one failed call of the workers to the
// database. It has the shape of worker.Options.OnStoreError.
func (m *Metrics) WorkerStoreError() { m.workerStore.Inc() }

// StoreWait records how long one stored delivery waited for its commit.
// It has the shape of server.Config.ObserveStore.
func (m *Metrics) StoreWait(took time.Duration) {
	m.storeSeconds.Observe(took.Seconds())
}

// Batch records one group commit of size deliveries, when it committed
// (err is nil). A failed one is left out: during an outage the committer
// fails every request waiting at once as one "batch", most of which were
// never in a transaction, and the panel of batch sizes would show large
// commits exactly while nothing commits. It has the shape of
// groupcommit.Options.OnBatch.
func (m *Metrics) Batch(size int, took time.Duration, err error) {
	if err != nil {
		return
	}
	m.batchSize.Observe(float64(size))
}

// Circuit records that the circuit of target (a configured queue name)
// opened or closed. It has the shape of worker.Options.OnCircuit.
func (m *Metrics) Circuit(target string, open bool) {
	v := 0.0
	if open {
		v = 1
	}
	m.circuit.WithLabelValues(m.source(target)).Set(v)
}

// Attempt records one recorded attempt at ev. It has the shape of
// worker.Options.OnAttempt.
func (m *Metrics) Attempt(ev *hookbox.Event, o hookbox.Outcome, err error) {
	src := m.source(ev.Source)
	outcome := o.AttemptOutcome()
	ran := outcome != hookbox.AttemptNotRun // and so has no run time
	if !ran {
		// Ended dead without running (hookbox.Outcome.NotRun): the end of
		// the event's attempts, counted with the other deaths, so that
		// every dead event is one dead here as in hookbox_dead_total.
		outcome = hookbox.AttemptDead
	}
	if errors.Is(err, hookbox.ErrLeaseLost) {
		outcome = hookbox.AttemptLost
	}
	if c, ok := m.attemptChild[src][outcome]; ok {
		c.Inc()
	} else {
		m.attempts.WithLabelValues(src, outcome).Inc()
	}
	if ran && !o.StartedAt.IsZero() && !o.FinishedAt.Before(o.StartedAt) {
		obs, ok := m.seconds[src]
		if !ok {
			obs = m.attemptSeconds.WithLabelValues(src)
		}
		obs.Observe(o.FinishedAt.Sub(o.StartedAt).Seconds())
	}
	if outcome == hookbox.AttemptDead {
		c, ok := m.deadChild[src]
		if !ok {
			c = m.dead.WithLabelValues(src)
		}
		c.Inc()
	}
}

// StatsFunc reports the queue's state; hookbox.Ops.Stats has its shape.
type StatsFunc func(ctx context.Context, now time.Time) (hookbox.Stats, error)

// WatchStats adds hookbox_events{status} and hookbox_oldest_due_seconds,
// computed from stats when scraped; one query's result serves the scrapes
// of the next cacheFor (at least DefaultStatsCache), or of ten times as
// long as the query took, when that is longer. A failing query is
// logged to log (nil: discarded) and leaves both metrics out of that
// scrape. Call it at most once.
func (m *Metrics) WatchStats(stats StatsFunc, cacheFor time.Duration, log *slog.Logger) {
	m.reg.MustRegister(&statsCollector{cache: newScrapeCache(stats, "queue stats", cacheFor, log)})
}

// WatchSlots adds hookbox_worker_slots and hookbox_worker_slots_busy,
// read from slots (worker.Pool.Slots has its shape) when scraped: how
// many slots the workers have, and how many work holds now. Call it at
// most once.
func (m *Metrics) WatchSlots(slots func() (held, total int)) {
	m.reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "hookbox_worker_slots",
			Help: "The workers' slots (workers.concurrency): a target's delivery or a two-phase handler's Prepare holds one while it runs."},
			func() float64 { _, total := slots(); return float64(total) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "hookbox_worker_slots_busy",
			Help: "The workers' slots held now; at hookbox_worker_slots for long, deliveries wait for slots (raise workers.concurrency, or a target hangs)."},
			func() float64 { held, _ := slots(); return float64(held) }),
	)
}

// HeldKeysFunc counts, per queue name, the order keys a dead delivery
// holds; hookbox.Ops.HeldKeys has its shape.
type HeldKeysFunc func(ctx context.Context, names []string) (map[string]int, error)

// WatchHeldKeys adds hookbox_target_keys_held{target}, one series per
// name of targets (the "source/target" of each target with order_by whose
// dead deliveries hold their keys, on_dead: hold), computed from held
// when scraped and cached as WatchStats' figures are, apart from them: a
// failing or slow count leaves this metric out of that scrape (and is
// logged to log), never the others. The label carries the target's name
// only, never an order key. Call it at most once; with no targets it adds
// nothing.
func (m *Metrics) WatchHeldKeys(held HeldKeysFunc, targets []string, cacheFor time.Duration, log *slog.Logger) {
	if len(targets) == 0 {
		return
	}
	names := slices.Clone(targets)
	query := func(ctx context.Context, _ time.Time) (map[string]int, error) { return held(ctx, names) }
	m.reg.MustRegister(&heldKeysCollector{names: names, cache: newScrapeCache(query, "keys held by dead deliveries", cacheFor, log)})
}

var (
	eventsDesc = prometheus.NewDesc("hookbox_events",
		"Events by status, from the database at scrape time (cached a few seconds, longer when counting them takes long; from 100,000 done events on, the done count is read again at most every minute).", []string{"status"}, nil)
	oldestDueDesc = prometheus.NewDesc("hookbox_oldest_due_seconds",
		"How long the longest-waiting due event has been due; 0 when none is due.", nil, nil)
	keysHeldDesc = prometheus.NewDesc("hookbox_target_keys_held",
		"Order keys of a target (order_by, on_dead: hold) whose first delivery is dead while later deliveries of the key wait behind it, until it is replayed or skipped; from the database at scrape time (cached as hookbox_events).", []string{"target"}, nil)
)

var allStatuses = []hookbox.Status{hookbox.StatusPending, hookbox.StatusProcessing, hookbox.StatusDone, hookbox.StatusDead}

// scrapeQueryTimeout bounds one query of the store at scrape time: a
// store that does not answer leaves its metrics out of the scrape rather
// than making it hang.
const scrapeQueryTimeout = 5 * time.Second

// scrapeCache runs a query of the store at scrape time, at most once per
// cacheFor, and at most once per statsSpacing times as long as its last
// query took.
type scrapeCache[T any] struct {
	query    func(ctx context.Context, now time.Time) (T, error)
	what     string // for the log
	cacheFor time.Duration
	log      *slog.Logger

	mu      sync.Mutex
	fetched time.Time
	took    time.Duration // how long the last query took
	last    T
	ok      bool
}

// newScrapeCache caches query's result for cacheFor, at least
// DefaultStatsCache; log (nil: discarded) gets its failures.
func newScrapeCache[T any](query func(ctx context.Context, now time.Time) (T, error), what string, cacheFor time.Duration, log *slog.Logger) *scrapeCache[T] {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &scrapeCache[T]{query: query, what: what, cacheFor: max(cacheFor, DefaultStatsCache), log: log}
}

// statsSpacing bounds the share of time the stats query may run: a query
// that took a second is not run again for ten. The counts are the
// database's, read by every process of a deployment at each scrape; on a
// table of millions of events that is slow, and the figures do not need
// to be newer than that.
const statsSpacing = 10

// read returns the last result, querying again first when it is due;
// ok is false when the last query failed. fetched is when that query
// started.
func (c *scrapeCache[T]) read() (v T, ok bool, fetched time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if c.fetched.IsZero() || now.Sub(c.fetched) >= max(c.cacheFor, statsSpacing*c.took) {
		ctx, cancel := context.WithTimeout(context.Background(), scrapeQueryTimeout)
		v, err := c.query(ctx, now)
		cancel()
		c.fetched, c.took, c.last, c.ok = now, time.Since(now), v, err == nil
		if err != nil {
			c.log.Warn("metrics: "+c.what, "err", err)
		}
	}
	return c.last, c.ok, c.fetched
}

// statsCollector reports the queue's Stats (hookbox_events,
// hookbox_oldest_due_seconds).
type statsCollector struct {
	cache *scrapeCache[hookbox.Stats]
}

func (c *statsCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- eventsDesc
	ch <- oldestDueDesc
}

func (c *statsCollector) Collect(ch chan<- prometheus.Metric) {
	st, ok, fetched := c.cache.read()
	if !ok {
		return
	}
	// Read after the cache: a scrape that waited for another's query
	// counts that wait as waiting too.
	now := time.Now()
	for _, s := range allStatuses {
		ch <- prometheus.MustNewConstMetric(eventsDesc, prometheus.GaugeValue, float64(st.ByStatus[s]), string(s))
	}
	// The store's age, read on the clock it judges due times by (the
	// database server's, on PostgreSQL), plus how long the figures were
	// kept: now minus OldestDue would count the difference between this
	// host's clock and the server's as waiting, or hide due work.
	age := 0.0
	if !st.OldestDue.IsZero() {
		age = (st.OldestDueAge + max(0, now.Sub(fetched))).Seconds()
	}
	ch <- prometheus.MustNewConstMetric(oldestDueDesc, prometheus.GaugeValue, age)
}

// heldKeysCollector reports hookbox_target_keys_held for its names.
type heldKeysCollector struct {
	names []string
	cache *scrapeCache[map[string]int]
}

func (c *heldKeysCollector) Describe(ch chan<- *prometheus.Desc) { ch <- keysHeldDesc }

func (c *heldKeysCollector) Collect(ch chan<- prometheus.Metric) {
	held, ok, _ := c.cache.read()
	if !ok {
		return
	}
	seen := map[string]bool{}
	for _, name := range c.names {
		if !seen[name] {
			seen[name] = true
			ch <- prometheus.MustNewConstMetric(keysHeldDesc, prometheus.GaugeValue, float64(held[name]), name)
		}
	}
}

// DeliveryCounts returns, per source ("" for unknown ones), how many
// deliveries this process answered with each outcome since it started:
// the counters behind hookbox_deliveries_total, for the operator's
// overview.
func (m *Metrics) DeliveryCounts() map[string]map[string]int64 {
	out := map[string]map[string]int64{}
	ch := make(chan prometheus.Metric, 64)
	go func() {
		m.deliveries.Collect(ch)
		close(ch)
	}()
	for c := range ch {
		var d dto.Metric
		if c.Write(&d) != nil || d.Counter == nil {
			continue
		}
		var source, outcome string
		for _, l := range d.Label {
			switch l.GetName() {
			case "source":
				source = l.GetValue()
			case "outcome":
				outcome = l.GetValue()
			}
		}
		if out[source] == nil {
			out[source] = map[string]int64{}
		}
		out[source][outcome] += int64(d.Counter.GetValue())
	}
	return out
}
