// Package bench measures hookbox as `hookbox bench` reports it: ingest
// (req/s, latency percentiles, answers by status) against references
// measured in the same run (a bare net/http server, a minimal receiver,
// naive one-transaction-per-delivery receivers), and drain rates. Figures
// are printed, never asserted: the machine it runs on decides them.
package bench

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/config"
	"github.com/hookbox/hookbox/internal/loadgen"
	"github.com/hookbox/hookbox/postgres"
	"github.com/hookbox/hookbox/server"
	"github.com/hookbox/hookbox/service"
	"github.com/hookbox/hookbox/sqlite"
	"github.com/hookbox/hookbox/verify"
	"github.com/hookbox/hookbox/worker"
)

// Options are the settings of one run (the flags of hookbox bench).
type Options struct {
	Targets     []string      // what to measure, in order (see Targets)
	URL         string        // drive a running hookbox here instead
	Secret      string        // its source's signing secret
	Postgres    string        // PostgreSQL URL for the postgres targets
	Scheme      string        // signature scheme of the deliveries
	Connections int           // concurrent connections
	Requests    int           // deliveries per target (a bound with Duration)
	Duration    time.Duration // send for this long instead of a count
	BodySize    int           // body size in bytes
	Duplicates  float64       // share of deliveries that repeat the previous one
	Drain       bool          // drain with a no-op handler while sending
	DrainOnly   int           // store this many events, then time the drain alone
	Preload     int           // finished events stored before measuring
	// CompareEmpty measures ingest on the empty table before preloading
	// (with Preload), so the preloaded figure has its ratio to it.
	CompareEmpty bool
	// PurgeDuring measures ingest once more (with Preload) while a
	// retention purge deletes the preloaded rows.
	PurgeDuring bool
	JSON        bool   // print results as JSON
	CPUProfile  string // write a CPU profile of the run here
	Synchronous string // SQLite synchronous for the sqlite target
	Handler     string // Go handler for the bench source: noop or wait1s
	Concurrency int    // workers.concurrency of the hookbox targets
	BatchSize   int    // workers.batch_size of the hookbox targets
	// OrderKeys, with Handler forward, forwards through a named target
	// with order_by: each delivery carries one of this many order keys (in
	// turn, in the header OrderKeyHeader), so the drain claims by key.
	OrderKeys int
}

// OrderKeyHeader carries a delivery's order key in an --order-keys run.
const OrderKeyHeader = "X-Order-Key"

// benchSecret signs the benchmark's deliveries; it protects nothing.
const benchSecret = "whsec_YmVuY2htYXJrLXNlY3JldC1ub3QtZm9yLXVzZQ=="

// Result is one target's figures.
type Result struct {
	Target  string          `json:"target"`
	Handler string          `json:"handler,omitempty"`
	Ingest  *loadgen.Result `json:"ingest,omitempty"`
	Ratio   float64         `json:"ratio_to_bare,omitempty"`
	// VsMinimal and P99VsMinimal compare hookbox's req/s and p99 with
	// the minimal receiver of the same store measured earlier in the run
	// (target minimal-sqlite or minimal-postgres).
	VsMinimal    float64      `json:"ratio_to_minimal,omitempty"`
	P99VsMinimal float64      `json:"p99_ratio_to_minimal,omitempty"`
	Drain        *DrainResult `json:"drain,omitempty"`
	// MaxRSS is the bench process's peak resident memory so far (Linux's
	// VmHWM), read after this measurement: it covers every target
	// measured before this one and the load generator, so it bounds this
	// target's memory from above and is not its own.
	MaxRSS int64 `json:"max_rss_bytes,omitempty"`
	// CPU is what one request cost (one event, for --drain-only); nil
	// where /proc cannot say.
	CPU     *CPUFigures `json:"cpu_per_request,omitempty"`
	Preload int         `json:"preloaded_rows,omitempty"`
	// Phase names the step of a --preload run: "empty", "preloaded" or
	// "purging"; VsBefore and P99VsBefore compare its req/s and p99 with
	// the step before it, in the same run.
	Phase       string        `json:"phase,omitempty"`
	VsBefore    float64       `json:"ratio_to_before,omitempty"`
	P99VsBefore float64       `json:"p99_ratio_to_before,omitempty"`
	PreloadTook time.Duration `json:"preload_ns,omitempty"`
	Purge       *PurgeFigures `json:"purge,omitempty"`
}

// PurgeFigures describe the purge of a --purge-during step.
type PurgeFigures struct {
	Rows int           `json:"rows"`
	Took time.Duration `json:"took_ns"`
}

// DrainResult describes the workers' side of a run.
type DrainResult struct {
	Events    int           `json:"events"`
	Duration  time.Duration `json:"duration_ns"`
	Rate      float64       `json:"events_per_s"`
	MaxLag    int           `json:"max_lag"`       // most events waiting at a sample
	LagAtEnd  int           `json:"lag_at_end"`    // waiting when sending stopped
	DrainTail time.Duration `json:"drain_tail_ns"` // from the end of sending to an empty queue
	StartP50  time.Duration `json:"start_p50_ns,omitempty"`
	StartP99  time.Duration `json:"start_p99_ns,omitempty"`
	// WhileSending marks a --handler run: Events are those finished while
	// the load ran, and the queue was not waited for.
	WhileSending bool `json:"while_sending,omitempty"`
}

// Bench handlers (--handler).
const (
	handlerNoop    = "noop"
	handlerWait1s  = "wait1s"
	handlerForward = "forward"
)

// benchWait is how long the wait1s handler's Prepare waits.
const benchWait = time.Second

// checkHandler resolves --handler against --drain and --drain-only.
func checkHandler(f *Options) error {
	switch f.Handler {
	case "":
		if f.Drain || f.DrainOnly > 0 {
			f.Handler = handlerNoop
		}
	case handlerNoop, handlerForward:
	case handlerWait1s:
		if f.Drain || f.DrainOnly > 0 {
			return fmt.Errorf("--handler wait1s finishes about --concurrency events a second: it cannot be combined with --drain or --drain-only, which wait for the queue to empty")
		}
	default:
		return fmt.Errorf("--handler %q: want noop, wait1s or forward", f.Handler)
	}
	if f.Concurrency < 0 {
		return fmt.Errorf("--concurrency must not be negative")
	}
	if f.BatchSize < 0 {
		return fmt.Errorf("--batch-size must not be negative")
	}
	if f.OrderKeys < 0 || f.OrderKeys > 0 && f.Handler != handlerForward {
		return fmt.Errorf("--order-keys needs --handler forward (a forward target with order_by) and a count of at least 1")
	}
	return nil
}

// Run measures every target of f in turn and prints the figures to out
// (as JSON with f.JSON).
func Run(ctx context.Context, f *Options, out io.Writer) error {
	if f.CPUProfile != "" {
		pf, err := os.Create(f.CPUProfile)
		if err != nil {
			return err
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if f.Duplicates < 0 || f.Duplicates > 0.5 {
		return fmt.Errorf("--duplicates must be between 0 and 0.5")
	}
	vc := benchSource(f.Scheme)
	if f.URL != "" {
		if f.Secret == "" && f.Scheme != "none" {
			return fmt.Errorf("--url needs --secret (the source's signing secret)")
		}
		vc.Secrets = []string{f.Secret}
		f.Targets = []string{"url"}
	}
	if _, err := verify.New(vc); err != nil {
		return err
	}
	if err := checkHandler(f); err != nil {
		return err
	}
	say := func(format string, args ...any) {
		if !f.JSON {
			fmt.Fprintf(out, format, args...)
		}
	}
	say("hookbox bench: %s deliveries of %d bytes (%s), %d connections, %.0f%% duplicates\n",
		amount(f), f.BodySize, f.Scheme, f.Connections, 100*f.Duplicates)
	if f.Handler != "" {
		say("Go handler for the bench source: %s\n", f.Handler)
	}

	var results []Result
	var refused []string // targets with deliveries not accepted
	var bare float64
	minimal := map[string]*loadgen.Result{} // by store: sqlite, postgres
	for _, name := range f.Targets {
		t, err := startBenchTarget(ctx, name, f, vc)
		if err != nil {
			return fmt.Errorf("target %s: %w", name, err)
		}
		var rs []Result
		if f.Preload > 0 && f.DrainOnly == 0 {
			rs, err = t.phases(ctx, f, vc, out)
		} else {
			var r Result
			r, err = t.measure(ctx, f, vc, out)
			rs = []Result{r}
		}
		t.stop()
		if err != nil {
			return fmt.Errorf("target %s: %w", name, err)
		}
		for _, r := range rs {
			if r.Ingest != nil {
				if n := r.Ingest.Failed(); n > 0 {
					refused = append(refused, fmt.Sprintf("%s%s: %d of %d deliveries not accepted (answers by status %v, %d transport errors)",
						name, phaseLabel(r.Phase), n, r.Ingest.Requests, r.Ingest.Status, r.Ingest.Errors))
				}
				if name == "bare" {
					bare = r.Ingest.RPS
				} else if bare > 0 {
					r.Ratio = r.Ingest.RPS / bare
				}
				if strings.HasPrefix(name, "minimal-") {
					minimal[strings.TrimPrefix(name, "minimal-")] = r.Ingest
				} else if m := minimal[name]; m != nil && m.RPS > 0 && m.P99 > 0 {
					r.VsMinimal, r.P99VsMinimal = r.Ingest.RPS/m.RPS, float64(r.Ingest.P99)/float64(m.P99)
				}
			}
			r.MaxRSS = maxRSS()
			results = append(results, r)
			if !f.JSON {
				printBench(out, r)
			}
		}
	}
	if f.JSON {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		if err := enc.Encode(results); err != nil {
			return err
		}
	}
	if len(refused) > 0 {
		// Printed in full first, then failed: the figures of a run whose
		// deliveries were refused measure a misconfiguration (a wrong
		// secret or scheme, a limit), and scripts read the exit status.
		return fmt.Errorf("rates and ratios count accepted (2xx) deliveries only, and some were not: %s", strings.Join(refused, "; "))
	}
	return nil
}

// phaseLabel names a --preload step after its target, "" for none.
func phaseLabel(phase string) string {
	if phase == "" {
		return ""
	}
	return " (" + phase + ")"
}

func amount(f *Options) string {
	if f.DrainOnly > 0 {
		return fmt.Sprintf("%d stored", f.DrainOnly)
	}
	if f.Duration > 0 {
		return f.Duration.String() + " of"
	}
	return fmt.Sprint(f.Requests)
}

func printBench(w io.Writer, r Result) {
	if r.Phase != "" {
		line := fmt.Sprintf("%-15s %s", r.Target, r.Phase)
		if r.PreloadTook > 0 {
			line += fmt.Sprintf(" (%d finished rows stored in %v)", r.Preload, r.PreloadTook.Round(time.Second))
		}
		if r.Purge != nil {
			line += fmt.Sprintf(" (%d rows purged in %v)", r.Purge.Rows, r.Purge.Took.Round(time.Millisecond))
		}
		if r.VsBefore > 0 {
			line += fmt.Sprintf(": %.2fx the step before (p99 %.2fx)", r.VsBefore, r.P99VsBefore)
		}
		fmt.Fprintln(w, line)
	}
	if r.Ingest != nil {
		line := fmt.Sprintf("%-15s %s", r.Target, r.Ingest)
		if r.Ratio > 0 {
			line += fmt.Sprintf("  %.2fx bare", r.Ratio)
		}
		if r.VsMinimal > 0 {
			line += fmt.Sprintf("  %.2fx minimal (p99 %.2fx)", r.VsMinimal, r.P99VsMinimal)
		}
		fmt.Fprintln(w, line)
	}
	if d := r.Drain; d != nil && d.WhileSending {
		fmt.Fprintf(w, "%-15s handler %s: %.0f events/s finished while sending (%d events in %v), lag max %d, at end %d\n",
			"", r.Handler, d.Rate, d.Events, d.Duration.Round(time.Millisecond), d.MaxLag, d.LagAtEnd)
	} else if d != nil && r.Ingest == nil {
		// --drain-only: no ingest line above names the target, and with
		// nothing sent there is no lag or tail to report.
		fmt.Fprintf(w, "%-15s drain %8.0f events/s  (%d stored events in %v)\n",
			r.Target, d.Rate, d.Events, d.Duration.Round(time.Millisecond))
	} else if d != nil {
		fmt.Fprintf(w, "%-15s drain %8.0f events/s  (%d events in %v)  lag max %d, at end %d, emptied %v after sending stopped",
			"", d.Rate, d.Events, d.Duration.Round(time.Millisecond), d.MaxLag, d.LagAtEnd, d.DrainTail.Round(time.Millisecond))
		if d.StartP50 > 0 {
			fmt.Fprintf(w, "  light load, sent→handler start p50 %v p99 %v", d.StartP50.Round(time.Microsecond), d.StartP99.Round(time.Microsecond))
		}
		fmt.Fprintln(w)
	}
	if c := r.CPU; c != nil {
		per := "request"
		if r.Ingest == nil {
			per = "event drained"
		}
		fmt.Fprintf(w, "%-15s CPU per %s: %v machine, %v this process (load generator included)\n", "", per,
			c.Machine.Round(time.Microsecond), c.Process.Round(time.Microsecond))
	}
	fmt.Fprintf(w, "%-15s peak RSS of the process so far %d MB (every target measured until now and the load generator included)\n", "", r.MaxRSS>>20)
}

// benchSource is the verify config of the bench source for scheme. The
// hmac and none schemes carry the delivery id in a header, as the others
// carry it in theirs (stripe in the body), so that every generated delivery
// has an id of its own.
func benchSource(scheme string) verify.Config {
	vc := verify.Config{Scheme: scheme, Secrets: []string{benchSecret}}
	if scheme == "hmac" {
		vc.Header, vc.IDHeader = "X-Signature", "X-Delivery-Id"
	}
	if scheme == "none" {
		vc.Secrets, vc.IDHeader = nil, "X-Delivery-Id"
	}
	return vc
}

// benchTarget is one running target.
type benchTarget struct {
	name  string
	url   string
	svc   *service.Service // nil for bare, naive and url targets
	serve func()           // starts svc's HTTP server and workers
	stop  func()

	// during, when set, is started after the warm-up of a measurement;
	// the load runs until the channel it returns is closed.
	during func() <-chan struct{}

	handler  string       // --handler registered for the bench source; "" for none
	handled  atomic.Int64 // events the handler finished (for wait1s: applied)
	prepared atomic.Int64 // Prepare calls of the wait1s handler
	acked    sync.Map     // delivery id → when its 202 arrived (light-load phase)
	latMu    sync.Mutex
	starts   []time.Duration // 202 → handler start, light-load phase
}

func startBenchTarget(ctx context.Context, name string, f *Options, vc verify.Config) (*benchTarget, error) {
	if name == "url" {
		return &benchTarget{name: name, url: f.URL, stop: func() {}}, nil
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	t := &benchTarget{name: name, url: "http://" + ln.Addr().String() + "/webhooks/bench"}
	dir, err := os.MkdirTemp("", "hookbox-bench-")
	if err != nil {
		return nil, err
	}
	sqlitePath := filepath.Join(dir, "bench.db")
	db := "sqlite:" + sqlitePath
	dropSchema := func() {}
	if strings.HasSuffix(name, "postgres") {
		if f.Postgres == "" {
			return nil, fmt.Errorf("--postgres (or HOOKBOX_TEST_POSTGRES) is required")
		}
		// A schema of its own, so every run starts from an empty table.
		db, dropSchema, err = freshSchema(ctx, f.Postgres)
		if err != nil {
			return nil, err
		}
	}
	switch name {
	case "bare":
		srv := service.HTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusAccepted)
			w.Write([]byte(`{"id":1,"duplicate":false}` + "\n"))
		}))
		go srv.Serve(ln)
		t.stop = func() { srv.Close(); os.RemoveAll(dir) }
		return t, nil
	case "minimal-sqlite", "minimal-postgres":
		st, err := openMinimalStore(ctx, name, sqlitePath, db)
		if err != nil {
			return nil, err
		}
		v, err := verify.New(vc)
		if err != nil {
			return nil, err
		}
		h, stopMinimal := newMinimal(v, st)
		srv := service.HTTPServer(h)
		go srv.Serve(ln)
		t.stop = func() { srv.Close(); stopMinimal(); os.RemoveAll(dir); dropSchema() }
		return t, nil
	case "naive-sqlite", "naive-postgres":
		var st hookbox.Store
		if name == "naive-sqlite" {
			st, err = sqlite.Open(ctx, sqlitePath, sqlite.Options{InlineSync: true})
		} else {
			st, err = postgres.Open(ctx, db, postgres.Options{})
		}
		if err != nil {
			return nil, err
		}
		v, _ := verify.New(vc)
		h := server.New(server.Config{
			Sources: []server.Source{{Name: "bench", Verifier: v}},
			Ingest: func(ctx context.Context, d hookbox.Delivery) (hookbox.Receipt, error) {
				rs, err := st.Ingest(ctx, []hookbox.Delivery{d}) // one transaction per delivery
				if err != nil {
					return hookbox.Receipt{}, err
				}
				return rs[0], nil
			},
		})
		srv := service.HTTPServer(h)
		go srv.Serve(ln)
		t.stop = func() { srv.Close(); st.Close(); os.RemoveAll(dir); dropSchema() }
		return t, nil
	case "sqlite", "postgres":
		src := config.Source{Name: "bench", Scheme: vc.Scheme, Secrets: vc.Secrets, Header: vc.Header, IDHeader: vc.IDHeader}
		stopReceiver := func() {}
		if f.Handler == handlerForward {
			if src.Forward, stopReceiver, err = t.startReceiver(); err != nil {
				return nil, err
			}
			if f.OrderKeys > 0 {
				src.Targets = []config.Target{{Name: orderedTarget, Forward: src.Forward, OrderBy: "header:" + OrderKeyHeader}}
				src.Forward = ""
			}
		}
		cfg := &config.Config{DB: db, Sources: []config.Source{src}, SQLite: config.SQLite{Synchronous: f.Synchronous},
			Workers: config.Workers{Concurrency: f.Concurrency, BatchSize: f.BatchSize}}
		svcCtx, cancel := context.WithCancel(ctx)
		svc, err := service.New(svcCtx, cfg, nil)
		if err != nil {
			cancel()
			stopReceiver()
			return nil, err
		}
		t.svc = svc
		if err := t.register(ctx, f.Handler); err != nil {
			cancel()
			svc.Close()
			return nil, err
		}
		if f.Preload > 0 && f.DrainOnly > 0 {
			if err := preload(ctx, svc, name, f.Preload); err != nil {
				cancel()
				svc.Close()
				return nil, err
			}
		}
		done := make(chan struct{})
		var once sync.Once
		t.serve = func() {
			once.Do(func() { go func() { svc.Serve(svcCtx, ln); close(done) }() })
		}
		t.stop = func() {
			t.serve() // Serve owns closing the service
			cancel()
			<-done
			stopReceiver()
			os.RemoveAll(dir)
			dropSchema()
		}
		return t, nil
	}
	ln.Close()
	return nil, fmt.Errorf("unknown target %q", name)
}

// startReceiver starts the app that --handler forward delivers to: a bare
// net/http server on the loopback address, in this process, that reads
// each body, counts it as handled and answers 204. It returns the URL to
// forward to and a function that stops it.
func (t *benchTarget) startReceiver() (url string, stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := service.HTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		t.handled.Add(1)
		w.WriteHeader(http.StatusNoContent)
	}))
	go srv.Serve(ln)
	return "http://" + ln.Addr().String() + "/hooks/bench", func() { srv.Close() }, nil
}

// register adds the Go handler named by --handler for the bench source
// (forward has none: the source forwards to startReceiver's app).
func (t *benchTarget) register(ctx context.Context, handler string) error {
	t.handler = handler
	switch handler {
	case handlerNoop:
		t.svc.Pool.Handle("bench", "", t.noopHandler)
	case handlerWait1s:
		if err := t.svc.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
			_, err := tx.ExecContext(ctx, benchEffectsSchema)
			return err
		}); err != nil {
			return fmt.Errorf("create bench_effects: %w", err)
		}
		t.svc.Pool.HandlePhases("bench", "", worker.TwoPhase(t.waitPrepare, t.writeApply))
	}
	return nil
}

// benchEffectsSchema is the table the wait1s handler's Apply writes to.
const benchEffectsSchema = `CREATE TABLE IF NOT EXISTS bench_effects (
    event_id BIGINT PRIMARY KEY,
    waited   BIGINT NOT NULL
)`

// waitPrepare stands for a call to another service that takes benchWait:
// it runs outside any transaction, so ingest does not wait behind it.
func (t *benchTarget) waitPrepare(ctx context.Context, ev *hookbox.Event) (time.Duration, error) {
	t.prepared.Add(1)
	start := time.Now()
	timer := time.NewTimer(benchWait)
	defer timer.Stop()
	select {
	case <-timer.C:
		return time.Since(start), nil
	case <-ctx.Done():
		return 0, ctx.Err()
	}
}

// writeApply records the prepared call's result: one row, in the
// transaction that marks the event done.
func (t *benchTarget) writeApply(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event, waited time.Duration) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO bench_effects (event_id, waited) VALUES ($1, $2) ON CONFLICT DO NOTHING`,
		ev.ID, waited.Milliseconds()); err != nil {
		return err
	}
	t.handled.Add(1)
	return nil
}

// noopHandler does nothing but note when it ran, so drain rate and the
// delay from 202 to handler start can be measured.
func (t *benchTarget) noopHandler(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
	t.handled.Add(1)
	if at, ok := t.acked.Load(ev.DeliveryID); ok {
		t.latMu.Lock()
		t.starts = append(t.starts, time.Since(at.(time.Time)))
		t.latMu.Unlock()
	}
	return nil
}

// measure runs the load (or the drain) against t.
func (t *benchTarget) measure(ctx context.Context, f *Options, vc verify.Config, out io.Writer) (Result, error) {
	r := Result{Target: t.name, Preload: f.Preload, Handler: t.handler}
	body := benchBody(f.BodySize)
	gen := newDeliveries(vc, body, f.Duplicates, f.OrderKeys)
	if f.DrainOnly > 0 {
		if t.svc == nil {
			return r, fmt.Errorf("--drain-only needs the sqlite or postgres target")
		}
		if err := storeEvents(ctx, t.svc, gen, f.DrainOnly); err != nil {
			return r, err
		}
		start, cpu := time.Now(), sampleCPU()
		t.serve()
		if err := t.waitHandled(ctx, int64(f.DrainOnly), 10*time.Minute); err != nil {
			return r, err
		}
		d := time.Since(start)
		r.CPU = cpu.perOp(sampleCPU(), f.DrainOnly)
		r.Drain = &DrainResult{Events: f.DrainOnly, Duration: d, Rate: float64(f.DrainOnly) / d.Seconds()}
		return r, nil
	}
	if t.serve != nil {
		t.serve()
	}
	warm := min(5000, f.Requests)
	if _, err := loadgen.Run(ctx, loadgen.Options{URL: t.url, Connections: f.Connections, Count: warm, Next: gen.next, Body: body}); err != nil {
		return r, err
	}
	gen.rewindTo(warm)
	count, duration := f.Requests, f.Duration
	var until <-chan struct{}
	if t.during != nil {
		// The load lasts as long as the work beside it, and at least
		// as long as asked.
		until, count, duration = t.during(), 1<<40, 0
	}
	handledBefore := t.handled.Load()
	lag := &lagSampler{}
	if t.handler != "" {
		lag.start(ctx, t.svc)
	}
	progress := func(done int, elapsed time.Duration) {
		if f.JSON {
			return
		}
		fmt.Fprintf(os.Stderr, "\r  %-14s %9d sent  %8.0f req/s  drained %9d  lag %7d ", t.name, done,
			float64(done)/elapsed.Seconds(), t.handled.Load()-handledBefore, lag.last.Load())
	}
	cpu := sampleCPU()
	res, err := loadgen.Run(ctx, loadgen.Options{
		URL: t.url, Connections: f.Connections, Count: count, Duration: duration, Until: until,
		Next: gen.next, Body: body, Progress: progress,
	})
	r.CPU = cpu.perOp(sampleCPU(), res.Accepted)
	if !f.JSON {
		fmt.Fprint(os.Stderr, "\r\033[K")
	}
	if err != nil {
		return r, err
	}
	r.Ingest = &res
	if t.handler != "" && !f.Drain {
		// Counted when sending stopped: a slow handler's queue is not
		// waited for (wait1s would take many minutes to empty it).
		n := int(t.handled.Load() - handledBefore)
		lagAtEnd := lag.sample(ctx, t.svc)
		lag.stop()
		r.Drain = &DrainResult{Events: n, Duration: res.Duration, Rate: float64(n) / res.Duration.Seconds(),
			MaxLag: int(lag.max.Load()), LagAtEnd: lagAtEnd, WhileSending: true}
	}
	if f.Drain && t.svc != nil {
		sendEnd := time.Now()
		lagAtEnd := lag.sample(ctx, t.svc)
		if err := t.waitQueueEmpty(ctx, 5*time.Minute); err != nil {
			return r, err
		}
		lag.stop()
		d := time.Since(sendEnd) + res.Duration
		n := int(t.handled.Load() - handledBefore)
		r.Drain = &DrainResult{Events: n, Duration: d, Rate: float64(n) / d.Seconds(),
			MaxLag: int(lag.max.Load()), LagAtEnd: lagAtEnd, DrainTail: time.Since(sendEnd)}
		r.Drain.StartP50, r.Drain.StartP99 = t.lightLoadLatency(ctx, gen, body)
	}
	return r, nil
}

// lightLoadLatency sends 1000 deliveries one at a time, pausing between
// them, and returns the median and 99th percentile time from each 202 to
// the start of its handler.
func (t *benchTarget) lightLoadLatency(ctx context.Context, gen *deliveries, body []byte) (time.Duration, time.Duration) {
	t.latMu.Lock()
	t.starts = nil
	t.latMu.Unlock()
	const n = 1000
	base := gen.used()
	for i := range n {
		req := gen.next(base + i)
		// Timed from the moment the request leaves: an upper bound of the
		// time from 202 to handler start (the handler may start before the
		// reply reaches the client).
		t.acked.Store(deliveryID(req.Header), time.Now())
		loadgen.Run(ctx, loadgen.Options{URL: t.url, Connections: 1, Requests: []loadgen.Request{req}, Body: body})
		time.Sleep(2 * time.Millisecond)
	}
	t.waitQueueEmpty(ctx, time.Minute)
	t.latMu.Lock()
	defer t.latMu.Unlock()
	if len(t.starts) == 0 {
		return 0, 0
	}
	ls := append([]time.Duration(nil), t.starts...)
	sortDurations(ls)
	return ls[len(ls)/2], ls[len(ls)*99/100]
}

func (t *benchTarget) waitHandled(ctx context.Context, n int64, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for t.handled.Load() < n {
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("drained %d of %d events within %v", t.handled.Load(), n, limit)
		}
		time.Sleep(time.Millisecond)
	}
	return nil
}

func (t *benchTarget) waitQueueEmpty(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		if queued(ctx, t.svc) == 0 {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("queue not empty after %v", limit)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// queued counts unfinished events.
func queued(ctx context.Context, svc *service.Service) int {
	st, err := svc.Store.Stats(ctx, time.Now())
	if err != nil {
		return 0
	}
	return st.ByStatus[hookbox.StatusPending] + st.ByStatus[hookbox.StatusProcessing]
}

// lagSampler samples the number of unfinished events once a second.
type lagSampler struct {
	last, max atomic.Int64
	cancel    context.CancelFunc
	done      chan struct{}
}

func (l *lagSampler) start(ctx context.Context, svc *service.Service) {
	ctx, l.cancel = context.WithCancel(ctx)
	l.done = make(chan struct{})
	go func() {
		defer close(l.done)
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-tick.C:
				l.sample(ctx, svc)
			}
		}
	}()
}

func (l *lagSampler) sample(ctx context.Context, svc *service.Service) int {
	n := int64(queued(ctx, svc))
	l.last.Store(n)
	if n > l.max.Load() {
		l.max.Store(n)
	}
	return int(n)
}

func (l *lagSampler) stop() {
	if l.cancel != nil {
		l.cancel()
		<-l.done
	}
}

// deliveries generates unique signed deliveries, with a share repeating the
// previous one. Each carries its id in its body too, so that no two
// deliveries have the same body: the schemes whose signature covers no
// delivery id (github, hmac, none) dedupe by body as well, and would take
// every delivery after the first for a copy of it.
type deliveries struct {
	vc     verify.Config
	body   []byte
	prefix string
	// dupPPM is the share of deliveries that repeat the one before, in
	// millionths: delivery n is a repeat when the running total of shares
	// passes a whole number at it, so any N deliveries hold the share
	// asked for to within one.
	dupPPM    int64
	offset    atomic.Int64
	orderKeys int // --order-keys
}

func newDeliveries(vc verify.Config, body []byte, dupShare float64, orderKeys int) *deliveries {
	var run [6]byte
	rand.Read(run[:])
	g := &deliveries{vc: vc, body: body, prefix: "msg_" + hex.EncodeToString(run[:]) + "_", orderKeys: orderKeys}
	g.dupPPM = int64(math.Round(dupShare * 1e6))
	return g
}

// rewindTo makes next(0) return the delivery numbered base, so a warm-up
// and the measured run never share ids.
func (g *deliveries) rewindTo(base int) { g.offset.Add(int64(base)) }

// used returns a number far past any measured run's deliveries, for the
// light-load phase.
func (g *deliveries) used() int { return int(g.offset.Load()) + 1<<30 }

func (g *deliveries) next(i int) loadgen.Request {
	n := int(g.offset.Load()) + i
	if g.repeats(n) {
		n--
	}
	id := fmt.Sprint(g.prefix, n)
	body := bodyWithID(g.body, id) // stripe reads its id there
	// Signed now: a long run outlasts a signature's tolerance.
	h, err := verify.Sign(g.vc, body, id, time.Now())
	if err != nil {
		panic(err) // the config was checked before the run
	}
	if g.orderKeys > 0 {
		h.Set(OrderKeyHeader, g.orderKey(n))
	}
	return loadgen.Request{Header: h, Body: body}
}

// repeats reports whether delivery n repeats the one before (a share of
// at most a half never repeats two in a row, nor delivery 0).
func (g *deliveries) repeats(n int) bool {
	const million = 1000000
	return int64(n+1)*g.dupPPM/million > int64(n)*g.dupPPM/million
}

// bodyWithID returns body, a JSON object from benchBody, with an "id"
// field first; as many bytes of its padding as the field adds are dropped,
// so that the body keeps the size asked for where the padding allows.
func bodyWithID(body []byte, id string) []byte {
	field := `"id":"` + id + `",`
	out := make([]byte, 0, len(body)+len(field))
	out = append(out, '{')
	out = append(out, field...)
	rest := body[1:]
	const pad = `"pad":"`
	if i := bytes.Index(rest, []byte(pad)); i >= 0 {
		start := i + len(pad)
		end := start
		for end < len(rest) && end-start < len(field) && rest[end] == 'x' {
			end++
		}
		out = append(out, rest[:start]...)
		return append(out, rest[end:]...)
	}
	return append(out, rest...)
}

// orderKey is the order key of delivery n in an --order-keys run.
func (g *deliveries) orderKey(n int) string { return fmt.Sprint("k", n%g.orderKeys) }

// orderedTarget is the name of the forward target of an --order-keys run.
const orderedTarget = "app"

// deliveryID reads back the id a signed request carries in a header.
func deliveryID(h http.Header) string {
	for _, k := range []string{"Webhook-Id", "X-Github-Delivery", "X-Delivery-Id"} {
		if v := h.Get(k); v != "" {
			return v
		}
	}
	return ""
}

// storeEvents stores n generated deliveries straight into the store, for a
// drain-only measurement.
func storeEvents(ctx context.Context, svc *service.Service, gen *deliveries, n int) error {
	const batch = 512
	for done := 0; done < n; done += batch {
		var ds []hookbox.Delivery
		for i := done; i < min(n, done+batch); i++ {
			req := gen.next(i)
			d := hookbox.Delivery{Source: "bench", DeliveryID: fmt.Sprint(gen.prefix, "d", i),
				Header: req.Header, Payload: req.Body, ReceivedAt: time.Now()}
			if gen.orderKeys > 0 {
				// As the service routes it: one delivery, to the target.
				d.FanOut, d.Routes = true, []hookbox.Route{{Target: orderedTarget, OrderKey: req.Header.Get(OrderKeyHeader)}}
			}
			ds = append(ds, d)
		}
		if _, err := svc.Store.Ingest(ctx, ds); err != nil {
			return err
		}
	}
	return nil
}

// phases runs the steps of a --preload run on t: ingest on the empty table
// (with --compare-empty), then the preload and ingest over it, then ingest
// while a retention purge deletes the preloaded rows (with
// --purge-during). Each step's ratios compare it with the step before.
func (t *benchTarget) phases(ctx context.Context, f *Options, vc verify.Config, out io.Writer) ([]Result, error) {
	if t.svc == nil {
		return nil, fmt.Errorf("--preload needs the sqlite or postgres target")
	}
	var rs []Result
	step := func(phase string, r Result) {
		r.Phase = phase
		if len(rs) > 0 {
			if b := rs[len(rs)-1].Ingest; b != nil && r.Ingest != nil && b.RPS > 0 && b.P99 > 0 {
				r.VsBefore, r.P99VsBefore = r.Ingest.RPS/b.RPS, float64(r.Ingest.P99)/float64(b.P99)
			}
		}
		rs = append(rs, r)
	}
	if f.CompareEmpty {
		r, err := t.measure(ctx, f, vc, out)
		if err != nil {
			return rs, err
		}
		r.Preload = 0
		step("empty", r)
	}
	start := time.Now()
	if err := preload(ctx, t.svc, t.name, f.Preload); err != nil {
		return rs, err
	}
	took := time.Since(start)
	r, err := t.measure(ctx, f, vc, out)
	if err != nil {
		return rs, err
	}
	r.PreloadTook = took
	step("preloaded", r)
	if !f.PurgeDuring {
		return rs, nil
	}
	purge := &PurgeFigures{}
	var purgeErr error
	t.during = func() <-chan struct{} {
		done := make(chan struct{})
		go func() {
			defer close(done)
			minimum := time.After(f.Duration)
			start := time.Now()
			// The preloaded rows finished an hour ago; the measured ones
			// just now.
			res, err := t.svc.Store.Purge(ctx, hookbox.PurgeParams{Before: time.Now().Add(-30 * time.Minute)})
			purge.Rows, purge.Took, purgeErr = res.Total(), time.Since(start), err
			<-minimum
		}()
		return done
	}
	r, err = t.measure(ctx, f, vc, out)
	t.during = nil
	if err == nil {
		err = purgeErr
	}
	if err != nil {
		return rs, err
	}
	r.Purge = purge
	step("purging", r)
	return rs, nil
}

// preload stores n finished events of 1 KiB, finished an hour ago, to
// measure with a large table. They are written by one INSERT … SELECT per
// slice of 100,000 rows (a preload through Ingest took minutes per
// million): the rows are those Ingest would store, with a header set of a
// delivery's usual size.
func preload(ctx context.Context, svc *service.Service, target string, n int) error {
	body := benchBody(1024)
	headers := `{"Content-Type":["application/json"],"User-Agent":["bench"],"Webhook-Id":["msg_preload"],` +
		`"Webhook-Signature":["v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4="],"Webhook-Timestamp":["1700000000"]}`
	at := time.Now().Add(-time.Hour)
	q := `WITH RECURSIVE n(i) AS (SELECT $1 UNION ALL SELECT i + 1 FROM n WHERE i < $2)
INSERT INTO events (source, delivery_id, headers, payload, status, attempts, next_attempt_at, created_at, updated_at)
SELECT 'preload', 'pre_' || i, $3, $4, 'done', 1, $5, $5, $5 FROM n`
	var h, when any = []byte(headers), at.UnixMilli()
	if strings.HasSuffix(target, "postgres") {
		// The event's data and its queue row (migration 00010).
		q = `WITH d AS (
    INSERT INTO event_data (source, delivery_id, headers, payload, created_at)
    SELECT 'preload', 'pre_' || i, $3::jsonb, $4, $5 FROM generate_series($1::bigint, $2::bigint) i
    RETURNING id)
INSERT INTO queue (id, source, status, attempts, next_attempt_at, updated_at)
SELECT id, 'preload', 'done', 1, $5, $5 FROM d`
		h, when = headers, at
	}
	const slice = 100000
	for from := 0; from < n; from += slice {
		to := min(n, from+slice) - 1
		if err := svc.InTx(ctx, func(ctx context.Context, tx *hookbox.Tx) error {
			_, err := tx.ExecContext(ctx, q, from, to, h, body, when)
			return err
		}); err != nil {
			return fmt.Errorf("preload: %w", err)
		}
	}
	return nil
}

// benchBody is a JSON object of about size bytes with a type field.
func benchBody(size int) []byte {
	head := `{"type":"order.paid","data":{"pad":"`
	tail := `"}}`
	pad := max(0, size-len(head)-len(tail))
	return []byte(head + strings.Repeat("x", pad) + tail)
}

// maxRSS is the process's peak resident memory, from /proc (0 elsewhere).
func maxRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			var kb int64
			fmt.Sscan(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), &kb)
			return kb << 10
		}
	}
	return 0
}

func sortDurations(ds []time.Duration) {
	slices.Sort(ds)
}

// freshSchema creates an empty schema in the PostgreSQL database at url and
// returns a URL that uses it, and a function that drops it.
func freshSchema(ctx context.Context, url string) (string, func(), error) {
	var b [6]byte
	rand.Read(b[:])
	schema := "hookbox_bench_" + hex.EncodeToString(b[:])
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return "", nil, err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return "", nil, err
	}
	drop := func() {
		c, err := pgx.Connect(context.Background(), url)
		if err != nil {
			return
		}
		defer c.Close(context.Background())
		c.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
	}
	sep := "?"
	if strings.Contains(url, "?") {
		sep = "&"
	}
	return url + sep + "search_path=" + schema, drop, nil
}
