package ui_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/storetest"
)

// The browser tests drive the console in a real headless Chromium. They
// skip when no browser is installed, except under CI (CI=true), where
// .ci/run installs one and a missing browser is a failure (unless .ci/run
// said it could not install one, with HOOKBOX_NO_BROWSER). They run on
// SQLite: the pages' store calls are the same on PostgreSQL and covered
// there by the HTTP tests.

// chromiumNames are the browser binaries looked for on PATH.
var chromiumNames = []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"}

// shared is the one headless browser of the test binary: started by
// the first test that asks for a tab, closed by TestMain after the last.
// Each test gets a tab in a browser context of its own (incognito-like),
// so no test sees another's cookies, sessions or storage.
var shared struct {
	once   sync.Once
	ctx    context.Context // the browser's first tab; parent of every test's tab
	err    error           // why the browser did not start
	cancel func()          // closes the browser
}

// TestMain closes the shared browser, if a test started one, once every
// test has run.
func TestMain(m *testing.M) {
	code := m.Run()
	if shared.cancel != nil {
		shared.cancel()
	}
	os.Exit(code)
}

// browserPath returns the headless browser on PATH, or skips (or, under
// CI, fails) the test when there is none.
func browserPath(t *testing.T) string {
	t.Helper()
	for _, n := range chromiumNames {
		if p, err := exec.LookPath(n); err == nil {
			return p
		}
	}
	if os.Getenv("HOOKBOX_NO_BROWSER") != "" {
		t.Skip("no headless browser, and .ci/run could not install one (HOOKBOX_NO_BROWSER)")
	}
	if os.Getenv("CI") != "" {
		t.Fatalf("no browser (%s) on PATH; CI installs chromium", strings.Join(chromiumNames, ", "))
	}
	t.Skip("no headless browser installed (apt-get install chromium)")
	return ""
}

// newTab returns the context of a new tab for the test, in a new browser
// context of the binary's shared headless browser (started on first use).
// The tab and its browser context close when the test ends.
func newTab(t *testing.T) context.Context {
	t.Helper()
	path := browserPath(t)
	shared.once.Do(func() {
		opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.NoSandbox,
			chromedp.WindowSize(1280, 900), chromedp.Flag("disable-dev-shm-usage", true))
		actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		bctx, cancelBrowser := chromedp.NewContext(actx)
		shared.ctx = bctx
		shared.cancel = func() { cancelBrowser(); cancelAlloc() }
		if err := chromedp.Do(bctx); err != nil {
			shared.err = fmt.Errorf("start %s: %w", path, err)
		}
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	ctx, cancelTab := chromedp.NewContext(shared.ctx, chromedp.WithNewBrowserContext())
	ctx, cancelTime := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() { cancelTime(); cancelTab() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	return ctx
}

// run runs browser actions, failing the test with what on error.
func run(t *testing.T, ctx context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(ctx, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// value runs one browser action that returns a value.
func value[T any](t *testing.T, ctx context.Context, what string, a chromedp.Action[T]) T {
	t.Helper()
	v, err := chromedp.Run(ctx, a)
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
	return v
}

// browserLogin logs in through the form.
func browserLogin(t *testing.T, ctx context.Context, a *app) {
	t.Helper()
	run(t, ctx, "log in",
		chromedp.Navigate(a.admin+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS(`#token`)),
		chromedp.SendKeys(chromedp.CSS(`#token`), token),
		chromedp.Submit(chromedp.CSS(`#token`)),
		chromedp.WaitVisible(chromedp.CSS(`nav`)),
	)
}

// waitLocation waits until the tab's address holds part: a submitted
// form's page has replaced the one it was on. While the old page is
// being replaced, reading the address can fail (its document is going
// away): that is read as "not yet", and each such error is logged, so a
// wait that gives up shows them.
func waitLocation(t *testing.T, ctx context.Context, part string) {
	t.Helper()
	what := "the address to hold " + part
	await(t, what, func() bool {
		loc, err := chromedp.Run(ctx, chromedp.Location())
		if err != nil {
			t.Logf("%s: reading the address: %v", what, err)
			return false
		}
		return strings.Contains(loc, part)
	})
}

// pageText is what text reads from the page in one go.
type pageText struct {
	Loaded bool   `json:"loaded"`
	Found  bool   `json:"found"`
	Text   string `json:"text"`
}

// text returns the text of the first element matching sel, once the
// page has loaded and holds one. It reads through one script rather than
// by the element's node id: right after a form's answer replaced a page,
// an id found in the old page's tree can be gone by the time its text is
// asked for ("No node with given id found"), so a failed or early read
// is "not yet" and is tried again.
func text(t *testing.T, ctx context.Context, sel string) string {
	t.Helper()
	what := "the text of " + sel
	script := fmt.Sprintf(`(() => { const e = document.querySelector(%q); `+
		`return {loaded: document.readyState === 'complete', found: e !== null, text: e ? e.innerText : ''}; })()`, sel)
	var got pageText
	await(t, what, func() bool {
		v, err := chromedp.Run(ctx, chromedp.Evaluate[pageText](script))
		if err != nil {
			t.Logf("%s: %v", what, err)
			return false
		}
		got = v
		return v.Loaded && v.Found
	})
	return got.Text
}

// screenshot saves the page as docs/screenshots/name.png when
// HOOKBOX_SCREENSHOTS names that folder (how the README's pictures are
// made); otherwise it does nothing.
func screenshot(t *testing.T, ctx context.Context, name string) {
	dir := os.Getenv("HOOKBOX_SCREENSHOTS")
	if dir == "" {
		return
	}
	png := value(t, ctx, "screenshot", chromedp.FullScreenshot(100))
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
	if name != "event" {
		return
	}
	// The same page as a phone shows it.
	run(t, ctx, "phone viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)))
	png = value(t, ctx, "phone screenshot", chromedp.FullScreenshot(100))
	run(t, ctx, "desktop viewport", chromedp.EmulateReset())
	if err := os.WriteFile(filepath.Join(dir, name+"-phone.png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestBrowserFindReplay: log in, find an event by its delivery id, open
// it, replay it and see the new attempt on its page.
func TestBrowserFindReplay(t *testing.T) {
	ctx := newTab(t)
	sink, failing := newSink(t)
	failing.Store(true)
	a := startApp(t, dbtest.SQLiteURL(t), sink, rightSecret, failing)
	for i := range 3 {
		a.send(rightSecret, fmt.Sprintf("msg_other_%d", i), []byte(`{"type":"order.created"}`))
	}
	a.send(rightSecret, "msg_find_me", []byte(`{"type":"order.paid","data":{"id":"ord_42","amount":1999}}`))
	ev := a.eventByDelivery("msg_find_me", hookbox.StatusDead)
	failing.Store(false)

	browserLogin(t, ctx, a)
	run(t, ctx, "search by delivery id",
		chromedp.Navigate(a.admin+"/ui/events"),
		chromedp.SendKeys(chromedp.CSS(`input[name=delivery_id]`), "msg_find_me"),
		chromedp.Submit(chromedp.CSS(`input[name=delivery_id]`)),
	)
	waitLocation(t, ctx, "delivery_id=msg_find_me")
	run(t, ctx, "the results", chromedp.WaitVisible(chromedp.CSS(`table.events`)))
	rows := value(t, ctx, "count rows", chromedp.Evaluate[int](`document.querySelectorAll('table.events tbody a').length`))
	if rows != 1 {
		t.Fatalf("the search lists %d events, want 1", rows)
	}
	run(t, ctx, "open the event",
		chromedp.Click(chromedp.CSS(`table.events tbody a`)),
		chromedp.WaitVisible(chromedp.CSS(`ol.timeline`)),
	)
	if got := text(t, ctx, `dl.fields`); !strings.Contains(got, "msg_find_me") || !strings.Contains(got, "dead") {
		t.Fatalf("event page: %q", got)
	}
	if got := text(t, ctx, `ol.timeline`); !strings.Contains(got, "#1 dead") || !strings.Contains(got, "502") {
		t.Errorf("the timeline before replay: %q", got)
	}
	run(t, ctx, "replay",
		chromedp.Click(chromedp.CSS(`form.actions button`)),
		chromedp.WaitVisible(chromedp.CSS(`.flash`)),
	)
	a.eventByDelivery("msg_find_me", hookbox.StatusDone)
	run(t, ctx, "reload", chromedp.Navigate(fmt.Sprintf("%s/ui/events/%d", a.admin, ev.ID)), chromedp.WaitVisible(chromedp.CSS(`ol.timeline`)))
	if got := text(t, ctx, `ol.timeline`); !strings.Contains(got, "replay") || !strings.Contains(got, "#2 done") {
		t.Errorf("the timeline after replay: %q", got)
	}
	screenshot(t, ctx, "event")
}

// TestBrowserBulkReplay: the dead events page counts what a bulk replay
// would take, and replays them only once confirmed.
func TestBrowserBulkReplay(t *testing.T) {
	ctx := newTab(t)
	sink, failing := newSink(t)
	failing.Store(true)
	a := startApp(t, dbtest.SQLiteURL(t), sink, rightSecret, failing)
	for i := range 4 {
		a.send(rightSecret, fmt.Sprintf("msg_dead_%d", i), []byte(`{"type":"invoice.failed"}`))
	}
	for i := range 4 {
		a.eventByDelivery(fmt.Sprintf("msg_dead_%d", i), hookbox.StatusDead)
	}
	failing.Store(false)
	browserLogin(t, ctx, a)
	run(t, ctx, "dead events", chromedp.Navigate(a.admin+"/ui/dead"), chromedp.WaitVisible(chromedp.CSS(`form.actions`)))
	screenshot(t, ctx, "dead")
	run(t, ctx, "count first",
		chromedp.Click(chromedp.CSS(`form.actions button`)),
		chromedp.WaitVisible(chromedp.CSS(`button.danger`)),
	)
	if got := text(t, ctx, `main p`); !strings.Contains(got, "4 events would be replayed: all dead events.") {
		t.Errorf("dry run says %q", got)
	}
	if evs, _ := a.svc.Store.Events(context.Background(), hookbox.Filter{Status: hookbox.StatusDead}); len(evs) != 4 {
		t.Fatalf("the count replayed something: %d dead left", len(evs))
	}
	screenshot(t, ctx, "replay-confirm")
	run(t, ctx, "confirm", chromedp.Click(chromedp.CSS(`button.danger`)), chromedp.WaitVisible(chromedp.CSS(`.flash`)))
	if got := text(t, ctx, `.flash`); !strings.Contains(got, "Replayed 4 events") {
		t.Errorf("after confirming: %q", got)
	}
	for i := range 4 {
		a.eventByDelivery(fmt.Sprintf("msg_dead_%d", i), hookbox.StatusDone)
	}
}

// TestBrowserRecheck: a delivery refused for a wrong secret shows under
// rejected; with the secret fixed, re-check admits it and it is found
// among the events.
func TestBrowserRecheck(t *testing.T) {
	ctx := newTab(t)
	dbURL := dbtest.SQLiteURL(t)
	sink, failing := newSink(t)
	a := startApp(t, dbURL, sink, wrongSecret, failing)
	if st := a.send(rightSecret, "msg_wrong_secret", []byte(`{"type":"subscription.created"}`)); st != 401 {
		t.Fatalf("a delivery under the wrong secret: %d", st)
	}
	browserLogin(t, ctx, a)
	await(t, "the rejection logged", func() bool {
		rs, err := a.svc.Store.Rejections(context.Background(), hookbox.RejectionFilter{})
		return err == nil && len(rs) == 1
	})
	run(t, ctx, "rejected", chromedp.Navigate(a.admin+"/ui/rejected"), chromedp.WaitVisible(chromedp.CSS(`table`)))
	if got := text(t, ctx, `table tbody`); !strings.Contains(got, "polar") || !strings.Contains(got, "401") {
		t.Fatalf("rejected page: %q", got)
	}
	screenshot(t, ctx, "rejected")
	a.stop()

	a = startApp(t, dbURL, sink, rightSecret, failing)
	run(t, ctx, "rejected after the fix", chromedp.Navigate(a.admin+"/ui/rejected"), chromedp.WaitVisible(chromedp.CSS(`nav`)))
	url := value(t, ctx, "where", chromedp.Location())
	if strings.Contains(url, "/ui/login") {
		browserLogin(t, ctx, a)
		run(t, ctx, "rejected", chromedp.Navigate(a.admin+"/ui/rejected"), chromedp.WaitVisible(chromedp.CSS(`nav`)))
	}
	run(t, ctx, "re-check",
		chromedp.Click(chromedp.CSS(`button[name=admit]`)),
		chromedp.WaitVisible(chromedp.CSS(`ul.admitted`)),
	)
	if got := text(t, ctx, `ul.admitted`); !strings.Contains(got, "stored as event") {
		t.Fatalf("re-check: %q", got)
	}
	screenshot(t, ctx, "recheck")
	run(t, ctx, "open the admitted event",
		chromedp.Click(chromedp.CSS(`ul.admitted a[href^="/ui/events/"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dl.fields`)),
	)
	if got := text(t, ctx, `dl.fields`); !strings.Contains(got, "msg_wrong_secret") || !strings.Contains(got, "subscription.created") {
		t.Errorf("the admitted event: %q", got)
	}
	run(t, ctx, "find it", chromedp.Navigate(a.admin+"/ui/events?delivery_id=msg_wrong_secret"), chromedp.WaitVisible(chromedp.CSS(`table.events`)))
	if got := text(t, ctx, `table.events tbody`); !strings.Contains(got, "msg_wrong_secret") {
		t.Errorf("events search: %q", got)
	}
}

// TestBrowserScriptInert: a payload, an event type and a header holding
// <script> and an <img onerror> render as text: no element is made of
// them and nothing runs.
func TestBrowserScriptInert(t *testing.T) {
	ctx := newTab(t)
	sink, failing := newSink(t)
	a := startApp(t, dbtest.SQLiteURL(t), sink, rightSecret, failing)
	evil := `<script>document.title='pwned'</script><img src=x onerror="document.title='pwned'">`
	body := []byte(fmt.Sprintf(`{"type":%q,"note":%q}`, evil, evil))
	if st := a.send(rightSecret, "msg_evil", body); st != 202 {
		t.Fatalf("delivery: %d", st)
	}
	ev := a.eventByDelivery("msg_evil", hookbox.StatusDone)
	browserLogin(t, ctx, a)
	for _, page := range []string{"/ui/events", fmt.Sprintf("/ui/events/%d", ev.ID), "/ui/events?type=" + strings.ReplaceAll(evil, "#", "%23")} {
		run(t, ctx, page, chromedp.Navigate(a.admin+page), chromedp.WaitVisible(chromedp.CSS(`main`)))
		title := value(t, ctx, "title", chromedp.Title())
		injected := value(t, ctx, "count injected elements", chromedp.Evaluate[int](`document.querySelectorAll('main script, main img').length`))
		if title == "pwned" || injected != 0 {
			t.Errorf("%s: title %q, %d injected elements", page, title, injected)
		}
	}
	run(t, ctx, "event page", chromedp.Navigate(fmt.Sprintf("%s/ui/events/%d", a.admin, ev.ID)), chromedp.WaitVisible(chromedp.CSS(`pre.payload`)))
	if got := text(t, ctx, `pre.payload`); !strings.Contains(got, "<script>document.title='pwned'</script>") {
		t.Errorf("the payload is not shown as text: %q", got)
	}
	if got := text(t, ctx, `dl.fields`); !strings.Contains(got, "<script>") {
		t.Errorf("the event type is not shown as text: %q", got)
	}
}

// TestBrowserPostWithoutCSRF: a form posted without its CSRF token is
// refused and changes nothing.
func TestBrowserPostWithoutCSRF(t *testing.T) {
	ctx := newTab(t)
	sink, failing := newSink(t)
	failing.Store(true)
	a := startApp(t, dbtest.SQLiteURL(t), sink, rightSecret, failing)
	a.send(rightSecret, "msg_csrf", []byte(`{"type":"a"}`))
	ev := a.eventByDelivery("msg_csrf", hookbox.StatusDead)
	browserLogin(t, ctx, a)
	run(t, ctx, "post without the token",
		chromedp.Navigate(fmt.Sprintf("%s/ui/events/%d", a.admin, ev.ID)),
		chromedp.WaitVisible(chromedp.CSS(`form.actions`)),
	)
	value(t, ctx, "drop the CSRF field", chromedp.Evaluate[bool](`document.querySelector('form.actions input[name=csrf]').remove(); true`))
	run(t, ctx, "submit", chromedp.Click(chromedp.CSS(`form.actions button`)))
	waitLocation(t, ctx, "/replay")
	if got := text(t, ctx, `body`); !strings.Contains(got, "CSRF") {
		t.Errorf("the answer to a POST without the token: %q", got)
	}
	if got, _ := a.svc.Store.Event(context.Background(), ev.ID); got.Status != hookbox.StatusDead {
		t.Errorf("the event changed: %s", got.Status)
	}
}

// TestBrowserOverview: the overview shows each source's counts and the
// last hour as bars, stored and rejected.
func TestBrowserOverview(t *testing.T) {
	ctx := newTab(t)
	sink, failing := newSink(t)
	a := startApp(t, dbtest.SQLiteURL(t), sink, rightSecret, failing)
	st := a.svc.Store
	now := time.Now()
	var ds []hookbox.Delivery
	var rs []hookbox.Rejection
	for i := range 240 {
		at := now.Add(-time.Duration(i%57) * time.Minute)
		source := []string{"polar", "github", "stripe"}[i%3]
		d := storetest.Delivery(source, fmt.Sprintf("seed_%d", i))
		d.ReceivedAt = at
		ds = append(ds, d)
		if i%9 == 0 {
			rs = append(rs, storetest.Rejection(source, 401, at))
		}
	}
	if _, err := st.Ingest(context.Background(), ds); err != nil {
		t.Fatal(err)
	}
	if _, err := st.AddRejections(context.Background(), rs, hookbox.RejectionBounds{}); err != nil {
		t.Fatal(err)
	}
	browserLogin(t, ctx, a)
	run(t, ctx, "overview", chromedp.Navigate(a.admin+"/ui/"), chromedp.WaitVisible(chromedp.CSS(`svg.chart`)))
	rows := value(t, ctx, "rows", chromedp.Evaluate[int](`document.querySelectorAll('main tbody tr').length`))
	bars := value(t, ctx, "bars", chromedp.Evaluate[int](`document.querySelectorAll('svg.chart rect.ok').length`))
	rejected := value(t, ctx, "rejected bars", chromedp.Evaluate[int](`document.querySelectorAll('svg.chart rect.rej').length`))
	if rows != 3 || bars < 50 || rejected == 0 {
		t.Errorf("overview: %d rows, %d stored bars, %d rejected bars", rows, bars, rejected)
	}
	if got := text(t, ctx, `main tbody`); !strings.Contains(got, "github") || !strings.Contains(got, "stripe") {
		t.Errorf("overview rows: %q", got)
	}
	screenshot(t, ctx, "overview")
}

// TestBrowserSkip: on the page of a dead delivery that holds its order
// key, type a reason into the Skip form and submit it; the page says the
// delivery was skipped, and the key's next delivery is delivered.
func TestBrowserSkip(t *testing.T) {
	ctx := newTab(t)
	h := startHeldKey(t, dbtest.SQLiteURL(t))
	browserLogin(t, ctx, &app{t: t, admin: h.srv.Admin})
	form := `form[action$="/skip"]`
	run(t, ctx, "skip from the dead delivery's page",
		chromedp.Navigate(fmt.Sprintf("%s/ui/events/%d", h.srv.Admin, h.first.ID)),
		chromedp.WaitVisible(chromedp.CSS(form)),
		chromedp.SendKeys(chromedp.CSS(form+` input[name=reason]`), "customer deleted"),
		chromedp.Click(chromedp.CSS(form+` button`)),
	)
	waitLocation(t, ctx, "done=skipped")
	if got := text(t, ctx, `.flash`); !strings.Contains(got, "Skipped") {
		t.Errorf("the page after the skip says %q", got)
	}
	h.delivery(t, "evt_2", isDone)
}

// TestBrowserTabsDoNotShareSessions: the browser tests share one
// browser, so each test's tab must be in a browser context of its own. A
// tab logged in to the console does not make another test's tab logged
// in: the second tab, on the same console, is asked for the token.
// (Cookies are kept per host, not per port, so without that every test's
// console on 127.0.0.1 would see the others' session cookies.)
func TestBrowserTabsDoNotShareSessions(t *testing.T) {
	first := newTab(t)
	sink, failing := newSink(t)
	a := startApp(t, dbtest.SQLiteURL(t), sink, rightSecret, failing)
	browserLogin(t, first, a)

	second := newTab(t)
	run(t, second, "the console in another tab",
		chromedp.Navigate(a.admin+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS(`main`)),
	)
	if n := value(t, second, "count nav", chromedp.Evaluate[int](`document.querySelectorAll('nav').length`)); n != 0 {
		t.Errorf("the second tab is logged in: %d nav elements", n)
	}
	if n := value(t, second, "count the token field", chromedp.Evaluate[int](`document.querySelectorAll('#token').length`)); n != 1 {
		t.Errorf("the second tab is not asked for the token: %d token fields", n)
	}
	run(t, first, "the first tab is still logged in",
		chromedp.Navigate(a.admin+"/ui/"),
		chromedp.WaitVisible(chromedp.CSS(`nav`)),
	)
}

// TestBrowserBadFilter: an address with a filter the console cannot read
// (a mistyped since, a before_id from a hand-edited link) shows the filter
// form and a message naming the filter; correcting the field and pressing
// Filter lists the events.
func TestBrowserBadFilter(t *testing.T) {
	ctx := newTab(t)
	sink, failing := newSink(t)
	a := startApp(t, dbtest.SQLiteURL(t), sink, rightSecret, failing)
	a.send(rightSecret, "msg_listed", []byte(`{"type":"order.paid"}`))
	a.eventByDelivery("msg_listed", hookbox.StatusDone)
	browserLogin(t, ctx, a)
	run(t, ctx, "a bad filter",
		chromedp.Navigate(a.admin+"/ui/events?since=yesterday&before_id=-1"),
		chromedp.WaitVisible(chromedp.CSS(`.error`)),
	)
	if got := text(t, ctx, `.error`); !strings.Contains(got, "since:") || !strings.Contains(got, "want a duration back from now") {
		t.Errorf("the message says %q", got)
	}
	if n := value(t, ctx, "count tables", chromedp.Evaluate[int](`document.querySelectorAll('table').length`)); n != 0 {
		t.Errorf("the page shows %d tables", n)
	}
	run(t, ctx, "correct the filter",
		chromedp.SetValue(chromedp.CSS(`input[name=since]`), "1d"),
		chromedp.Submit(chromedp.CSS(`input[name=since]`)),
	)
	waitLocation(t, ctx, "since=1d")
	run(t, ctx, "the results", chromedp.WaitVisible(chromedp.CSS(`table.events`)))
	if got := text(t, ctx, `table.events tbody`); !strings.Contains(got, "msg_listed") {
		t.Errorf("the corrected filter lists %q", got)
	}
}
