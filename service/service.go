// Package service assembles a running hookbox from a Config: the store, the
// group committer in front of it, the HTTP server and the workers. It
// is what `hookbox serve` runs and what a Go program embeds.
//
// Every configured secret (see Redactor) is masked in the service's log
// lines and in the errors its forward and exec targets return.
//
// Shutdown order is the one that loses nothing: stop accepting HTTP requests
// and let in-flight ones finish within the shutdown timeout (15 s at most;
// the connections of those still sending are then closed, unanswered, and
// their senders retry; deliveries already handed over are committed or
// refused),
// then let running work finish within the shutdown timeout (cancelling and
// releasing what is left), then flush the committer, then close the store.
package service

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/config"
	"github.com/hookbox/hookbox/groupcommit"
	"github.com/hookbox/hookbox/internal/lograte"
	"github.com/hookbox/hookbox/metrics"
	"github.com/hookbox/hookbox/postgres"
	"github.com/hookbox/hookbox/redact"
	"github.com/hookbox/hookbox/rejected"
	"github.com/hookbox/hookbox/server"
	"github.com/hookbox/hookbox/sqlite"
	"github.com/hookbox/hookbox/target"
	"github.com/hookbox/hookbox/tracing"
	"github.com/hookbox/hookbox/verify"
	"github.com/hookbox/hookbox/worker"
)

// Service is one hookbox process's worth of parts.
type Service struct {
	Config *config.Config
	Store  hookbox.Store
	Server *server.Server
	// Pool runs the work for stored events; register Go handlers on it
	// (Pool.Handle) before Serve.
	Pool *worker.Pool
	// Metrics are served at GET /metrics.
	Metrics *metrics.Metrics
	// Rejections records refused deliveries in the store's bounded log.
	Rejections *rejected.Recorder
	// Admin serves /admin/…, /metrics and the UI on Config.AdminListen; nil
	// when that is unset and they are served by Server with the webhooks.
	Admin *http.ServeMux
	// AdminListener, when set before Serve, is used instead of listening
	// on Config.AdminListen (tests pass one on port 0).
	AdminListener net.Listener

	// Version is the version shown in the start log line; hookbox serve
	// sets it. When empty, the module version from the build information
	// is shown, if there is one.
	Version string

	log            *slog.Logger
	committer      *groupcommit.Committer[hookbox.Delivery, hookbox.Receipt]
	nonces         *groupcommit.Committer[hookbox.Nonce, bool]
	recheckSources map[string]rejected.Source
	// counts are the deliveries answered since the last summary line.
	counts *deliveryCounts
	// connLog spaces out the lines about connections refused for their
	// client's limit.
	connLog lograte.Limiter
	// libLog spaces out the lines net/http and OpenTelemetry write about
	// their own failures (see libraryErrors).
	libLog lograte.Limiter
}

// Redactor returns the Redactor for cfg's secrets: every source's signing
// secrets, forward header values (and the credential they carry, see
// redact.HeaderSecrets), the exec_env values (a command that prints its
// environment, or fails quoting it, puts them in its output) but the
// literal settings under a plain name such as APP_ENV=production
// (config.Config.ExecEnvSecrets), the credentials written in exec
// arguments (config.Config.ExecArgSecrets: "-u user:PASSWORD",
// "--token=X", a URL's password), the admin token, the database
// URL's password as pgx reads it (config.DBSecrets), and the values taken
// from the environment or from a ${NAME:-default} default used in their
// place (config.Config.EnvValues: a secret may be kept in
// any of them, a token in an exec argument or a forward URL above all;
// those used only where no secret goes, a name or an exec_dir, are
// shown). It is nil when there is nothing (long enough) to mask.
func Redactor(cfg *config.Config) *redact.Redactor {
	secrets := append([]string{cfg.AdminToken}, cfg.EnvValues()...)
	secrets = append(secrets, cfg.ExecEnvSecrets()...)
	secrets = append(secrets, cfg.ExecArgSecrets()...)
	for _, src := range cfg.Sources {
		secrets = append(secrets, src.Secrets...)
		for _, v := range src.ForwardHeaders {
			secrets = append(secrets, redact.HeaderSecrets(v)...)
		}
		for _, t := range src.Targets {
			for _, v := range t.ForwardHeaders {
				secrets = append(secrets, redact.HeaderSecrets(v)...)
			}
			if t.Sign != nil {
				secrets = append(secrets, t.Sign.Secret)
			}
		}
	}
	secrets = append(secrets, config.DBSecrets(cfg.DB)...)
	return redact.New(secrets...)
}

// New opens the store named by cfg.DB and builds the service around it.
// Every line log receives from the service has cfg's secrets masked. It
// does not log cfg.Warnings (short secrets, a source that admits every
// address, ...): the program that loaded cfg logs them, as hookbox serve
// does, so that config check can print the very same list.
func New(ctx context.Context, cfg *config.Config, log *slog.Logger) (*Service, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dbURL := cfg.DB
	if dbURL == "" {
		dbURL = config.DefaultDB
	}
	storeLog := slog.New(redact.NewHandler(log.Handler(), Redactor(cfg)))
	st, err := OpenStore(ctx, dbURL, StoreOptions{SQLite: sqlite.Options{Synchronous: cfg.SQLite.Synchronous,
		BusyTimeout: time.Duration(cfg.SQLite.BusyTimeout), Serving: true, Logger: storeLog},
		Postgres: postgres.Options{IngestBytes: cfg.InflightBodyBytes(), Logger: storeLog}})
	if err != nil {
		return nil, err
	}
	s, err := newWithStore(cfg, st, IsPostgres(dbURL), log)
	if err != nil {
		st.Close()
		return nil, err
	}
	return s, nil
}

func newWithStore(cfg *config.Config, st hookbox.Store, concurrentWriters bool, log *slog.Logger) (*Service, error) {
	red := Redactor(cfg)
	log = slog.New(redact.NewHandler(log.Handler(), red))
	var sources []server.Source
	byBody := map[string]verify.Verifier{}
	for i, src := range cfg.Sources {
		v, err := verify.New(src.Verify())
		if err != nil {
			return nil, fmt.Errorf("sources[%d] (%s): %w", i, src.Name, err)
		}
		sources = append(sources, server.Source{Name: src.Name, Verifier: v, MaxBodyBytes: src.MaxBodyBytes, AllowIPs: src.AllowedIPs()})
		if src.DedupesByBody() {
			byBody[src.Name] = v
		}
	}
	m := metrics.NewQueues(metricNames(cfg))
	// Events a store ends dead itself (SQLite: a payload that could not be
	// read after its claims) are counted with the workers' deaths, so that
	// hookbox_dead_total and its alert see them.
	if d, ok := st.(interface {
		OnDead(func(*hookbox.Event, hookbox.Outcome))
	}); ok {
		d.OnDead(func(ev *hookbox.Event, o hookbox.Outcome) { m.Attempt(ev, o, nil) })
	}
	txWorkers := 1 // SQLite: one write transaction at a time anyway
	var storeTimeout time.Duration
	if concurrentWriters {
		txWorkers = txWorkersFor(st)
		// Over a network, a statement the database never answers (a
		// connection a firewall dropped silently) is given up on.
		storeTimeout = worker.DefaultStoreTimeout
	}
	pool := worker.New(st, worker.Options{
		BatchSize:   cfg.Workers.BatchSize,
		Concurrency: cfg.Workers.Concurrency,
		// The payloads worked hold no more memory than the body budget
		// lets those received hold.
		MaxPayloadBytes: cfg.WorkerPayloadBytes(),
		TxWorkers:       txWorkers,
		StoreTimeout:    storeTimeout,
		Logger:          log,
		OnAttempt:       m.Attempt,
		OnCircuit:       m.Circuit,
		OnStoreError:    m.WorkerStoreError,
		Trace:           tracing.Handler(red.String),
		Redact:          red.String,
	})
	for _, src := range cfg.Sources {
		pool.SetPolicy(src.Name, src.Policy())
		t, err := target.FromConfig(src, red, log)
		if err != nil {
			return nil, err // names the source
		}
		if t != nil {
			pool.Route(src.Name, tracing.Attempts(t))
			after, cooldown := src.Circuit()
			pool.SetControls(src.Name, worker.Controls{CircuitAfter: after, CircuitCooldown: cooldown})
		}
	}
	if err := routeTargets(cfg, pool, red, log); err != nil {
		return nil, err
	}
	ingest := func(ctx context.Context, ds []hookbox.Delivery) ([]hookbox.Receipt, error) {
		rs, err := st.Ingest(ctx, ds)
		if storedNew(rs) {
			pool.Notify() // new work is committed: wake the workers now
		}
		return rs, err
	}
	commits := &commitHealth{}
	opts := groupcommit.Options{
		MaxBatch: cfg.Ingest.BatchMax,
		MaxWait:  time.Duration(cfg.Ingest.BatchWait),
		Flushers: cfg.Ingest.Flushers, // only when set: see below
		OnBatch: func(size int, took time.Duration, err error) {
			m.Batch(size, took, err)
			commits.observe(err, time.Now())
		},
	}
	var c *groupcommit.Committer[hookbox.Delivery, hookbox.Receipt]
	if cfg.Ingest.Flushers == 0 {
		// One transaction fills while the previous one commits (both
		// stores): fewer, larger commits than independent batches.
		c = groupcommit.NewPipelined(func(ctx context.Context) (groupcommit.Txn[hookbox.Delivery, hookbox.Receipt], error) {
			tx, err := st.BeginIngest(ctx)
			if err != nil {
				return nil, err
			}
			return &notifyingTx{IngestTx: tx, pool: pool}, nil
		}, opts)
	} else {
		c = groupcommit.New(ingest, opts)
	}
	counts := &deliveryCounts{}
	recheckSources, err := RecheckSources(cfg)
	if err != nil {
		return nil, err
	}
	ropts := rejectedOptions(cfg)
	ropts.Logger, ropts.Dropped = log, m.RejectionUnlogged
	recorder := rejected.NewRecorder(st, ropts)
	maxBody := cfg.MaxBodyBytes
	if maxBody == 0 {
		maxBody = config.DefaultMaxBodyBytes
	}
	// Nonces are remembered in batches, as deliveries are stored: a write
	// of its own for each would cost a delivery with one (Mailgun's) two
	// to four times its time under load.
	nonces := groupcommit.New(st.UseNonces, groupcommit.Options{})
	srv := server.New(server.Config{
		Sources: sources,
		Ingest:  withRoutes(cfg, withBodyKeys(byBody, c.Submit)),
		Ready: func(ctx context.Context) error {
			if err := st.Ping(ctx); err != nil {
				return err
			}
			return commits.ready(time.Now())
		},
		MaxBodyBytes: maxBody,
		Logger:       log,
		Observe: func(source, outcome string, took time.Duration) {
			m.Delivery(source, outcome, took)
			counts.observe(source, outcome, took)
		},
		ObserveStore: m.StoreWait,
		Rejections:   recorder,
		UseNonce:     nonces.Submit,

		MaxInflightBodyBytes: cfg.InflightBodyBytes(),
		MinBodyRate:          cfg.BodyRate(),
		TrustedProxies:       cfg.TrustedProxyPrefixes(),
	})
	s := &Service{Config: cfg, Store: st, Server: srv, Pool: pool, Metrics: m, Rejections: recorder,
		log: log, committer: c, nonces: nonces, recheckSources: recheckSources, counts: counts}
	s.registerOps()
	return s, nil
}

// maxTxWorkers is how many transactions of Go handlers run at once on
// PostgreSQL when its pool has room for them (see txWorkersFor).
const maxTxWorkers = 4

// minPoolForTx is the fewest pooled connections Go handlers that pick in
// transactions need: a work transaction holds one while it writes its mark
// on another (worker.Pool.PicksInTransactions).
const minPoolForTx = 2

// pooled is a store whose connections come from a pool of a set size
// (PostgreSQL: pool_max_conns).
type pooled interface{ MaxConns() int }

// txWorkersFor sizes the Go handlers' transactions to st's pool: each holds
// a connection while it writes its mark on a second, and ingest needs one
// too, so maxTxWorkers run only in a pool of maxTxWorkers+2 connections,
// and one in a pool of 3 or fewer. Four transactions in a pool of 2 to 4
// held every connection with a backlog, each waiting for another for its
// mark until the mark's timeout, while deliveries waited for one and were
// answered 503.
func txWorkersFor(st hookbox.Store) int {
	p, ok := st.(pooled)
	if !ok {
		return maxTxWorkers
	}
	return min(maxTxWorkers, max(1, p.MaxConns()-minPoolForTx))
}

// checkPoolSize refuses a pool with too few connections for the Go
// handlers registered (minPoolForTx): their work transactions would wait
// for a connection for their marks, fail, and hold ingest's only one.
func (s *Service) checkPoolSize() error {
	p, ok := s.Store.(pooled)
	if !ok || p.MaxConns() >= minPoolForTx || !s.Pool.PicksInTransactions() {
		return nil
	}
	return fmt.Errorf("pool_max_conns=%d is below the %d connections Go handlers need (a work transaction holds one while it writes its mark on another): raise it or remove it from the database URL",
		p.MaxConns(), minPoolForTx)
}

// InTx runs fn in a write transaction on the service's database, for the
// tables an application's handlers write (create them here at start-up).
func (s *Service) InTx(ctx context.Context, fn func(ctx context.Context, tx *hookbox.Tx) error) error {
	return s.Store.InTx(ctx, fn)
}

// HTTPServer returns an http.Server for h with timeouts that keep a slow or
// idle client from holding a connection forever.
func HTTPServer(h http.Handler) *http.Server {
	return &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       server.DefaultBodyTimeout, // a 25 MB body over a slow link
		WriteTimeout:      60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
	}
}

// maxClockOffset is how far this host's clock may read from the database
// server's before the service warns at start. The queue's times are on
// the server's clock, but receipt times, attempt times and the check of a
// signed timestamp against its source's tolerance are on the host's.
const maxClockOffset = 5 * time.Second

// clockOffsetter is a store that can measure its server's clock against
// this host's (PostgreSQL; a SQLite file has no clock of its own).
type clockOffsetter interface {
	ClockOffset(ctx context.Context) (time.Duration, error)
}

// warnClockOffset logs a warning when the store's server's clock is more
// than maxClockOffset off this host's: hosts that share the database
// should agree with it (NTP).
func (s *Service) warnClockOffset(ctx context.Context) {
	co, ok := s.Store.(clockOffsetter)
	if !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	off, err := co.ClockOffset(ctx)
	if err != nil {
		s.log.Debug("could not compare this host's clock with the database's", "err", err)
		return
	}
	if off.Abs() > maxClockOffset {
		s.log.Warn("this host's clock differs from the database server's: receipt and attempt times, and signed timestamps checked against a source's tolerance, are off by as much; fix time synchronisation (NTP) on the host or the server",
			"database_ahead_by", off.Round(time.Millisecond).String())
	}
}

// ListenAndServe listens on the config's listen address (default :8080)
// and serves until ctx ends; see Serve. The service is closed either way.
func (s *Service) ListenAndServe(ctx context.Context) error {
	addr := s.Config.Listen
	if addr == "" {
		addr = ":8080"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return errors.Join(err, s.Close())
	}
	return s.Serve(ctx, ln)
}

// Serve answers HTTP on ln (and, with admin_listen, the admin endpoints on
// their own address) until ctx ends, then shuts down in order and closes
// the store. It closes ln, also when it fails to start.
func (s *Service) Serve(ctx context.Context, ln net.Listener) error {
	aln := s.AdminListener
	if s.Admin != nil && aln == nil {
		var err error
		if aln, err = net.Listen("tcp", s.Config.AdminListen); err != nil {
			ln.Close() // as http.Server.Serve would have: ln is Serve's to close
			return errors.Join(fmt.Errorf("admin_listen: %w", err), s.Close())
		}
	}
	err := s.checkPoolSize()
	if err == nil {
		err = s.Pool.Start(ctx)
	}
	if err != nil {
		ln.Close()
		if aln != nil {
			aln.Close()
		}
		return errors.Join(err, s.Close())
	}
	waitRetention := s.startRetention(ctx)
	summaryCtx, stopSummary := context.WithCancel(context.WithoutCancel(ctx))
	waitSummary := s.startSummary(summaryCtx, DeliverySummaryInterval)
	// Other processes sharing a PostgreSQL database announce new events;
	// wake this pool for them too.
	go s.Store.Listen(ctx, s.Pool.Notify)
	if tracing.On() {
		tracing.OnError(func(err error) { s.libraryError("tracing", err.Error()) })
	}
	hs := HTTPServer(s.Server)
	hs.ErrorLog = log.New(libraryErrors{s, "http server"}, "", 0)
	hs.ConnState = server.NewClientLimit(s.Config.ClientConnections(), clientLimitExempt(s.Config), s.connectionRefused).ConnState
	errc := make(chan error, 2)
	go func() { errc <- hs.Serve(ln) }()
	var as *http.Server
	if aln != nil {
		// As on the webhook listener (Server.ServeHTTP), a reply to a
		// request whose body was not read (the 404 catch-all, a redirect,
		// /metrics) does not wait for the body.
		as = HTTPServer(server.CloseUnreadBodies(s.Admin))
		as.ErrorLog = hs.ErrorLog
		as.ConnState = server.NewClientLimit(s.Config.ClientConnections(), clientLimitExempt(s.Config), s.connectionRefused).ConnState
		go func() { errc <- as.Serve(aln) }()
		s.log.Info("admin listening", "addr", aln.Addr().String(), "serves", "/admin/, /metrics, /ui/")
	}
	s.warnClockOffset(ctx)
	s.warnUnworked(ctx)
	s.log.Info("listening", s.startAttrs(ln.Addr().String())...)

	var serveErr error
	select {
	case <-ctx.Done():
	case serveErr = <-errc:
	}
	grace := time.Duration(s.Config.ShutdownTimeout)
	if grace <= 0 {
		grace = config.DefaultShutdownTimeout
	}
	s.log.Info("stopping", "in_flight", s.Pool.InFlight(), "grace", grace)
	// Requests in flight get the grace too (at most httpDrain), then their
	// connections are closed: a sender still sending then gets no answer
	// and sends again, as it would had the process died, and nothing it
	// was told was stored is lost. That is a stop as planned, not a
	// failure of the process: logged, not returned.
	drainCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), min(grace, httpDrain))
	defer cancel()
	for _, srv := range []*http.Server{hs, as} {
		if srv == nil {
			continue
		}
		switch derr := srv.Shutdown(drainCtx); {
		case errors.Is(derr, context.DeadlineExceeded):
			s.log.Warn("closed connections whose requests had not ended at shutdown; their senders will retry", "after", min(grace, httpDrain))
			srv.Close()
		case derr != nil:
			s.log.Warn("closing the listener at shutdown", "err", derr)
		}
	}
	if errors.Is(serveErr, http.ErrServerClosed) {
		serveErr = nil
	}
	workCtx, cancelWork := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancelWork()
	if werr := s.Pool.Stop(workCtx); werr != nil {
		s.log.Warn("running work cancelled at shutdown", "err", werr)
	}
	waitRetention()
	stopSummary() // after the last request was answered: the final counts
	waitSummary()
	cerr := s.Close()
	if errors.Is(cerr, postgres.ErrConnectionsLeft) {
		// The exit closes them: a stop as planned, not a failure.
		s.log.Warn(cerr.Error())
		cerr = nil
	}
	err = errors.Join(serveErr, cerr)
	s.log.Info("stopped")
	return err
}

// libraryError logs a failure a library reports on its own (an export of
// traces that failed, a connection net/http gave up on) as the service's
// line: in its format and through its redaction, where the library's
// default wrote plain text to stderr, past a JSON log's parsers. At most
// one line a minute per library, with a count of those held back.
func (s *Service) libraryError(lib, msg string) {
	s.libLog.Log(context.Background(), s.log, slog.LevelWarn, lib, lib+" error", func() []slog.Attr {
		return []slog.Attr{slog.String("err", strings.TrimSpace(msg))}
	})
}

// libraryErrors is a log.Logger's writer that hands each line to
// libraryError.
type libraryErrors struct {
	s   *Service
	lib string
}

func (w libraryErrors) Write(p []byte) (int, error) {
	w.s.libraryError(w.lib, string(p))
	return len(p), nil
}

// clientLimitExempt are the peers whose connections max_client_connections
// does not limit: the local networks, where proxies sit, and the trusted
// proxies.
func clientLimitExempt(cfg *config.Config) []netip.Prefix {
	return append(slices.Clone(server.LocalPrefixes), cfg.TrustedProxyPrefixes()...)
}

// connectionRefused counts a connection closed for its client's limit, and
// says so in the log at most once a minute (whoever opens them chooses how
// many there are).
func (s *Service) connectionRefused(client netip.Addr) {
	s.Metrics.ConnectionRefused()
	s.connLog.Log(context.Background(), s.log, slog.LevelWarn, "", "connection closed: its client holds max_client_connections already", func() []slog.Attr {
		return []slog.Attr{slog.String("client", client.String()), slog.Int("max_client_connections", s.Config.ClientConnections())}
	})
}

// httpDrain bounds how long a shutdown waits for requests in flight (a
// sender still uploading, say) before it closes their connections; the
// shutdown timeout bounds it too.
const httpDrain = 15 * time.Second

// startSourcesShown bounds the sources the start line names: at 200
// sources one attribute listing them all was 5.4 KB, unreadable in a log
// viewer. config check lists them all.
const startSourcesShown = 20

// startAttrs is the start log line's attributes: the address first
// (tools read addr from the "listening" line), then what this process
// runs: its version, the store (never the database password), the number
// of sources and the first startSourcesShown with their scheme and
// target, whether the admin API and console are on (and on which
// address, with admin_listen), and retention.
func (s *Service) startAttrs(addr string) []any {
	cfg := s.Config
	attrs := []any{"addr", addr}
	if v := s.version(); v != "" {
		attrs = append(attrs, "version", v)
	}
	dbURL := cfg.DB
	if dbURL == "" {
		dbURL = config.DefaultDB
	}
	store := "sqlite"
	if IsPostgres(dbURL) {
		store = "postgres"
	}
	attrs = append(attrs, "store", store, "db", config.DisplayDB(dbURL))
	var sources []string
	for _, src := range cfg.Sources {
		scheme := src.WithPreset().Scheme
		if src.Provider != "" {
			scheme = src.Provider + ": " + scheme
		}
		sources = append(sources, fmt.Sprintf("%s (%s, %s)", src.Name, scheme, targetKind(src)))
	}
	admin := "off"
	if cfg.AdminToken != "" {
		admin = "on"
	}
	if cfg.AdminListen != "" {
		attrs = append(attrs, "admin_listen", cfg.AdminListen)
	}
	if n := len(sources) - startSourcesShown; n > 0 {
		sources = append(sources[:startSourcesShown:startSourcesShown], fmt.Sprintf("… and %d more; see hookbox config check", n))
	}
	return append(attrs, "source_count", len(cfg.Sources), "sources", strings.Join(sources, "; "), "admin", admin,
		"retention", days(cfg.RetentionDays), "payload_retention", days(cfg.PayloadRetentionDays))
}

// version is s.Version, else the main module's version from the build
// information when the binary was built from a tagged module.
func (s *Service) version() string {
	if s.Version != "" {
		return s.Version
	}
	if info, ok := debug.ReadBuildInfo(); ok && info.Main.Version != "" && info.Main.Version != "(devel)" {
		return info.Main.Version
	}
	return ""
}

// targetKind names what works a source's events, as configured: forward,
// exec, store-only, or "no forward or exec" (the Go handlers a program
// registers are not part of the config).
func targetKind(src config.Source) string {
	switch {
	case len(src.Targets) > 0:
		return fmt.Sprintf("%d targets", len(src.Targets))
	case src.Forward != "":
		return "forward"
	case len(src.Exec) > 0:
		return "exec"
	case src.StoreOnly:
		return "store-only"
	}
	return "no forward or exec"
}

// days describes a retention setting.
func days(n int) string {
	if n <= 0 {
		return "off"
	}
	return fmt.Sprintf("%d days", n)
}

// Close flushes the committers and the rejection log and closes the store.
func (s *Service) Close() error {
	s.committer.Close()
	s.nonces.Close()
	s.Rejections.Close()
	return s.Store.Close()
}

// withBodyKeys sets BodySHA256 on the deliveries of sources that dedupe by
// body too (config.Source.DedupesByBody) before ingest: the hash of what
// the source's signature covers (verify.BodyKey), so that bodies one
// signature covers are one delivery whatever id they come with.
// byBody holds the verifiers of those sources, by name.
func withBodyKeys(byBody map[string]verify.Verifier, ingest server.IngestFunc) server.IngestFunc {
	if len(byBody) == 0 {
		return ingest
	}
	return func(ctx context.Context, d hookbox.Delivery) (hookbox.Receipt, error) {
		if v, ok := byBody[d.Source]; ok {
			key := verify.BodyKey(v, d.Payload)
			d.BodySHA256 = key[:]
		}
		return ingest(ctx, d)
	}
}

// notifyingTx wakes the workers once a transaction that stored new events
// has committed.
type notifyingTx struct {
	hookbox.IngestTx
	pool  *worker.Pool
	fresh bool
}

func (t *notifyingTx) Add(ctx context.Context, ds []hookbox.Delivery) ([]hookbox.Receipt, error) {
	rs, err := t.IngestTx.Add(ctx, ds)
	t.fresh = t.fresh || storedNew(rs)
	return rs, err
}

func (t *notifyingTx) Commit(ctx context.Context) error {
	err := t.IngestTx.Commit(ctx)
	if err == nil && t.fresh {
		t.pool.Notify()
	}
	return err
}

// storedNew reports whether rs holds a delivery stored for the first time.
func storedNew(rs []hookbox.Receipt) bool {
	for _, r := range rs {
		if !r.Duplicate {
			return true
		}
	}
	return false
}

// commitFailWindow is how long a failed ingest commit, with none
// succeeding after it, keeps /readyz at 503.
const commitFailWindow = 10 * time.Second

// commitHealth remembers how the last ingest commits ended, for /readyz:
// a store that answers its ping can still fail every write (a full disk,
// an immutable file). Readiness comes back commitFailWindow after the last
// failure when nothing is sent meanwhile, so that a receiver a load
// balancer stopped sending to is tried again.
type commitHealth struct {
	mu               sync.Mutex
	failedAt, goodAt time.Time
	lastErr          error
}

func (h *commitHealth) observe(err error, now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err != nil {
		h.failedAt, h.lastErr = now, err
	} else {
		h.goodAt = now
	}
}

// ready reports server.ErrCommitsFailing while the last commit failed,
// within commitFailWindow.
func (h *commitHealth) ready(now time.Time) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.failedAt.IsZero() || h.goodAt.After(h.failedAt) || now.Sub(h.failedAt) > commitFailWindow {
		return nil
	}
	return fmt.Errorf("%w %v ago: %v", server.ErrCommitsFailing, now.Sub(h.failedAt).Round(time.Millisecond), h.lastErr)
}
