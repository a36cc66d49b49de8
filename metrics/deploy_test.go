package metrics_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/metrics"
)

// deployDir holds the alert rules and the dashboard shipped with hookbox.
const deployDir = "../deploy"

// exportedNames returns every series name hookbox's /metrics can show:
// each family's name, and for histograms and summaries the _bucket, _sum
// and _count series, from a Metrics whose every metric has a sample.
func exportedNames(t *testing.T) map[string]bool {
	t.Helper()
	m := metrics.New([]string{"a"})
	m.WatchStats(func(ctx context.Context, now time.Time) (hookbox.Stats, error) {
		return hookbox.Stats{ByStatus: map[hookbox.Status]int{hookbox.StatusPending: 1}, OldestDue: now.Add(-time.Second), OldestDueAge: time.Second}, nil
	}, 0, nil)
	m.WatchHeldKeys(func(ctx context.Context, names []string) (map[string]int, error) {
		return map[string]int{"a": 1}, nil
	}, []string{"a"}, 0, nil)
	m.WatchSlots(func() (int, int) { return 1, 2 })
	m.Delivery("a", metrics.OutcomeNew, time.Millisecond)
	m.Batch(1, time.Millisecond, nil)
	m.RejectionUnlogged("a", "rate")
	m.Circuit("a", true)
	now := time.Now()
	m.Attempt(&hookbox.Event{Source: "a"}, hookbox.Outcome{Status: hookbox.StatusDead, StartedAt: now, FinishedAt: now.Add(time.Millisecond)}, errors.New("x"))
	families, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	names := map[string]bool{}
	for _, f := range families {
		names[f.GetName()] = true
		switch f.GetType() {
		case dto.MetricType_HISTOGRAM, dto.MetricType_SUMMARY:
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				names[f.GetName()+suffix] = true
			}
		}
	}
	for _, want := range []string{"hookbox_deliveries_total", "hookbox_dead_total", "hookbox_oldest_due_seconds", "hookbox_events", "hookbox_target_keys_held", "hookbox_rejections_unlogged_total", "hookbox_target_circuit_open", "hookbox_worker_slots", "hookbox_worker_slots_busy"} {
		if !names[want] {
			t.Fatalf("%s not gathered; the test's Metrics lack a sample", want)
		}
	}
	return names
}

// seriesName matches the metric names in a PromQL expression: identifiers
// followed by a label selector, a range, or standing alone. Functions,
// keywords and label names are filtered out by the callers' knowledge of
// what names look like (hookbox_, go_, process_, up).
var seriesName = regexp.MustCompile(`\b(hookbox_[a-z_]+|go_[a-z_]+|process_[a-z_]+|up)\b`)

// checkNames fails for each name in expr that hookbox does not export.
// up is Prometheus's own series for every scrape target.
func checkNames(t *testing.T, where, expr string, exported map[string]bool) int {
	t.Helper()
	n := 0
	for _, name := range seriesName.FindAllString(expr, -1) {
		n++
		if name != "up" && !exported[name] {
			t.Errorf("%s uses %s, which hookbox does not export (metrics/metrics.go)", where, name)
		}
	}
	return n
}

// TestAlertRulesUseExportedMetrics: every metric the alert rules name is
// one hookbox exports, and promtool (Debian's prometheus package) finds
// the rules valid and their unit tests passing. Outside CI, a machine
// without promtool skips that part.
func TestAlertRulesUseExportedMetrics(t *testing.T) {
	exported := exportedNames(t)
	rules := filepath.Join(deployDir, "prometheus", "hookbox-alerts.yml")
	raw, err := os.ReadFile(rules)
	if err != nil {
		t.Fatal(err)
	}
	var alerts, used int
	for _, line := range strings.Split(string(raw), "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "- alert:") {
			alerts++
		}
		if strings.HasPrefix(trimmed, "#") || strings.HasPrefix(trimmed, "description:") || strings.HasPrefix(trimmed, "summary:") {
			continue // prose may mention metrics; only expressions are checked
		}
		used += checkNames(t, rules, line, exported)
	}
	if alerts < 5 || used < alerts {
		t.Fatalf("%d alerts naming %d metrics: the file was not read as expected", alerts, used)
	}

	promtool, err := exec.LookPath("promtool")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("promtool not found: CI installs Debian's prometheus package (see .ci/run)")
		}
		t.Skip("promtool not found (Debian's prometheus package); the rules were not checked by it")
	}
	for _, args := range [][]string{{"check", "rules", rules}, {"test", "rules", filepath.Join(deployDir, "prometheus", "hookbox-alerts_test.yml")}} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}

// TestDashboardUsesExportedMetrics: the Grafana dashboard is JSON with
// panels, and every metric its queries name is one hookbox exports.
func TestDashboardUsesExportedMetrics(t *testing.T) {
	exported := exportedNames(t)
	path := filepath.Join(deployDir, "grafana", "hookbox-dashboard.json")
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string `json:"title"`
		Panels []struct {
			Title   string `json:"title"`
			Targets []struct {
				Expr string `json:"expr"`
			} `json:"targets"`
		} `json:"panels"`
		Templating struct {
			List []struct {
				Query any `json:"query"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("%s does not parse: %v", path, err)
	}
	if dash.Title == "" || len(dash.Panels) < 8 {
		t.Fatalf("dashboard %q has %d panels", dash.Title, len(dash.Panels))
	}
	var used []string
	for _, p := range dash.Panels {
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, q := range p.Targets {
			if checkNames(t, path+": panel "+p.Title, q.Expr, exported) == 0 {
				t.Errorf("panel %q: query %q names no metric", p.Title, q.Expr)
			}
			checkDatabaseWide(t, "panel "+p.Title, q.Expr)
			used = append(used, seriesName.FindAllString(q.Expr, -1)...)
		}
	}
	for _, v := range dash.Templating.List {
		if s, ok := v.Query.(string); ok {
			checkNames(t, path+": variable", s, exported)
		}
	}
	// The panels cover the signals the alerts watch.
	for _, want := range []string{"hookbox_oldest_due_seconds", "hookbox_dead_total", "hookbox_deliveries_total", "hookbox_ingest_seconds_bucket", "hookbox_ingest_store_seconds_bucket", "hookbox_attempts_total"} {
		if !slices.Contains(used, want) {
			t.Errorf("no panel shows %s", want)
		}
	}
}

// databaseWide are the gauges every hookbox process reads from the whole
// database: N processes on one PostgreSQL each report the same figure.
var databaseWide = []string{"hookbox_events", "hookbox_oldest_due_seconds", "hookbox_target_keys_held"}

// checkDatabaseWide fails for a query that adds up a database-wide gauge
// over instances (it would show N times the real count behind N
// processes): max (max by (status)) reads it once.
func checkDatabaseWide(t *testing.T, where, expr string) {
	t.Helper()
	for _, name := range seriesName.FindAllString(expr, -1) {
		if slices.Contains(databaseWide, name) && regexp.MustCompile(`\b(sum|count|avg)\b`).MatchString(expr) {
			t.Errorf("%s: %q aggregates %s, a database-wide figure every instance reports, other than by max", where, expr, name)
		}
	}
}

// docMetric matches a metric's name in prose.
var docMetric = regexp.MustCompile(`\bhookbox_[a-z_]+\b`)

// TestDocsNameExportedMetrics: every metric the README and the deploy
// guide name is one hookbox exports, so an operator's query or alert
// written from the docs finds its series.
func TestDocsNameExportedMetrics(t *testing.T) {
	exported := exportedNames(t)
	var used int
	for _, doc := range []string{filepath.Join("..", "README.md"), filepath.Join("..", "docs", "deploy.md")} {
		raw, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		// Prose names Go identifiers (go_handler) too: only hookbox_ ones
		// are metrics there.
		for _, name := range docMetric.FindAllString(string(raw), -1) {
			used++
			if !exported[name] {
				t.Errorf("%s names %s, which hookbox does not export (metrics/metrics.go)", doc, name)
			}
		}
	}
	if used < 10 {
		t.Fatalf("the docs name %d metrics: they were not read as expected", used)
	}
}

// docAlert matches an alert's name in prose.
var docAlert = regexp.MustCompile("`(Hookbox[A-Z][A-Za-z]+)`")

// TestDocsNameShippedAlerts: every alert the README and the deploy guide
// name is one of the shipped rules, so an operator who looks for it in
// Alertmanager finds it.
func TestDocsNameShippedAlerts(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(deployDir, "prometheus", "hookbox-alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	shipped := map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^\s*- alert: (\S+)`).FindAllStringSubmatch(string(raw), -1) {
		shipped[m[1]] = true
	}
	var named int
	for _, doc := range []string{filepath.Join("..", "README.md"), filepath.Join("..", "docs", "deploy.md")} {
		raw, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range docAlert.FindAllStringSubmatch(string(raw), -1) {
			named++
			if !shipped[m[1]] {
				t.Errorf("%s names the alert %s, which deploy/prometheus/hookbox-alerts.yml does not have", doc, m[1])
			}
		}
	}
	if len(shipped) < 5 || named < 3 {
		t.Fatalf("%d alerts shipped, %d named by the docs: the files were not read as expected", len(shipped), named)
	}
}
