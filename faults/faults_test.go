package faults_test

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/config"
	"github.com/hookbox/hookbox/faults"
	"github.com/hookbox/hookbox/service"
	"github.com/hookbox/hookbox/verify"
)

var (
	fullRun = flag.Bool("faults.full", os.Getenv("HOOKBOX_FAULTS_FULL") != "",
		"run the full suite: 20 kills and 3m of load per database, the slow-client timeouts (also HOOKBOX_FAULTS_FULL=1)")
	killsFlag    = flag.Int("faults.kills", 0, "SIGKILLs per database in the crash loop (default 3, or 20 with -faults.full)")
	durationFlag = flag.Duration("faults.duration", 0, "load time per database in the crash loop (default 8s, or 3m with -faults.full)")
)

// bin is the hookbox binary TestMain built; nil with -short.
var bin *faults.Binary

func TestMain(m *testing.M) {
	flag.Parse()
	if testing.Short() {
		os.Exit(m.Run()) // every test here runs the binary and skips
	}
	dir, err := os.MkdirTemp("", "hookbox-faults-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		os.Exit(1)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	bin, err = faults.Build(ctx, dir, raceEnabled)
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults: build hookbox:", err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

func needBinary(t *testing.T) {
	t.Helper()
	if bin == nil {
		t.Skip("runs the hookbox binary; skipped with -short")
	}
}

// crashSettings returns the crash loop's kills and load time per database.
func crashSettings() (int, time.Duration) {
	kills, duration := 3, 8*time.Second
	if *fullRun {
		kills, duration = 20, 3*time.Minute
	}
	if *killsFlag > 0 {
		kills = *killsFlag
	}
	if *durationFlag > 0 {
		duration = *durationFlag
	}
	return kills, duration
}

// source is one configured sender and how to sign for it.
type source struct {
	name    string
	vc      verify.Config
	maxBody int64
}

var (
	polarSrc  = source{name: "polar", vc: verify.Config{Scheme: "standard-webhooks", Secrets: []string{"whsec_ZmF1bHRzLXBvbGFyLXNlY3JldC1ub3QtZm9yLXVzZQ=="}}}
	stripeSrc = source{name: "stripe", vc: verify.Config{Scheme: "stripe", Secrets: []string{"whsec_faults_stripe_secret"}}}
	githubSrc = source{name: "github", vc: verify.Config{Scheme: "github", Secrets: []string{"faults-github-secret"}}}
	shopSrc   = source{name: "shop", vc: verify.Config{Scheme: "hmac", Secrets: []string{"faults-shop-secret"},
		Header: "X-Shopify-Hmac-Sha256", Encoding: "base64", IDHeader: "X-Shopify-Webhook-Id"}}
	// smallSrc has a small body limit, for the size and slow-body cases.
	smallSrc = source{name: "small", vc: verify.Config{Scheme: "github", Secrets: []string{"faults-small-secret"}}, maxBody: 256}
)

// serverSpec is what writeConfig puts in a config file.
type serverSpec struct {
	db      string
	sources []source
	forward string // sink base URL: each source forwards to forward/<name>
	// targets, when set, gives each source these named targets instead,
	// each forwarding to forward/<name>/<target>.
	targets []string
	// orderBy, when set, gives each of those targets this order_by.
	orderBy string
	// extra is YAML appended to the config's top level.
	extra string
}

// writeConfig writes a hookbox config for spec into dir, checks that it
// loads, and returns its path. Attempts are short (1s, so a killed
// process's leases, twice that, end fast) and retried soon and often.
func writeConfig(t *testing.T, dir string, spec serverSpec) string {
	t.Helper()
	var b strings.Builder
	q := strconv.Quote
	fmt.Fprintf(&b, "db: %s\nlog:\n  format: json\n  level: info\nshutdown_timeout: 5s\nsources:\n", q(spec.db))
	for _, s := range spec.sources {
		fmt.Fprintf(&b, "  - name: %s\n    scheme: %s\n", q(s.name), q(s.vc.Scheme))
		if len(s.vc.Secrets) > 0 {
			fmt.Fprintf(&b, "    secrets: [%s]\n", q(s.vc.Secrets[0]))
		}
		for _, kv := range [][2]string{
			{"header", s.vc.Header}, {"encoding", s.vc.Encoding}, {"id_header", s.vc.IDHeader}, {"id_field", s.vc.IDField},
		} {
			if kv[1] != "" {
				fmt.Fprintf(&b, "    %s: %s\n", kv[0], q(kv[1]))
			}
		}
		if s.maxBody > 0 {
			fmt.Fprintf(&b, "    max_body_bytes: %d\n", s.maxBody)
		}
		switch {
		case spec.forward != "" && len(spec.targets) > 0:
			fmt.Fprintf(&b, "    timeout: 1s\n    backoff_min: 50ms\n    backoff_max: 1s\n    max_attempts: 25\n    targets:\n")
			for _, t := range spec.targets {
				fmt.Fprintf(&b, "      - name: %s\n        forward: %s\n", q(t), q(spec.forward+"/"+s.name+"/"+t))
				if spec.orderBy != "" {
					fmt.Fprintf(&b, "        order_by: %s\n", q(spec.orderBy))
				}
			}
		case spec.forward != "":
			fmt.Fprintf(&b, "    forward: %s\n    timeout: 1s\n    backoff_min: 50ms\n    backoff_max: 1s\n    max_attempts: 25\n",
				q(spec.forward+"/"+s.name))
		}
	}
	b.WriteString(spec.extra)
	if _, err := config.Parse([]byte(b.String())); err != nil {
		t.Fatalf("generated config does not load: %v\n%s", err, b.String())
	}
	path := filepath.Join(dir, "hookbox.yaml")
	if err := os.WriteFile(path, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// server runs successive hookbox processes on one config; each start logs
// to its own file in dir.
type server struct {
	t      *testing.T
	dir    string
	config string
	env    []string

	mu     sync.Mutex
	cur    *faults.Process
	starts int
	logs   []string
}

func newServer(t *testing.T, dir, configPath string, env ...string) *server {
	if keep := os.Getenv("HOOKBOX_FAULTS_LOGS"); keep != "" {
		// Keep the children's logs after the test, for a post-mortem.
		dir = filepath.Join(keep, strings.NewReplacer("/", "_", " ", "_").Replace(t.Name()))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	s := &server{t: t, dir: dir, config: configPath, env: env}
	t.Cleanup(func() {
		s.mu.Lock()
		p := s.cur
		s.mu.Unlock()
		if p != nil {
			p.Kill()
		}
		s.mu.Lock()
		logs := s.logs
		s.mu.Unlock()
		// Every log, read after its process ended: no data race reported,
		// no secret written (invariant 8).
		races := 0
		for _, l := range logs {
			b, _ := os.ReadFile(l)
			races += bytes.Count(b, []byte("WARNING: DATA RACE"))
			for _, secret := range secrets() {
				if bytes.Contains(b, []byte(secret)) {
					t.Errorf("%s holds a configured secret", l)
				}
			}
		}
		if races > 0 {
			t.Errorf("the race detector reported %d data races in hookbox serve; logs in %s", races, s.dir)
		}
		if t.Failed() && len(logs) > 0 {
			t.Logf("tail of %s:\n%s", logs[len(logs)-1], faults.Tail(logs[len(logs)-1], 3000))
		}
	})
	return s
}

// start runs a new process (the previous one must have ended).
func (s *server) start() *faults.Process {
	s.t.Helper()
	s.mu.Lock()
	s.starts++
	log := filepath.Join(s.dir, fmt.Sprintf("serve-%02d.log", s.starts))
	s.logs = append(s.logs, log)
	s.mu.Unlock()
	p, err := bin.Start(s.config, log, s.env...)
	if err != nil {
		s.t.Fatal(err)
	}
	s.mu.Lock()
	s.cur = p
	s.mu.Unlock()
	return p
}

// kill SIGKILLs the current process.
func (s *server) kill() {
	s.mu.Lock()
	p := s.cur
	s.cur = nil
	s.mu.Unlock()
	if p != nil {
		p.Kill()
	}
}

// stop ends the current process with SIGTERM and reports a dirty exit.
func (s *server) stop() {
	s.t.Helper()
	s.mu.Lock()
	p := s.cur
	s.cur = nil
	s.mu.Unlock()
	if p == nil {
		return
	}
	if err := p.Stop(30 * time.Second); err != nil {
		s.t.Errorf("clean stop (SIGTERM): %v\n%s", err, p.LogTail(3000))
	}
}

// fleet is the processes of one test that share a database: drainAndCheck
// stops them all, and starts them all again when work was stored after
// the drain looked done.
type fleet []*server

func (f fleet) stop() {
	for _, s := range f {
		s.stop()
	}
}

func (f fleet) start() {
	for _, s := range f {
		s.start()
	}
}

// endpoint is where senders deliver: the current process's URL. Senders
// whose connection failed wait for the next one.
type endpoint struct {
	mu      sync.Mutex
	url     string
	changed chan struct{}
}

func newEndpoint(url string) *endpoint { return &endpoint{url: url, changed: make(chan struct{})} }

func (e *endpoint) get() (string, <-chan struct{}) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.url, e.changed
}

func (e *endpoint) set(url string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.url = url
	close(e.changed)
	e.changed = make(chan struct{})
}

// reply is one delivery's outcome, as a sender saw it.
type reply struct {
	key        string
	sent, got  time.Time
	status     int // 0: no answer
	retryAfter string
	duplicate  bool
	err        error
	body       string
}

// loadCounts are a load's outcomes so far.
type loadCounts struct {
	Sent         int // requests sent
	Accepted     int // 202 answers (new and duplicate)
	Duplicate    int // 202 answers that said duplicate:true
	Unavailable  int // 503 answers
	NoRetryAfter int // 503 answers without Retry-After
	NoAnswer     int // connection refused, reset, timed out
	Other        int // any other answer: a bug under load
}

// load sends signed deliveries from many connections, some of them
// redeliveries of earlier ids, and records which were acknowledged.
type load struct {
	eps    []*endpoint // sender i delivers to eps[i%len(eps)]
	srcs   []source
	tag    string
	repeat float64 // share of sends that redeliver an earlier id
	keep   bool    // keep every reply (for outage windows)
	client *http.Client

	seq    atomic.Int64
	bodies sync.Map // key → []byte, the body sent for that key
	wg     sync.WaitGroup

	// targets are the named targets of every source (see serverSpec):
	// each acknowledged delivery must reach the sink once per target,
	// under the Idempotency-Key "source/target:id".
	targets []string

	mu      sync.Mutex
	acked   map[string]bool
	counts  loadCounts
	others  []string
	replies []reply
}

func newLoad(ep *endpoint, srcs []source, repeat float64) *load {
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	return &load{
		eps: []*endpoint{ep}, srcs: srcs, repeat: repeat,
		tag:    fmt.Sprintf("%x", rand.Uint32()),
		client: &http.Client{Transport: tr, Timeout: 15 * time.Second},
		acked:  map[string]bool{},
	}
}

// delivery returns delivery n: its source, id, key and body. The body is
// the same every time n is sent, as a provider's redelivery would be, and
// holds bytes a re-encoding would change.
func (l *load) delivery(n int64) (source, string, string, []byte) {
	src := l.srcs[int(n)%len(l.srcs)]
	pad := strings.Repeat("x", int(n%300))
	var id string
	var body []byte
	switch src.vc.Scheme {
	case "stripe":
		id = fmt.Sprintf("evt_%s_%d", l.tag, n)
		body = fmt.Appendf(nil, `{"id":%q, "object":"event","type":"invoice.paid","data":{"n":%d,"note":"caf\u00e9 café","pad":%q}}`, id, n, pad)
	case "standard-webhooks":
		id = fmt.Sprintf("msg_%s_%d", l.tag, n)
		body = fmt.Appendf(nil, `{"type":"order.paid",  "n":%d,"note":"caf\u00e9 café","pad":%q}`, n, pad)
	default:
		id = fmt.Sprintf("%s-%d", l.tag, n)
		body = fmt.Appendf(nil, `{"action":"opened","n":%d,"note":"caf\u00e9 café","pad":%q}`+"\n", n, pad)
	}
	key := src.name + ":" + id
	l.bodies.Store(key, body)
	return src, id, key, body
}

// checkBody is the sink's check: the forwarded body is byte for byte the
// one sent.
func (l *load) checkBody(key string, body []byte) error {
	want, ok := l.bodies.Load(eventKey(key))
	if !ok {
		return fmt.Errorf("key %q was never sent", key)
	}
	if !bytes.Equal(want.([]byte), body) {
		return fmt.Errorf("key %q: forwarded body differs from the body sent", key)
	}
	return nil
}

// eventKey is the "source:id" key of the event a forward's
// Idempotency-Key ("source:id", or "source/target:id") belongs to.
func eventKey(key string) string {
	src, rest, ok := strings.Cut(key, ":")
	if !ok {
		return key
	}
	src, _, _ = strings.Cut(src, "/")
	return src + ":" + rest
}

// sinkKeys are the Idempotency-Keys the acknowledged events must reach
// the sink under: one per event, or one per event and target.
func (l *load) sinkKeys(acked map[string]bool) map[string]bool {
	if len(l.targets) == 0 {
		return acked
	}
	out := make(map[string]bool, len(acked)*len(l.targets))
	for k := range acked {
		src, id, _ := strings.Cut(k, ":")
		for _, t := range l.targets {
			out[src+"/"+t+":"+id] = true
		}
	}
	return out
}

// run starts conns senders that stop when ctx ends; wait waits for them.
func (l *load) run(ctx context.Context, conns int) {
	for i := range conns {
		ep := l.eps[i%len(l.eps)]
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for ctx.Err() == nil {
				n := l.seq.Add(1)
				if n > 10 && rand.Float64() < l.repeat {
					n = max(1, n-1-rand.Int64N(min(n-1, 500)))
				}
				if !l.send(ctx, ep, n) {
					// No answer: the server is down. Wait for the next one
					// (or a moment, in case the same one recovers).
					_, changed := ep.get()
					select {
					case <-changed:
					case <-ctx.Done():
					case <-time.After(20 * time.Millisecond):
					}
				}
			}
		}()
	}
}

func (l *load) wait() { l.wg.Wait() }

// send delivers n once to ep and records the outcome; it reports whether
// an answer came.
func (l *load) send(ctx context.Context, ep *endpoint, n int64) bool {
	src, id, key, body := l.delivery(n)
	url, _ := ep.get()
	hdr, err := verify.Sign(src.vc, body, id, time.Now())
	if err != nil {
		panic(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/webhooks/"+src.name, bytes.NewReader(body))
	if err != nil {
		panic(err)
	}
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	r := reply{key: key, sent: time.Now()}
	resp, err := l.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return true // stopping; not an outcome
		}
		r.err = err
	} else {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		r.status, r.retryAfter, r.body = resp.StatusCode, resp.Header.Get("Retry-After"), string(b)
		if r.status == http.StatusAccepted {
			var v struct {
				ID        int64 `json:"id"`
				Duplicate bool  `json:"duplicate"`
			}
			if json.Unmarshal(b, &v) != nil || v.ID == 0 {
				r.status = -1 // a 202 that is not the documented reply
			}
			r.duplicate = v.Duplicate
		}
	}
	r.got = time.Now()
	l.record(r)
	return r.err == nil
}

func (l *load) record(r reply) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.counts.Sent++
	switch {
	case r.err != nil:
		l.counts.NoAnswer++
	case r.status == http.StatusAccepted:
		l.counts.Accepted++
		if r.duplicate {
			l.counts.Duplicate++
		}
		l.acked[r.key] = true
	case r.status == http.StatusServiceUnavailable:
		l.counts.Unavailable++
		if r.retryAfter == "" {
			l.counts.NoRetryAfter++
		}
	default:
		l.counts.Other++
		if len(l.others) < 10 {
			l.others = append(l.others, fmt.Sprintf("%s: %d %q", r.key, r.status, r.body))
		}
	}
	if l.keep {
		l.replies = append(l.replies, r)
	}
}

// snapshot returns the counts and a copy of the acknowledged keys.
func (l *load) snapshot() (loadCounts, map[string]bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	acked := make(map[string]bool, len(l.acked))
	for k := range l.acked {
		acked[k] = true
	}
	return l.counts, acked
}

func (l *load) accepted() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.counts.Accepted
}

// repliesBetween returns the replies to requests sent after from whose
// answer came before to.
func (l *load) repliesBetween(from, to time.Time) []reply {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []reply
	for _, r := range l.replies {
		if r.sent.After(from) && r.got.Before(to) {
			out = append(out, r)
		}
	}
	return out
}

// waitFor polls cond every 100ms until it holds, failing the test after
// timeout with cond's description of the state.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s (%s)", what, timeout, state)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// maxDrain bounds a drain that keeps making progress (waitProgress): the
// backlog a run leaves grows with how fast this machine ingests, so the
// drain is bounded by its progress, and this only keeps a run from going
// on for ever.
const maxDrain = 20 * time.Minute

// waitProgress polls left until it returns 0 (what is left to do, and
// how it stands), as waitFor does, and fails the test when what is left
// has not shrunk for stall, or after limit in all. A drain is judged by
// whether it moves, not by its speed: a stalled queue fails after stall
// whatever the backlog, and a large backlog on a loaded machine passes
// as long as it keeps shrinking. It asks every second: on a table of a
// million rows each question costs the server's database a count.
func waitProgress(t *testing.T, stall, limit time.Duration, what string, left func() (int, string)) {
	t.Helper()
	start := time.Now()
	least, moved := -1, start
	for {
		n, state := left()
		if n == 0 {
			return
		}
		if least < 0 || n < least {
			least, moved = n, time.Now()
		}
		switch {
		case time.Since(moved) > stall:
			t.Fatalf("%s: no progress for %s, after %s (%s)", what, stall, time.Since(start).Round(time.Second), state)
		case time.Since(start) > limit:
			t.Fatalf("%s: not within %s (%s)", what, limit, state)
		}
		time.Sleep(time.Second)
	}
}

// openStore opens the database the server uses, for checks.
func openStore(t *testing.T, dbURL string) hookbox.Store {
	t.Helper()
	st, err := service.OpenStore(context.Background(), dbURL, service.StoreOptions{})
	if err != nil {
		t.Fatalf("open the store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// countStatus counts the events in status s ("" for all).
func countStatus(t *testing.T, st hookbox.Store, s hookbox.Status) int {
	t.Helper()
	evs, err := st.Events(context.Background(), hookbox.Filter{Status: s, Limit: 1 << 30})
	if err != nil {
		t.Fatalf("list events: %v", err)
	}
	return len(evs)
}

// unfinished counts pending and processing events, by the store's
// statistics where it has them (one aggregate query, so that polling does
// not slow the drain it waits for).
func unfinished(t *testing.T, st hookbox.Store) int {
	t.Helper()
	if ops, ok := st.(hookbox.Ops); ok {
		s, err := ops.Stats(context.Background(), time.Now())
		if err != nil {
			t.Fatalf("queue statistics: %v", err)
		}
		return s.ByStatus[hookbox.StatusPending] + s.ByStatus[hookbox.StatusProcessing]
	}
	return countStatus(t, st, hookbox.StatusPending) + countStatus(t, st, hookbox.StatusProcessing)
}

// figures are what a run under faults ended with.
type figures struct {
	Acknowledged  int // distinct ids answered 202
	Answers202    int // 202 answers in all (redeliveries included)
	Stored        int // rows
	SinkSeen      int // distinct ids the sink accepted
	Missing       int // acknowledged ids the sink never accepted
	SinkDups      int // sink acceptances beyond the first per id
	NotDone       int // rows not done (dead included)
	Dead          int
	MaxAttempts   int // the most attempts any event took
	DupRows       int // (source, delivery id) pairs stored more than once
	StoredNotSeen int // rows whose key the sink never accepted
	Phantoms      int // ids the sink accepted that are not stored: work done for a row that vanished
	Backlog       int // events unfinished when the load stopped
	Drain         time.Duration
}

// logUnfinished logs the unfinished events, to see why a drain is slow.
func logUnfinished(t *testing.T, st hookbox.Store) {
	t.Helper()
	for _, status := range []hookbox.Status{hookbox.StatusPending, hookbox.StatusProcessing} {
		evs, err := st.Events(context.Background(), hookbox.Filter{Status: status, Limit: 20})
		if err != nil {
			t.Logf("list %s: %v", status, err)
			continue
		}
		for _, e := range evs {
			t.Logf("slow drain: event %d %s:%s %s attempts %d due in %s owner %q error %q",
				e.ID, e.Source, e.DeliveryID, e.Status, e.Attempts, time.Until(e.NextAttemptAt).Round(time.Millisecond), e.LeaseOwner, e.LastError)
		}
	}
}

// drainAndCheck waits until every acknowledged key reached the sink and no
// event is unfinished, stops the server (SIGTERM, which must end it
// cleanly), then checks the store and the sink against what was
// acknowledged, and returns the figures. The drain may go on as long as
// it makes progress; it fails when nothing moved for stall (waitProgress).
// Checking a stopped server keeps
// the figures still: a request the load gave up on may still be committed
// by the server after the drain looked done; such a row shows up as
// unfinished after the stop, and the server is started again to work it.
func drainAndCheck(t *testing.T, srvs fleet, st hookbox.Store, l *load, sink *faults.Sink, stall time.Duration) figures {
	t.Helper()
	counts, acked := l.snapshot()
	backlog, drainStart := unfinished(t, st), time.Now()
	var drained time.Duration
	for round := 0; ; round++ {
		logged := false
		progress := time.Now()
		waitProgress(t, stall, maxDrain, "queue drained, every acknowledged delivery at the sink", func() (int, string) {
			u := unfinished(t, st)
			if u > 0 && !logged && time.Since(drainStart) > 5*time.Second {
				logged = true
				logUnfinished(t, st)
			}
			missing := sink.Missing(l.sinkKeys(acked))
			// Every 30 s, how far the drain got.
			if time.Since(progress) >= 30*time.Second {
				progress = time.Now()
				t.Logf("drain after %s: %d events unfinished, %d acknowledged ids not at the sink",
					time.Since(drainStart).Round(time.Second), u, len(missing))
			}
			return u + len(missing), fmt.Sprintf("%d events unfinished, %d acknowledged ids not at the sink (e.g. %q)",
				u, len(missing), missing[:min(3, len(missing))])
		})
		if round == 0 {
			drained = time.Since(drainStart)
		}
		srvs.stop()
		if u := unfinished(t, st); u == 0 || round == 2 {
			break
		} else {
			t.Logf("%d events stored after the drain looked complete; working them", u)
		}
		srvs.start()
	}
	all, err := st.Events(context.Background(), hookbox.Filter{Limit: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	seen := sink.Keys()
	ss := sink.Stats()
	f := figures{Acknowledged: len(acked), Answers202: counts.Accepted, Stored: len(all),
		SinkSeen: ss.Distinct, SinkDups: ss.Duplicates, Missing: len(sink.Missing(l.sinkKeys(acked))),
		Backlog: backlog, Drain: drained}
	rows := map[string]int{}
	for _, e := range all {
		key := e.Source + ":" + e.DeliveryID
		rows[key]++
		if rows[key] == 2 {
			f.DupRows++
		}
		if e.Status != hookbox.StatusDone {
			f.NotDone++
			if f.NotDone <= 5 {
				t.Logf("not done: %s %s attempts %d: %s", key, e.Status, e.Attempts, e.LastError)
			}
		}
		if e.Status == hookbox.StatusDead {
			f.Dead++
		}
		f.MaxAttempts = max(f.MaxAttempts, e.Attempts)
		if seen[key] == 0 && !e.FanOut { // an event with targets is delivered as its deliveries
			f.StoredNotSeen++
		}
	}
	byID := map[string]hookbox.Event{}
	for _, e := range all {
		byID[strconv.FormatInt(e.ID, 10)] = e
	}
	for key := range seen {
		if rows[key] > 0 {
			continue
		}
		f.Phantoms++
		fw, _ := sink.First(key)
		now := "no row"
		if e, ok := byID[fw.EventID]; ok {
			now = fmt.Sprintf("row %d is now %s:%s, created %s", e.ID, e.Source, e.DeliveryID, e.CreatedAt.Format("15:04:05.000"))
		}
		t.Errorf("the sink got %s (event %s, attempt %s) at %s, but no row holds it (%s); acknowledged: %v",
			key, fw.EventID, fw.Attempt, fw.At.Format("15:04:05.000"), now, acked[key])
	}
	var notStored []string
	for k := range acked {
		if rows[k] == 0 {
			notStored = append(notStored, k)
		}
	}
	if len(notStored) > 0 {
		t.Errorf("%d acknowledged deliveries are not stored (e.g. %.5q): a 202 without a committed row", len(notStored), notStored)
	}
	if f.Missing != 0 {
		t.Errorf("%d acknowledged ids never reached the sink", f.Missing)
	}
	if f.NotDone != 0 {
		t.Errorf("%d events not done (%d dead)", f.NotDone, f.Dead)
	}
	if f.DupRows != 0 {
		t.Errorf("%d (source, delivery id) pairs stored more than once", f.DupRows)
	}
	if f.StoredNotSeen != 0 {
		t.Errorf("%d stored events never reached the sink", f.StoredNotSeen)
	}
	for _, p := range sink.Problems() {
		t.Errorf("sink: %s", p)
	}
	if counts.Other != 0 {
		t.Errorf("%d answers other than 202, 503 or no answer: %q", counts.Other, l.others)
	}
	if counts.NoRetryAfter != 0 {
		t.Errorf("%d answers of 503 without Retry-After", counts.NoRetryAfter)
	}
	if f.Acknowledged == 0 {
		t.Error("no delivery was acknowledged")
	}
	return f
}
