package service

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/config"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/internal/syncbuf"
	"github.com/hookbox/hookbox/rejected"
	"github.com/hookbox/hookbox/server"
	"github.com/hookbox/hookbox/storetest"
	"github.com/hookbox/hookbox/verify"
	"github.com/hookbox/hookbox/worker"
)

const (
	opsAdminToken = "adm_0ps_t0ken_never_in_logs_7f3a"
	opsPolarKey   = "b3BzLXRlc3QtcG9sYXItc2VjcmV0LWtleQ=="
	opsGitHubKey  = "gh-ops-secret-never-logged"
	// opsMarker is in every payload the tests send; it must never be
	// logged.
	opsMarker = "PAYLOAD-MARKER-c4f1e2"
)

var opsSecrets = []string{"whsec_" + opsPolarKey, opsPolarKey, opsGitHubKey, opsAdminToken}

const opsConfig = `
admin_token: "` + opsAdminToken + `"
log:
  format: json
  level: debug
sources:
  - name: polar
    scheme: standard-webhooks
    secrets: ["whsec_` + opsPolarKey + `"]
    max_attempts: 2
    backoff_min: 10ms
    backoff_max: 20ms
  - name: github
    scheme: github
    secrets: ["` + opsGitHubKey + `"]
    max_attempts: 1
  - name: small
    scheme: none
    max_body_bytes: 64
`

// opsHarness is a running service on a real port with its log captured.
type opsHarness struct {
	t    *testing.T
	url  string
	svc  *Service
	cfg  *config.Config
	logs *syncbuf.Buffer
	stop func()
}

// startOps serves cfgYAML on dbURL; setup runs before Serve (to register
// handlers).
func startOps(t *testing.T, dbURL, cfgYAML string, setup func(*Service)) *opsHarness {
	t.Helper()
	cfg, err := config.Parse([]byte(cfgYAML))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DB = dbURL
	logs := &syncbuf.Buffer{}
	log := slog.New(slog.NewJSONHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	ctx, cancel := context.WithCancel(context.Background())
	svc, err := New(ctx, cfg, log)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if setup != nil {
		setup(svc)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- svc.Serve(ctx, ln) }()
	var once sync.Once
	h := &opsHarness{t: t, url: "http://" + ln.Addr().String(), svc: svc, cfg: cfg, logs: logs}
	h.stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("serve: %v", err)
			}
		})
	}
	t.Cleanup(h.stop)
	return h
}

func (h *opsHarness) send(source, deliveryID, body string, mutate func(http.Header)) int {
	h.t.Helper()
	var hdr http.Header
	for _, s := range h.cfg.Sources {
		if s.Name == source {
			var err error
			if hdr, err = verify.Sign(s.Verify(), []byte(body), deliveryID, time.Now()); err != nil {
				h.t.Fatal(err)
			}
		}
	}
	req, _ := http.NewRequest("POST", h.url+"/webhooks/"+source, strings.NewReader(body))
	for k, v := range hdr {
		req.Header[k] = v
	}
	req.Header.Set("Content-Type", "application/json")
	if mutate != nil {
		mutate(req.Header)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

func (h *opsHarness) admin(method, path, token string, v any) int {
	h.t.Helper()
	req, _ := http.NewRequest(method, h.url+path, nil)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		h.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if v != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, v); err != nil {
			h.t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
	return resp.StatusCode
}

func (h *opsHarness) event(id int64) hookbox.Event {
	h.t.Helper()
	e, err := h.svc.Store.Event(context.Background(), id)
	if err != nil {
		h.t.Fatal(err)
	}
	return e
}

func (h *opsHarness) waitStatus(id int64, want hookbox.Status) {
	h.t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for {
		e := h.event(id)
		if e.Status == want {
			return
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("event %d is %s after 15s, want %s", id, e.Status, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (h *opsHarness) idOf(source, deliveryID string) int64 {
	h.t.Helper()
	evs, err := h.svc.Store.Events(context.Background(), hookbox.Filter{Source: source, Limit: 1000})
	if err != nil {
		h.t.Fatal(err)
	}
	for _, e := range evs {
		if e.DeliveryID == deliveryID {
			return e.ID
		}
	}
	h.t.Fatalf("no event %s/%s", source, deliveryID)
	return 0
}

func needOps(t *testing.T, st hookbox.Store) hookbox.Ops {
	t.Helper()
	ops, ok := st.(hookbox.Ops)
	if !ok {
		t.Skipf("%T does not implement hookbox.Ops yet", st)
	}
	return ops
}

// scrapeMetrics returns each sample's value by its series as printed.
func scrapeMetrics(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		out[line[:i]] = v
	}
	return out
}

func payload(id string) string {
	return fmt.Sprintf(`{"type":"order.paid","id":%q,"note":%q}`, id, opsMarker)
}

// TestMetricsAfterTraffic scrapes /metrics after known traffic and checks
// the counters exactly.
func TestMetricsAfterTraffic(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		h := startOps(t, dbURL, opsConfig, func(s *Service) {
			s.Pool.Handle("polar", "", func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
				return errors.New("downstream refused")
			})
		})
		codes := []int{
			h.send("polar", "msg_1", payload("1"), nil),
			h.send("polar", "msg_2", payload("2"), nil),
			h.send("polar", "msg_1", payload("1"), nil), // duplicate
			h.send("polar", "msg_3", payload("3"), func(hd http.Header) { hd.Set("Webhook-Signature", "v1,c2lnbmF0dXJlLWZyb20tbm93aGVyZQ==") }),
			h.send("nowhere-"+opsMarker, "msg_4", payload("4"), nil),
			h.send("github", "gh-1", payload("5"), func(hd http.Header) { hd.Del("X-GitHub-Delivery") }),
			h.send("small", "", strings.Repeat("x", 100), nil),
			h.send("github", "gh-2", payload("6"), nil),
		}
		if want := []int{202, 202, 202, 401, 404, 400, 413, 202}; !slices.Equal(codes, want) {
			t.Fatalf("replies %v, want %v", codes, want)
		}
		// polar: 2 attempts each (retry, then dead); github has no work
		// registered and stays pending.
		h.waitStatus(h.idOf("polar", "msg_1"), hookbox.StatusDead)
		h.waitStatus(h.idOf("polar", "msg_2"), hookbox.StatusDead)
		// An attempt is counted once its outcome has committed, a moment
		// after the status above can be read: wait for the counts.
		got := scrapeMetrics(t, h.url)
		for deadline := time.Now().Add(10 * time.Second); got[`hookbox_attempt_seconds_count{source="polar"}`] < 4 && time.Now().Before(deadline); {
			time.Sleep(20 * time.Millisecond)
			got = scrapeMetrics(t, h.url)
		}
		want := map[string]float64{
			`hookbox_deliveries_total{outcome="new",source="polar"}`:            2,
			`hookbox_deliveries_total{outcome="duplicate",source="polar"}`:      1,
			`hookbox_deliveries_total{outcome="bad_signature",source="polar"}`:  1,
			`hookbox_deliveries_total{outcome="unknown_source",source=""}`:      1,
			`hookbox_deliveries_total{outcome="malformed",source="github"}`:     1,
			`hookbox_deliveries_total{outcome="too_large",source="small"}`:      1,
			`hookbox_deliveries_total{outcome="new",source="github"}`:           1,
			`hookbox_deliveries_total{outcome="unavailable",source="polar"}`:    0,
			`hookbox_deliveries_total{outcome="bad_signature",source="github"}`: 0,
			`hookbox_ingest_seconds_count`:                                      4,
			`hookbox_attempts_total{outcome="retry",source="polar"}`:            2,
			`hookbox_attempts_total{outcome="dead",source="polar"}`:             2,
			`hookbox_attempts_total{outcome="done",source="polar"}`:             0,
			`hookbox_attempts_total{outcome="lost",source="polar"}`:             0,
			`hookbox_attempt_seconds_count{source="polar"}`:                     4,
			`hookbox_dead_total{source="polar"}`:                                2,
			`hookbox_dead_total{source="github"}`:                               0,
			`hookbox_events{status="dead"}`:                                     2,
			`hookbox_events{status="pending"}`:                                  1,
			`hookbox_events{status="processing"}`:                               0,
			`hookbox_events{status="done"}`:                                     0,
		}
		for k, v := range want {
			if g, ok := got[k]; !ok || g != v {
				t.Errorf("%s = %v (present %v), want %v", k, g, ok, v)
			}
		}
		// Four stored deliveries went through group commit.
		if n := got["hookbox_ingest_batch_size_sum"]; n != 4 {
			t.Errorf("batch sizes sum to %v, want 4", n)
		}
		if age := got["hookbox_oldest_due_seconds"]; age <= 0 || age > 60 {
			t.Errorf("oldest due age %v, want the pending github event's few seconds", age)
		}
		for k := range got {
			for _, bad := range []string{"nowhere", "msg_", "gh-", opsMarker} {
				if strings.Contains(k, bad) {
					t.Errorf("metric series %s carries %q", k, bad)
				}
			}
		}
	})
}

// TestReplayDeadEndsDone: an event whose handler fails goes dead; after
// the cause is fixed, an admin replay runs it again and it ends done.
func TestReplayDeadEndsDone(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		var fixed atomic.Bool
		var runs atomic.Int32
		h := startOps(t, dbURL, opsConfig, func(s *Service) {
			s.Pool.Handle("github", "", func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
				runs.Add(1)
				if !fixed.Load() {
					return errors.New("downstream is down")
				}
				return nil
			})
		})
		needOps(t, h.svc.Store)
		for _, id := range []string{"gh-1", "gh-2", "gh-3"} {
			if code := h.send("github", id, payload(id), nil); code != 202 {
				t.Fatalf("send %s: %d", id, code)
			}
		}
		ids := []int64{h.idOf("github", "gh-1"), h.idOf("github", "gh-2"), h.idOf("github", "gh-3")}
		for _, id := range ids {
			h.waitStatus(id, hookbox.StatusDead) // max_attempts 1
		}
		fixed.Store(true)

		var rep server.ReplayReply
		if code := h.admin("POST", fmt.Sprintf("/admin/events/%d/replay", ids[0]), opsAdminToken, &rep); code != 200 {
			t.Fatalf("replay: %d", code)
		}
		h.waitStatus(ids[0], hookbox.StatusDone)
		var d server.EventDetail
		if code := h.admin("GET", fmt.Sprintf("/admin/events/%d", ids[0]), opsAdminToken, &d); code != 200 {
			t.Fatalf("show: %d", code)
		}
		var outcomes []string
		for _, a := range d.Attempts {
			outcomes = append(outcomes, a.Outcome)
		}
		if !slices.Equal(outcomes, []string{"dead", hookbox.AttemptReplay, "done"}) || d.Event.Attempts != 2 {
			t.Errorf("after replay: attempts %v, count %d", outcomes, d.Event.Attempts)
		}
		if h.event(ids[1]).Status != hookbox.StatusDead {
			t.Fatalf("a dead event not named was replayed")
		}

		// Bulk: dry run first, then the rest of the dead ones.
		if code := h.admin("POST", "/admin/replay?status=dead&source=github&dry_run=true", opsAdminToken, &rep); code != 200 || len(rep.Replayed) != 2 {
			t.Fatalf("dry bulk replay: %d %+v", code, rep)
		}
		time.Sleep(50 * time.Millisecond)
		for _, id := range ids[1:] {
			if h.event(id).Status != hookbox.StatusDead {
				t.Fatalf("dry run replayed %d", id)
			}
		}
		if code := h.admin("POST", "/admin/replay?status=dead&source=github&since=1h", opsAdminToken, &rep); code != 200 || !slices.Equal(rep.Replayed, ids[1:]) {
			t.Fatalf("bulk replay: %d %+v", code, rep)
		}
		for _, id := range ids[1:] {
			h.waitStatus(id, hookbox.StatusDone)
		}
		if n := runs.Load(); n != 6 {
			t.Errorf("handler ran %d times, want 6 (3 failures, 3 successes)", n)
		}
	})
}

// TestAdminOffWithoutToken: no admin_token, no admin routes.
func TestAdminOffWithoutToken(t *testing.T) {
	cfg := strings.Replace(opsConfig, `admin_token: "`+opsAdminToken+`"`, "", 1)
	h := startOps(t, dbtest.SQLiteURL(t), cfg, nil)
	for _, p := range []string{"/admin/events", "/admin/events/1"} {
		if code := h.admin("GET", p, opsAdminToken, nil); code != 404 {
			t.Errorf("GET %s = %d, want 404", p, code)
		}
	}
	if code := h.admin("POST", "/admin/purge?days=1", "", nil); code != 404 {
		t.Errorf("purge = %d, want 404", code)
	}
	if code := h.admin("GET", "/admin/events", "", nil); code != 404 {
		t.Errorf("no token = 404 expected, got %d", code)
	}
	if code := h.admin("GET", "/metrics", "", nil); code != 200 {
		t.Errorf("/metrics = %d", code)
	}
}

// TestLogsCarryNoSecrets captures every log line of a run with signed
// traffic, bad signatures, failing attempts and admin calls, and checks no
// secret, admin token or payload appears.
func TestLogsCarryNoSecrets(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		h := startOps(t, dbURL, opsConfig, func(s *Service) {
			s.Pool.Handle("polar", "", func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
				return fmt.Errorf("handler failed for event %d", ev.ID)
			})
			s.Pool.Handle("github", "", func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
				return worker.Permanent(errors.New("cannot handle this one"))
			})
		})
		for i := range 5 {
			h.send("polar", fmt.Sprint("msg_", i), payload(fmt.Sprint(i)), nil)
		}
		h.send("polar", "msg_0", payload("0"), nil) // duplicate
		h.send("polar", "msg_bad", payload("bad"), func(hd http.Header) { hd.Set("Webhook-Signature", "v1,"+opsPolarKey) })
		h.send("github", "gh-1", payload("gh"), func(hd http.Header) { hd.Set("Authorization", "Bearer "+opsAdminToken) })
		h.send("github", "gh-bad", payload("gh-bad"), func(hd http.Header) { hd.Set("X-Hub-Signature-256", "sha256=00") })
		h.send("small", "", opsMarker+strings.Repeat("y", 100), nil)
		h.send("nowhere", "x", payload("nowhere"), nil)
		for i := range 5 {
			h.waitStatus(h.idOf("polar", fmt.Sprint("msg_", i)), hookbox.StatusDead)
		}
		gh := h.idOf("github", "gh-1")
		h.waitStatus(gh, hookbox.StatusDead)

		h.admin("GET", "/admin/events", "wrong-"+opsAdminToken[:6], nil)
		h.admin("GET", "/admin/events", "", nil)
		h.admin("GET", "/admin/events?status=dead", opsAdminToken, nil)
		h.admin("GET", fmt.Sprintf("/admin/events/%d", gh), opsAdminToken, nil)
		h.admin("GET", fmt.Sprintf("/admin/events/%d?payload=raw", gh), opsAdminToken, nil)
		if _, ok := h.svc.Store.(hookbox.Ops); ok {
			h.admin("POST", fmt.Sprintf("/admin/events/%d/replay", gh), opsAdminToken, nil)
			h.admin("POST", "/admin/replay?source=polar&status=dead", opsAdminToken, nil)
			h.admin("POST", "/admin/purge?days=0&include_dead=true&dry_run=true", opsAdminToken, nil)
			h.waitStatus(gh, hookbox.StatusDead)
		}
		scrapeMetrics(t, h.url)
		h.stop()

		logs := h.logs.String()
		for _, secret := range append(opsSecrets, opsMarker, `\"note\"`, "wrong-"+opsAdminToken[:6]) {
			if strings.Contains(logs, secret) {
				t.Errorf("the log contains %q", secret)
			}
		}
		// The log is not empty: one line per delivery, per failed attempt,
		// per refused admin call.
		for _, want := range []string{`"msg":"delivery"`, `"delivery_id":"msg_3"`, `"msg":"delivery rejected"`,
			`"msg":"attempt failed"`, `"msg":"event dead"`, `"msg":"admin request refused"`} {
			if !strings.Contains(logs, want) {
				t.Errorf("the log lacks %s", want)
			}
		}
		for _, line := range strings.Split(strings.TrimSpace(logs), "\n") {
			if !json.Valid([]byte(line)) {
				t.Errorf("log line is not JSON: %s", line)
			}
		}
		if t.Failed() {
			t.Logf("log:\n%s", logs)
		}
	})
}

// seedFinished ingests events of source and finishes them with status at
// `at` (pending ones are left as ingested).
func seedFinished(t *testing.T, st hookbox.Store, source string, status hookbox.Status, at time.Time, ids ...string) []int64 {
	t.Helper()
	var ds []hookbox.Delivery
	for _, id := range ids {
		ds = append(ds, hookbox.Delivery{Source: source, DeliveryID: id, EventType: "t",
			Payload: []byte(payload(id)), ReceivedAt: time.Now()})
	}
	return storetest.Seed(t, st.(storetest.QueueStore), status, at, "", ds...)
}

// TestRetention: serve purges finished events older than retention_days
// at start and periodically, clears payloads older than
// payload_retention_days, and never touches pending, processing or dead
// events.
func TestRetention(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		needOps(t, st)
		day := 24 * time.Hour
		now := time.Now()
		oldDone := seedFinished(t, st, "a", hookbox.StatusDone, now.Add(-40*day), "1", "2")
		oldDead := seedFinished(t, st, "b", hookbox.StatusDead, now.Add(-40*day), "3")
		midDone := seedFinished(t, st, "c", hookbox.StatusDone, now.Add(-10*day), "4")
		processing := seedFinished(t, st, "d", hookbox.StatusProcessing, now.Add(-40*day), "5")
		pending := seedFinished(t, st, "e", hookbox.StatusPending, now, "6")
		st.Close()

		cfg := opsConfig + "retention_days: 30\npayload_retention_days: 7\n"
		h := startOps(t, dbURL, cfg, nil)
		exists := func(id int64) bool {
			_, err := h.svc.Store.Event(context.Background(), id)
			return err == nil
		}
		deadline := time.Now().Add(10 * time.Second)
		for exists(oldDone[0]) || exists(oldDone[1]) || len(h.event(midDone[0]).Payload) > 0 {
			if time.Now().After(deadline) {
				t.Fatalf("retention did not run at start")
			}
			time.Sleep(10 * time.Millisecond)
		}
		if e := h.event(midDone[0]); e.Status != hookbox.StatusDone || e.DeliveryID != "4" {
			t.Errorf("payload retention changed the record: %+v", e)
		}
		for _, id := range slices.Concat(oldDead, processing, pending) {
			if e := h.event(id); len(e.Payload) == 0 {
				t.Errorf("%s event %d lost its payload", e.Status, id)
			}
		}
		h.stop()
		logs := h.logs.String()
		if !strings.Contains(logs, `"msg":"retention purge"`) || !strings.Contains(logs, "processed again") {
			t.Errorf("purge not logged with its cost:\n%s", logs)
		}

		// The loop runs again each interval with the clock moving on, and
		// stops with its context.
		svc := &Service{Config: h.cfg, Store: dbtest.Open(t, dbURL), log: slog.New(slog.DiscardHandler)}
		var clock atomic.Int64
		var reads atomic.Int32 // one per run, read as it begins
		clock.Store(now.UnixNano())
		ctx, cancel := context.WithCancel(context.Background())
		stopped := make(chan struct{})
		go func() {
			svc.retentionLoop(ctx, 10*time.Millisecond, func() time.Time { reads.Add(1); return time.Unix(0, clock.Load()) })
			close(stopped)
		}()
		// A second run has begun: the first, as of now, has ended.
		deadline = time.Now().Add(20 * time.Second)
		for reads.Load() < 2 {
			if time.Now().After(deadline) {
				t.Fatalf("the retention loop began %d runs in 20 s, want 2", reads.Load())
			}
			time.Sleep(5 * time.Millisecond)
		}
		if !svcExists(svc, midDone[0]) {
			t.Fatalf("a 10-day-old done event was purged with retention_days 30")
		}
		clock.Store(now.Add(25 * day).UnixNano()) // midDone is now 35 days old
		deadline = time.Now().Add(20 * time.Second)
		for svcExists(svc, midDone[0]) {
			if time.Now().After(deadline) {
				t.Fatalf("the periodic run did not purge")
			}
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
		select {
		case <-stopped:
		case <-time.After(5 * time.Second):
			t.Fatalf("retention loop did not stop with its context")
		}
		for _, id := range slices.Concat(oldDead, processing, pending) {
			if !svcExists(svc, id) {
				t.Errorf("event %d was purged", id)
			}
		}
	})
}

func svcExists(s *Service, id int64) bool {
	_, err := s.Store.Event(context.Background(), id)
	return err == nil
}

// TestRetentionOff: without retention settings the loop returns at once.
func TestRetentionOff(t *testing.T) {
	svc := &Service{Config: &config.Config{}, log: slog.New(slog.DiscardHandler)}
	done := make(chan struct{})
	go func() { svc.runRetention(context.Background()); close(done) }()
	select {
	case <-done:
	case <-time.After(20 * time.Second): // a loop that runs never returns: no need to time "at once"
		t.Fatal("runRetention kept running with retention off")
	}
}

// TestRetentionTrimsRejectedLog: rejected.max_age holds while nothing is
// refused: the retention loop trims the log of refused deliveries on each
// tick, with retention_days and payload_retention_days off. The log was
// trimmed only when a refusal was written, so the rows of a burst (headers,
// bodies) stayed past max_age until the next one.
func TestRetentionTrimsRejectedLog(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		now := time.Now()
		if _, err := st.AddRejections(ctx, []hookbox.Rejection{
			{Source: "gh", ReceivedAt: now.Add(-2 * time.Hour), Status: 401, Reason: "old", BodySize: 2, Body: []byte("{}"), BodyComplete: true},
			{Source: "gh", ReceivedAt: now, Status: 401, Reason: "new", BodySize: -1},
		}, hookbox.RejectionBounds{}); err != nil {
			t.Fatal(err)
		}
		rec := rejected.NewRecorder(st, rejected.Options{MaxAge: time.Hour})
		defer rec.Close()
		svc := &Service{Config: &config.Config{}, Store: st, Rejections: rec, log: slog.New(slog.DiscardHandler)}
		stopped := make(chan struct{})
		go func() {
			svc.retentionLoop(ctx, 10*time.Millisecond, time.Now)
			close(stopped)
		}()
		deadline := time.Now().Add(10 * time.Second)
		for {
			rs, err := st.Rejections(ctx, hookbox.RejectionFilter{})
			if err != nil {
				t.Fatal(err)
			}
			if len(rs) == 1 {
				if rs[0].Reason != "new" {
					t.Errorf("the trim kept %+v, want the new rejection", rs[0])
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the rejection older than max_age is still listed: %+v", rs)
			}
			time.Sleep(5 * time.Millisecond)
		}
		cancel()
		select {
		case <-stopped:
		case <-time.After(5 * time.Second):
			t.Fatal("retention loop did not stop with its context")
		}
	})
}

// TestRetentionHugeDays: retention_days and payload_retention_days past the
// cap (meant as "forever"; RETENTION_DAYS sets the first) purge and clear
// nothing and say why in the log, instead of wrapping into a cut-off in
// the future that purges every finished event.
func TestRetentionHugeDays(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		ops := needOps(t, st)
		done := seedFinished(t, st, "a", hookbox.StatusDone, time.Now().Add(-48*time.Hour), "1")
		var logs syncbuf.Buffer
		svc := &Service{
			Config: &config.Config{RetentionDays: 200000, PayloadRetentionDays: 106752},
			Store:  st,
			log:    slog.New(slog.NewJSONHandler(&logs, nil)),
		}
		svc.retainOnce(context.Background(), ops, time.Now())
		e, err := st.Event(context.Background(), done[0])
		if err != nil || len(e.Payload) == 0 {
			t.Fatalf("event after retention with huge day counts: %+v, %v", e, err)
		}
		for _, want := range []string{"retention_days", "payload_retention_days", "36500"} {
			if !strings.Contains(logs.String(), want) {
				t.Errorf("log lacks %q:\n%s", want, logs.String())
			}
		}
	})
}

// stopAfterFirstBatch is the store's Ops whose Purge works in batches of
// two and cancels its context once the first batch has committed, as a
// shutdown in the middle of a purge would.
type stopAfterFirstBatch struct {
	hookbox.Ops
	cancel context.CancelFunc
}

func (o stopAfterFirstBatch) Purge(ctx context.Context, p hookbox.PurgeParams) (hookbox.PurgeResult, error) {
	p.BatchSize, p.Progress = 2, func(hookbox.PurgeResult) { o.cancel() }
	return o.Ops.Purge(ctx, p)
}

// TestRetentionStoppedSaysWhatItDid: a retention purge stopped part-way
// (a shutdown) says how many events it deleted; it said nothing.
func TestRetentionStoppedSaysWhatItDid(t *testing.T) {
	st := dbtest.Open(t, dbtest.SQLiteURL(t))
	seedFinished(t, st, "a", hookbox.StatusDone, time.Now().Add(-48*time.Hour), "1", "2", "3", "4", "5", "6")
	var logs syncbuf.Buffer
	svc := &Service{Config: &config.Config{RetentionDays: 1}, Store: st, log: slog.New(slog.NewJSONHandler(&logs, nil))}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	svc.retainOnce(ctx, stopAfterFirstBatch{needOps(t, st), cancel}, time.Now())
	if !strings.Contains(logs.String(), `"msg":"retention purge stopped by shutdown","done":`) {
		t.Errorf("log does not say what the stopped purge deleted:\n%s", logs.String())
	}
}

// TestClientLimitExempt: max_client_connections spares the local networks,
// where proxies sit, and the trusted proxies; it limits everyone else.
func TestClientLimitExempt(t *testing.T) {
	cfg, err := config.Parse([]byte("trusted_proxies: [203.0.113.9]\nsources:\n  - name: a\n    scheme: none\n"))
	if err != nil {
		t.Fatal(err)
	}
	exempt := clientLimitExempt(cfg)
	for addr, want := range map[string]bool{
		"203.0.113.9": true, "127.0.0.1": true, "::1": true, "10.1.2.3": true, "192.168.0.7": true, "fd00::5": true,
		"203.0.113.10": false, "198.51.100.1": false, "2001:db8::1": false,
	} {
		a := netip.MustParseAddr(addr)
		got := slices.ContainsFunc(exempt, func(p netip.Prefix) bool { return p.Contains(a) })
		if got != want {
			t.Errorf("%s exempt = %v, want %v", addr, got, want)
		}
	}
}

// TestWorkerSlotsMetrics: /metrics reports the workers' slots
// (workers.concurrency) and how many deliveries hold one now, read when
// scraped: two deliveries held by their target hold two, and none once
// they end.
func TestWorkerSlotsMetrics(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		release := make(chan struct{})
		var once sync.Once
		letGo := func() { once.Do(func() { close(release) }) }
		defer letGo()
		h := startOps(t, dbURL, opsConfig+"workers:\n  concurrency: 5\n", func(s *Service) {
			s.Pool.Route("github", worker.TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
				select {
				case <-release:
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			}))
		})
		for _, id := range []string{"gh-1", "gh-2"} {
			if code := h.send("github", id, payload(id), nil); code != http.StatusAccepted {
				t.Fatalf("delivery %s answered %d", id, code)
			}
		}
		await := func(busy float64) map[string]float64 {
			t.Helper()
			got := scrapeMetrics(t, h.url)
			for deadline := time.Now().Add(10 * time.Second); got["hookbox_worker_slots_busy"] != busy; got = scrapeMetrics(t, h.url) {
				if time.Now().After(deadline) {
					t.Fatalf("hookbox_worker_slots_busy = %v after 10s, want %v", got["hookbox_worker_slots_busy"], busy)
				}
				time.Sleep(10 * time.Millisecond)
			}
			return got
		}
		if got := await(2); got["hookbox_worker_slots"] != 5 {
			t.Errorf("hookbox_worker_slots = %v, want 5 (workers.concurrency)", got["hookbox_worker_slots"])
		}
		letGo()
		await(0)
	})
}
