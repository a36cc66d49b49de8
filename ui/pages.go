package ui

import (
	"errors"
	"html/template"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/effect"
	"github.com/hookbox/hookbox/internal/printable"
	"github.com/hookbox/hookbox/rejected"
	"github.com/hookbox/hookbox/server"
)

// pageSize is how many rows a listing shows by default.
const pageSize = 50

// overviewRow is one source's line in the overview.
type overviewRow struct {
	Source  string
	Unknown bool // the row sums up unknown source names
	// StoredHour and RejectedHour count the last hour, from the store.
	StoredHour, RejectedHour int
	// Received, Duplicates and Refused count this process's answers
	// since it started; Received includes answered handshakes, which are
	// neither stored nor refused.
	Received, Duplicates, Refused int64
	Pending, Processing, Dead     int
	// OldestDue is when the source's longest-waiting due event became
	// due, on the store's clock, and OldestDueAge how long it has waited
	// (hookbox.SourceOverview).
	OldestDue    time.Time
	OldestDueAge time.Duration
	Chart        chart
}

type overviewData struct {
	Rows      []overviewRow
	SinceNote bool // the process counts are shown
}

func (u *console) overview(w http.ResponseWriter, r *http.Request, s session) {
	now := u.cfg.Now()
	ov, err := u.cfg.Store.Overview(r.Context(), now)
	if err != nil {
		u.internal(w, r, s, "overview", err)
		return
	}
	bySource := map[string]hookbox.SourceOverview{}
	names := slices.Clone(u.cfg.Sources)
	for _, o := range ov {
		bySource[o.Source] = o
		if o.Source != "" && !slices.Contains(names, o.Source) {
			names = append(names, o.Source)
		}
	}
	var counts map[string]map[string]int64
	if u.cfg.Deliveries != nil {
		counts = u.cfg.Deliveries()
	}
	data := overviewData{SinceNote: counts != nil}
	row := func(name string, unknown bool) overviewRow {
		o := bySource[name]
		row := overviewRow{
			Source: name, Unknown: unknown, StoredHour: sum(o.Stored[:]), RejectedHour: sum(o.Rejected[:]),
			Pending: o.ByStatus[hookbox.StatusPending], Processing: o.ByStatus[hookbox.StatusProcessing],
			Dead: o.ByStatus[hookbox.StatusDead], OldestDue: o.OldestDue, OldestDueAge: o.OldestDueAge, Chart: newChart(o.Stored, o.Rejected),
		}
		for outcome, n := range counts[name] {
			switch outcome {
			case "new":
				row.Received += n
			case "duplicate":
				row.Received += n
				row.Duplicates += n
			case "unavailable":
			case "handshake":
				// A verified URL check (Slack's url_verification), answered
				// 200 and not stored: received, not refused.
				row.Received += n
			default:
				row.Received += n
				row.Refused += n
			}
		}
		return row
	}
	for _, name := range names {
		data.Rows = append(data.Rows, row(name, false))
	}
	if _, ok := bySource[""]; ok || counts[""]["unknown_source"] > 0 {
		data.Rows = append(data.Rows, row("", true))
	}
	u.render(w, r, s, http.StatusOK, "overview", "Overview", data)
}

func sum(ns []int) int {
	t := 0
	for _, n := range ns {
		t += n
	}
	return t
}

type eventsData struct {
	Q      url.Values
	Events []hookbox.Event
	// Error, set when the filter could not be read (filterError), is
	// shown in place of the listing.
	Error    string
	Next     template.URL // the next page's "?query", "" on the last page
	Statuses []hookbox.Status
	Sources  []string
}

// listEvents reads the events listing's filter from q (status forced when
// not ""), lists a page and builds the next page's link.
func (u *console) listEvents(r *http.Request, q url.Values, status hookbox.Status) (eventsData, error) {
	if status != "" {
		q.Set("status", string(status))
	}
	d := eventsData{Q: q, Statuses: []hookbox.Status{hookbox.StatusPending, hookbox.StatusProcessing, hookbox.StatusDone, hookbox.StatusDead},
		Sources: u.cfg.Sources}
	f, err := server.FilterFromQuery(q, u.cfg.Now())
	if err != nil {
		d.Error = filterError(err)
		return d, nil
	}
	if f.Limit == 0 {
		f.Limit = pageSize
	}
	evs, err := u.cfg.Store.Events(r.Context(), f)
	if err != nil {
		return d, err
	}
	d.Events = evs
	if len(evs) == f.Limit {
		d.Next = nextPage(q, evs[len(evs)-1].ID)
	}
	return d, nil
}

func (u *console) events(w http.ResponseWriter, r *http.Request, s session) {
	d, err := u.listEvents(r, r.URL.Query(), "")
	if err != nil {
		u.internal(w, r, s, "list events", err)
		return
	}
	u.render(w, r, s, listingStatus(d.Error), "events", "Events", d)
}

func (u *console) dead(w http.ResponseWriter, r *http.Request, s session) {
	d, err := u.listEvents(r, r.URL.Query(), hookbox.StatusDead)
	if err != nil {
		u.internal(w, r, s, "list dead events", err)
		return
	}
	u.render(w, r, s, listingStatus(d.Error), "dead", "Dead events", d)
}

// filterError is what a listing says in place of its rows when its filter
// could not be read: server's words, which name the parameter and what it
// takes. The filter form above the message sends each parameter once and
// leaves paging out, so correcting it there and pressing Filter always
// sends a filter the page can read, whichever address led to the page.
func filterError(err error) string {
	return "Correct the filter and press Filter — " + err.Error() + "."
}

// listingStatus is a listing page's status: 400 when its filter could not
// be read (msg, from filterError), as the admin API answers, so that a
// client of the page learns the listing is not "nothing matches".
func listingStatus(msg string) int {
	if msg != "" {
		return http.StatusBadRequest
	}
	return http.StatusOK
}

type eventData struct {
	Event    hookbox.Event
	Headers  []headerLine
	Payload  shownBody
	Attempts []hookbox.Attempt
	// Deliveries are an event's deliveries to its named targets, each
	// with its own status and replay.
	Deliveries []hookbox.Event
	// ReplayAttempts is the event's attempts as the page shows them
	// (hookbox.ReplayAttempts), which its replay form carries as
	// if_attempts; -1 (no condition) when the page could not read every
	// delivery of a FanOut event.
	ReplayAttempts int
	// HeldBy is the dead delivery that holds this pending delivery's
	// order key (server.EventDetail.HeldBy); 0 for none.
	HeldBy int64
	// Skip offers the Skip form (offersSkip): the event is a dead
	// delivery at the head of an order key it shares.
	Skip bool
}

func (u *console) event(w http.ResponseWriter, r *http.Request, s session) {
	id, ok := u.pathID(w, r, s)
	if !ok {
		return
	}
	d, err := server.LoadEventDetail(r.Context(), u.cfg.Store, id)
	if errors.Is(err, hookbox.ErrNotFound) {
		u.fail(w, r, s, http.StatusNotFound, "There is no event "+strconv.FormatInt(id, 10)+".")
		return
	}
	if err != nil {
		u.internal(w, r, s, "show event", err)
		return
	}
	data := eventData{Event: d.Event, Headers: headerLines(u.cfg.ShowHeader(d.Event.Header)), Attempts: d.Attempts,
		Deliveries: d.Deliveries, ReplayAttempts: -1, HeldBy: d.HeldBy, Skip: offersSkip(r.Context(), u.cfg.Store, d.Event)}
	if d.ReplayAttempts != nil {
		data.ReplayAttempts = *d.ReplayAttempts
	}
	if !d.Event.PayloadCleared {
		data.Payload = showBody(d.Payload, true)
	}
	u.render(w, r, s, http.StatusOK, "event", "Event "+strconv.FormatInt(id, 10), data)
}

func (u *console) replayOne(w http.ResponseWriter, r *http.Request, s session) {
	id, ok := u.pathID(w, r, s)
	if !ok {
		return
	}
	includeDone := r.PostForm.Get("include_done") == "1"
	// The page's form carries the attempts it showed (if_attempts), so a
	// second submission of it (a double click, a page left open while the
	// event was replayed and run) replays nothing.
	expect, err := server.ExpectFrom(r.PostForm, id)
	if err != nil {
		u.fail(w, r, s, http.StatusBadRequest, err.Error())
		return
	}
	p := hookbox.ReplayParams{IDs: []int64{id}, IncludeDone: includeDone, Expect: expect}
	res, err := u.cfg.Store.Replay(r.Context(), p)
	if err != nil {
		u.internal(w, r, s, "replay", err)
		return
	}
	if len(res.Replayed) == 0 {
		ev, err := u.cfg.Store.Event(r.Context(), id)
		switch {
		case errors.Is(err, hookbox.ErrNotFound):
			u.fail(w, r, s, http.StatusNotFound, "There is no event "+strconv.FormatInt(id, 10)+".")
		case err != nil:
			u.internal(w, r, s, "replay", err)
		case ev.PayloadCleared || len(res.NoPayload) > 0:
			u.fail(w, r, s, http.StatusConflict, server.NoPayloadReason)
		default:
			u.fail(w, r, s, http.StatusConflict, consoleWords(server.NotReplayed(r.Context(), u.cfg.Store, p, res, ev)))
		}
		return
	}
	u.log.Info("ui replay", "event_ids", res.Replayed, "skipped", res.Skipped)
	u.notify()
	if len(res.Skipped) > 0 {
		// Some deliveries of a FanOut event were left alone: say which,
		// and why, on a page of its own rather than a flash.
		data := replayedData{Event: id, Replayed: res.Replayed}
		for _, sk := range res.Skipped {
			data.Skipped = append(data.Skipped, consoleWords(server.ReplaySkipReason(r.Context(), u.cfg.Store, p, sk)))
		}
		u.render(w, r, s, http.StatusOK, "replayed", "Event "+strconv.FormatInt(id, 10)+" replayed in part", data)
		return
	}
	http.Redirect(w, r, "/ui/events/"+strconv.FormatInt(id, 10)+"?done=replayed", http.StatusSeeOther)
}

// replayedData is the page of a replay of one event that left some of
// its deliveries alone.
type replayedData struct {
	Event    int64
	Replayed []int64
	Skipped  []string // why each delivery left alone was
}

// consoleWords makes a reason of server's (ReplaySkipReason, NotReplayed:
// the admin API's words, in lower case) a sentence for the console, where
// a done event is replayed from its own page rather than with
// include_done.
func consoleWords(s string) string {
	s = strings.ReplaceAll(s, server.DoneHint, "replay it from its own page to run it again")
	if s == "" {
		return s
	}
	return strings.ToUpper(s[:1]) + s[1:] + "."
}

// deadFilter names the query parameters of the dead events page's filter:
// those server.FilterFromQuery reads, less status (the page forces dead)
// and paging. A bulk replay started there carries each of them, from the
// page's form (replayFilter) through the count to the confirmation
// (replayBulk), so it replays what the page selected; a filter added to
// the page belongs here too.
var deadFilter = []string{"source", "type", "delivery_id", "key", "since", "until"}

// replayFilter picks the dead events filter out of q, in deadFilter's
// order, leaving out empty values.
func replayFilter(q url.Values) []hiddenField {
	var fs []hiddenField
	for _, k := range deadFilter {
		if v := q.Get(k); v != "" {
			fs = append(fs, hiddenField{Name: k, Value: v})
		}
	}
	return fs
}

// hiddenField is a form's hidden input.
type hiddenField struct{ Name, Value string }

type replayData struct {
	Q        url.Values
	Back     template.URL // the dead events page with the same filter
	DryRun   bool
	Result   hookbox.ReplayResult
	Filtered string // the filter in words
	// Stopped, set when the replay failed after replaying some events,
	// says why; Finished, that it had dealt with every match by then.
	Stopped  string
	Finished bool
	// Pace is the replay's pace (hookbox.DefaultReplayRate): the first
	// Pace events are due at once, the rest Pace a second after them.
	Pace int
	// From is where this replay went on from a stopped one (zero for a
	// replay of its own), carried from the count to its confirmation;
	// Resume, set when this one stopped part-way, is where the replay
	// that goes on from it starts, carried by the stopped page's form.
	From, Resume resumePoint
}

// resumePoint is where a replay goes on from one that stopped part-way:
// after the last event that one reached (hookbox.ReplayParams.AfterID),
// its events paced after the ones that one paced (PaceAfter), so that the
// two fall due as one replay, in id order: started afresh, its pace made
// the events left due at once, before the stopped replay's last ones,
// and a source worked in id order took them out of order.
type resumePoint struct {
	AfterID   int64
	PaceAfter int
}

// Fields are the resume point as the hidden inputs of a form (none for
// the zero point).
func (p resumePoint) Fields() []hiddenField {
	if p.AfterID == 0 && p.PaceAfter == 0 {
		return nil
	}
	return []hiddenField{{"after_id", strconv.FormatInt(p.AfterID, 10)}, {"pace_after", strconv.Itoa(p.PaceAfter)}}
}

// postedResume reads the resume point a form carries (resumePoint.Fields).
func postedResume(form url.Values) (resumePoint, error) {
	var p resumePoint
	if v := form.Get("after_id"); v != "" {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil || id < 0 {
			return p, errors.New("after_id: want an event id, where a stopped replay stopped")
		}
		p.AfterID = id
	}
	if v := form.Get("pace_after"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > hookbox.MaxPaceAfter {
			return p, errors.New("pace_after: want a count from 0, how many events a stopped replay paced")
		}
		p.PaceAfter = n
	}
	return p, nil
}

// replayBulk replays the dead events matching the posted filter; with
// dry_run it counts them and asks for confirmation.
func (u *console) replayBulk(w http.ResponseWriter, r *http.Request, s session) {
	q := url.Values{}
	for _, f := range replayFilter(r.PostForm) {
		q.Set(f.Name, f.Value)
	}
	dry := r.PostForm.Get("dry_run") == "1"
	from, err := postedResume(r.PostForm)
	if err != nil {
		u.fail(w, r, s, http.StatusBadRequest, err.Error())
		return
	}
	filtered := describe(q)
	if from.AfterID > 0 {
		filtered += " after event " + strconv.FormatInt(from.AfterID, 10) + ", where the stopped replay stopped"
	}
	if dry && q.Get("until") == "" {
		// The confirmation replays what the count counted, not events
		// that arrive meanwhile.
		q.Set("until", u.cfg.Now().UTC().Format(time.RFC3339Nano))
	}
	q.Set("status", string(hookbox.StatusDead))
	f, err := server.FilterFromQuery(q, u.cfg.Now())
	if err != nil {
		u.fail(w, r, s, http.StatusBadRequest, err.Error())
		return
	}
	if dry {
		// A relative since or until ("1h", "7d") is read against now: the
		// confirmation carries the times the count used, or, pressed
		// later, it would replay events the count never counted.
		for k, t := range map[string]time.Time{"since": f.Since, "until": f.Until} {
			if q.Get(k) != "" && !t.IsZero() {
				q.Set(k, t.UTC().Format(time.RFC3339Nano))
			}
		}
	}
	res, err := u.cfg.Store.Replay(r.Context(), hookbox.ReplayParams{Filter: f, DryRun: dry, AfterID: from.AfterID, PaceAfter: from.PaceAfter})
	if err != nil && (dry || len(res.Replayed) == 0) {
		u.internal(w, r, s, "replay", err)
		return
	}
	code, title, data := http.StatusOK, "Replay dead events", replayData{DryRun: dry, Result: res, Filtered: filtered, Pace: hookbox.DefaultReplayRate, From: from}
	if err != nil {
		// The slices before the failure have committed: say how many
		// events they replayed, rather than an error page that reads as
		// if none was.
		u.log.Error("ui: replay", "err", err, "replayed", len(res.Replayed))
		title = "Replay stopped part-way"
		code, data.Stopped = server.FailureStatus(w, err)
		// Every slice committed and only the report failed: none is left.
		data.Finished = res.ResumeAfter == nil
		if !data.Finished {
			data.Resume = resumePoint{AfterID: *res.ResumeAfter, PaceAfter: res.PacedCount}
		}
	}
	if !dry {
		u.log.Info("ui bulk replay", "replayed", len(res.Replayed))
		if len(res.Replayed) > 0 {
			u.notify()
		}
	}
	q.Del("status")
	data.Q, data.Back = q, template.URL("/ui/dead?"+q.Encode())
	u.render(w, r, s, code, "replay", title, data)
}

// describe says a listing filter in words, its values escaped as every
// page shows text from senders (printable.Escape): a key or type with a
// bidi override would reorder the words around it.
func describe(q url.Values) string {
	var parts []string
	for _, f := range replayFilter(q) {
		parts = append(parts, f.Name+" "+printable.Escape(f.Value))
	}
	if len(parts) == 0 {
		return "all dead events"
	}
	return "dead events with " + strings.Join(parts, ", ")
}

type rejectedListData struct {
	Q          url.Values
	Rejections []hookbox.Rejection
	Error      string
	Next       template.URL
	Recheck    bool
}

func (u *console) rejectedList(w http.ResponseWriter, r *http.Request, s session) {
	q := r.URL.Query()
	d := rejectedListData{Q: q, Recheck: u.cfg.Recheck != nil}
	f, err := server.RejectionFilterFromQuery(q, u.cfg.Now())
	if err != nil {
		d.Error = filterError(err)
		u.render(w, r, s, listingStatus(d.Error), "rejected", "Rejected deliveries", d)
		return
	}
	if f.Limit == 0 {
		f.Limit = pageSize
	}
	rs, err := u.cfg.Store.Rejections(r.Context(), f)
	if err != nil {
		u.internal(w, r, s, "list rejected deliveries", err)
		return
	}
	d.Rejections = rs
	if len(rs) == f.Limit {
		d.Next = nextPage(q, rs[len(rs)-1].ID)
	}
	u.render(w, r, s, http.StatusOK, "rejected", "Rejected deliveries", d)
}

type rejectionData struct {
	Rejection hookbox.Rejection
	Headers   []headerLine
	Body      shownBody
	Recheck   bool
}

func (u *console) rejectedOne(w http.ResponseWriter, r *http.Request, s session) {
	id, ok := u.pathID(w, r, s)
	if !ok {
		return
	}
	rj, err := u.cfg.Store.Rejection(r.Context(), id)
	if errors.Is(err, hookbox.ErrNotFound) {
		u.fail(w, r, s, http.StatusNotFound, "There is no rejected delivery "+strconv.FormatInt(id, 10)+" (the log keeps a bounded number).")
		return
	}
	if err != nil {
		u.internal(w, r, s, "show rejected delivery", err)
		return
	}
	d := rejectionData{Rejection: rj, Headers: headerLines(u.cfg.ShowHeader(rejected.DisplayHeader(rj.Header))), Recheck: u.cfg.Recheck != nil}
	if rj.Body != nil {
		d.Body = showBody(rj.Body, rj.BodyComplete)
	}
	u.render(w, r, s, http.StatusOK, "rejection", "Rejected delivery "+strconv.FormatInt(id, 10), d)
}

func (u *console) recheck(w http.ResponseWriter, r *http.Request, s session) {
	if u.cfg.Recheck == nil {
		u.fail(w, r, s, http.StatusNotImplemented, "Re-check is not available here: this server has no source configuration.")
		return
	}
	p := rejected.RecheckParams{DryRun: r.PostForm.Get("dry_run") == "1"}
	for _, v := range r.PostForm["id"] {
		id, err := strconv.ParseInt(v, 10, 64)
		if err != nil || id <= 0 {
			u.fail(w, r, s, http.StatusBadRequest, "id: want a positive whole number")
			return
		}
		p.IDs = append(p.IDs, id)
	}
	res, err := u.cfg.Recheck(r.Context(), p)
	if err != nil && (p.DryRun || len(res.Admitted) == 0) {
		u.internal(w, r, s, "re-check", err)
		return
	}
	code, title, data := http.StatusOK, "Re-check", recheckData{RecheckResult: res, IDs: p.IDs}
	if err != nil {
		// The pages before the failure are stored: say what they
		// admitted, rather than an error page that reads as if nothing
		// was.
		u.log.Error("ui: re-check", "err", err, "admitted", len(res.Admitted), "refused", len(res.Refused))
		title = "Re-check stopped part-way"
		code, data.Stopped = server.FailureStatus(w, err)
	}
	if !p.DryRun && len(res.Admitted) > 0 {
		u.log.Info("ui re-check admitted rejected deliveries", "admitted", len(res.Admitted), "refused", len(res.Refused))
		u.notify()
	}
	u.render(w, r, s, code, "recheck", title, data)
}

// recheckData is what the re-check page shows.
type recheckData struct {
	rejected.RecheckResult
	// IDs are the deliveries the re-check was asked about (none: all).
	IDs []int64
	// Stopped, set when the re-check failed after admitting some
	// deliveries, says why.
	Stopped string
}

type uncertainData struct {
	Events []hookbox.Event
	Next   template.URL // never: the list is not paged
	// More says some kind has more uncertain sends than the page shows
	// (uncertainShown of each).
	More  bool
	Shown int
}

// uncertainShown is how many uncertain sends of each kind the page shows,
// the newest: an outage of the receiving side can leave any number of
// them, and the page must stay a bounded read.
const uncertainShown = 200

// uncertain lists the recorded sends (effect.RecordSend) that were
// attempted and not confirmed, of every kind the store holds.
func (u *console) uncertain(w http.ResponseWriter, r *http.Request, s session) {
	ov, err := u.cfg.Store.Overview(r.Context(), u.cfg.Now())
	if err != nil {
		u.internal(w, r, s, "uncertain sends", err)
		return
	}
	d := uncertainData{Shown: uncertainShown}
	for _, o := range ov {
		kind, ok := strings.CutPrefix(o.Source, effect.SendSource(""))
		if !ok {
			continue
		}
		evs, more, err := effect.UncertainUpTo(r.Context(), u.cfg.Store, kind, uncertainShown)
		if err != nil {
			u.internal(w, r, s, "uncertain sends", err)
			return
		}
		d.Events = append(d.Events, evs...)
		d.More = d.More || more
	}
	u.render(w, r, s, http.StatusOK, "uncertain", "Uncertain sends", d)
}

func (u *console) notify() {
	if u.cfg.Notify != nil {
		u.cfg.Notify()
	}
}

func (u *console) pathID(w http.ResponseWriter, r *http.Request, s session) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		u.fail(w, r, s, http.StatusBadRequest, "The id in the address is not a positive whole number.")
		return 0, false
	}
	return id, true
}

// nextPage is the link to the page after the one that ended at id: the
// same query with before_id set. Encode escapes every value, so the link
// is safe to mark as a URL.
func nextPage(q url.Values, id int64) template.URL {
	next := cloneValues(q)
	next.Set("before_id", strconv.FormatInt(id, 10))
	return template.URL("?" + next.Encode())
}

func cloneValues(q url.Values) url.Values {
	out := url.Values{}
	for k, vs := range q {
		out[k] = slices.Clone(vs)
	}
	return out
}
