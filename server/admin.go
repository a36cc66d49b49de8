package server

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/lograte"
	"github.com/hookbox/hookbox/internal/printable"
	"github.com/hookbox/hookbox/redact"
	"github.com/hookbox/hookbox/rejected"
)

// AdminConfig is what the admin API needs.
type AdminConfig struct {
	// Token is the bearer token every admin request must carry. Empty
	// means no admin API: nothing is registered and /admin/… is a 404.
	Token string
	// Store is listed, read, replayed and purged.
	Store hookbox.Store
	// Notify, if set, is called after a replay put events back in the
	// queue (to wake the workers).
	Notify func()
	Logger *slog.Logger
	// Now is the clock for relative times (default time.Now).
	Now func() time.Time
	// Targets lists the targets for GET /admin/targets (nil: none).
	Targets TargetsFunc
	// KnownTarget, if set, says whether a name may be paused.
	KnownTarget func(name string) bool
	// Works, if set, says whether this process works a queue name's
	// deliveries; retire refuses such a name.
	Works func(name string) bool
	// ShowHeader makes headers fit to show (signature and credential
	// values masked); default: redact.ShowHeader.
	ShowHeader func(http.Header) http.Header
	// Recheck verifies kept rejected deliveries again against the current
	// configuration (rejected.Recheck bound to it); nil answers 501.
	Recheck func(ctx context.Context, p rejected.RecheckParams) (rejected.RecheckResult, error)
	// Guesses, if set, slows down clients that send wrong tokens (429
	// past their allowance; see AuthLimiter).
	Guesses *AuthLimiter
}

// Mux is where routes are registered: a *Server, or the *http.ServeMux of
// a separate admin listener.
type Mux interface {
	Handle(pattern string, h http.Handler)
}

// PurgeNote is what a purge costs, said wherever one is reported.
const PurgeNote = "a redelivery of a purged id would be stored and processed again"

// MaxListLimit bounds one listing.
const MaxListLimit = 10000

// RegisterAdmin adds the admin API to s:
//
//	GET  /admin/events               ?status=&source=&type=&delivery_id=&key=&since=&until=&limit=&before_id=
//	GET  /admin/events/{id}          the event, its attempts and its payload (base64;
//	                                 ?payload=raw answers the bytes as received)
//	POST /admin/events/{id}/replay   ?include_done=true
//	POST /admin/events/{id}/skip     ?reason=: end one dead delivery, releasing its order key
//	POST /admin/replay               bulk: the listing's filters, dry_run, include_done, after_id, rate, pace_after
//	POST /admin/purge                ?days=N&dry_run=true&include_dead=true
//	GET  /admin/targets, POST /admin/targets/{source}[/{target}]/pause|resume|retire
//	GET  /admin/rejected             ?source=&status=&since=&limit=&before_id=
//	GET  /admin/rejected/{id}        one rejected delivery with its kept body
//	POST /admin/rejected/recheck     ?id=…&dry_run=true
//
// Every route requires "Authorization: Bearer <token>", compared in
// constant time; a missing or wrong token is a 401 that never echoes what
// was sent, and a client out of guesses (AdminConfig.Guesses) gets 429.
// With an empty token nothing is registered.
func RegisterAdmin(s Mux, cfg AdminConfig) {
	if cfg.Token == "" {
		return
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.ShowHeader == nil {
		cfg.ShowHeader = redact.ShowHeader
	}
	a := &admin{cfg: cfg, tokenSum: sha256.Sum256([]byte(cfg.Token)), log: cfg.Logger}
	routes := &methodRoutes{Mux: s}
	a.register(routes)
	s.Handle("/admin/", a.guard(func(w http.ResponseWriter, r *http.Request) {
		if methods := routes.allowed(r); methods != "" {
			w.Header().Set("Allow", methods)
			writeError(w, http.StatusMethodNotAllowed, "use "+methods)
			return
		}
		writeError(w, http.StatusNotFound, "no such admin endpoint")
	}))
}

// register adds every admin route but the catch-all to s, each with the
// query parameters it takes (see takes).
func (a *admin) register(s Mux) {
	s.Handle("GET /admin/events", a.guard(takes(a.list, filterParams...)))
	s.Handle("GET /admin/events/{id}", a.guard(takes(a.show, "payload")))
	s.Handle("POST /admin/events/{id}/replay", a.guard(takes(a.replayOne, "include_done", "if_attempts")))
	s.Handle("POST /admin/events/{id}/skip", a.guard(takes(a.skipOne, "reason", "if_attempts")))
	// limit and if_attempts are refused by the replay itself, with why.
	s.Handle("POST /admin/replay", a.guard(takes(a.replayBulk,
		append([]string{"if_attempts", "dry_run", "include_done", "after_id", "rate", "pace_after"}, filterParams...)...)))
	s.Handle("POST /admin/purge", a.guard(takes(a.purge, "days", "dry_run", "include_dead")))
	a.registerTargets(s)
	s.Handle("GET /admin/rejected", a.guard(takes(a.listRejected, "source", "status", "since", "limit", "before_id")))
	s.Handle("GET /admin/rejected/{id}", a.guard(takes(a.showRejected)))
	s.Handle("POST /admin/rejected/recheck", a.guard(takes(a.recheck, "dry_run", "id")))
}

// filterParams are the query parameters FilterFromQuery reads.
var filterParams = []string{"status", "source", "type", "delivery_id", "key", "since", "until", "limit", "before_id"}

// takes wraps h, an admin route's handler, so that a request with a
// query parameter not among params is refused (400) before h runs: a
// misspelled parameter (dry-run for dry_run, event_source for source), or
// one the route has none of (dry_run on the replay of one event), was
// ignored, and the action taken for real or over more than was asked.
func takes(h http.HandlerFunc, params ...string) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		var unknown []string
		for name := range q {
			if !slices.Contains(params, name) {
				unknown = append(unknown, name)
			}
		}
		if len(unknown) > 0 {
			slices.Sort(unknown)
			takes := "none"
			if len(params) > 0 {
				takes = strings.Join(params, ", ")
			}
			writeError(w, http.StatusBadRequest, fmt.Sprintf("unknown parameter %s: this endpoint takes %s", quoteClient(unknown[0]), takes))
			return
		}
		h(w, r)
	}
}

// methodRoutes is a Mux that passes each route on and registers it again
// on a mux of its own, so that the admin API's catch-all can answer a known
// path asked with another method as net/http's mux would where no
// catch-all covers the path: 405 with an Allow header.
type methodRoutes struct {
	Mux
	probe http.ServeMux
}

// Handle registers pattern on the wrapped mux and on the probe.
func (m *methodRoutes) Handle(pattern string, h http.Handler) {
	m.Mux.Handle(pattern, h)
	m.probe.Handle(pattern, http.NotFoundHandler())
}

// allowed returns the methods the routes take for r's path ("GET, HEAD,
// POST"), or "" when no route has that path.
func (m *methodRoutes) allowed(r *http.Request) string {
	h, pattern := m.probe.Handler(r)
	if pattern != "" {
		return "" // a route takes r as it is: not a question of method
	}
	var rec allowRecorder
	h.ServeHTTP(&rec, r)
	if rec.code != http.StatusMethodNotAllowed {
		return ""
	}
	return rec.header.Get("Allow")
}

// allowRecorder keeps what net/http's mux answers for a path no route
// takes with the request's method: its status and its Allow header.
type allowRecorder struct {
	header http.Header
	code   int
}

func (w *allowRecorder) Header() http.Header {
	if w.header == nil {
		w.header = http.Header{}
	}
	return w.header
}
func (w *allowRecorder) Write(b []byte) (int, error) { return len(b), nil }
func (w *allowRecorder) WriteHeader(code int)        { w.code = code }

type admin struct {
	cfg      AdminConfig
	tokenSum [sha256.Size]byte
	log      *slog.Logger
	refusals lograte.Limiter // spaces out the lines about refused requests
}

// guard admits requests that carry the token. A request that carries a
// token from a client out of guesses (AdminConfig.Guesses) gets 429,
// whether the token is right or not; one that carries none gets 401, as
// does one whose Authorization header is in another scheme than Bearer,
// without spending a guess (see BearerToken). No admin route reads a
// body (each takes its parameters from the query): on whatever mux the
// routes are registered, a request that has one is answered without
// waiting for it (CloseUnreadBodies), where net/http would read the body
// before the reply.
func (a *admin) guard(h http.HandlerFunc) http.Handler {
	return CloseUnreadBodies(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, bearer := BearerToken(r.Header.Get("Authorization"))
		refund := func() {}
		if bearer {
			var wait time.Duration
			var ok bool
			if refund, wait, ok = a.cfg.Guesses.Take(r); !ok {
				writeError(w, http.StatusTooManyRequests, TooManyGuesses(w, wait))
				return
			}
		}
		if !bearer || !a.authorized(tok) {
			// Once a minute at most: whoever sends the requests chooses
			// how many lines they would make.
			a.refusals.Log(r.Context(), a.log, slog.LevelWarn, "", "admin request refused", func() []slog.Attr {
				return []slog.Attr{slog.String("method", r.Method), slog.String("path", logText(r.URL.Path)),
					slog.String("remote", r.RemoteAddr)}
			})
			w.Header().Set("WWW-Authenticate", `Bearer realm="hookbox admin"`)
			writeError(w, http.StatusUnauthorized, "missing or invalid admin token")
			return
		}
		refund()
		h(w, r)
	}))
}

// BearerToken returns the token of an Authorization header in the Bearer
// scheme (named in any case), and whether the header is one. A header in
// another scheme is no guess at the admin token: a browser sends the
// Basic credentials of a proxy's login in front of hookbox with every
// request, and counting those as guesses locked its operator out.
func BearerToken(header string) (string, bool) {
	scheme, tok, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	return strings.TrimSpace(tok), true
}

// authorized compares a bearer token with the admin token in constant
// time. Comparing hashes keeps the time independent of the lengths too.
func (a *admin) authorized(tok string) bool {
	sum := sha256.Sum256([]byte(tok))
	return subtle.ConstantTimeCompare(sum[:], a.tokenSum[:]) == 1
}

func (a *admin) list(w http.ResponseWriter, r *http.Request) {
	f, err := FilterFromQuery(r.URL.Query(), a.cfg.Now())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	evs, err := a.cfg.Store.Events(r.Context(), f)
	if err != nil {
		a.internal(w, "list events", err)
		return
	}
	if evs == nil {
		evs = []hookbox.Event{}
	}
	ShowHeaders(evs, a.cfg.ShowHeader)
	writeJSON(w, http.StatusOK, evs)
}

// EventDetail is one event as `GET /admin/events/{id}` and `hookbox events
// show --json` return it.
type EventDetail struct {
	Event    hookbox.Event     `json:"event"`
	Attempts []hookbox.Attempt `json:"attempts"`
	// Payload is the body exactly as received (base64 in JSON); null once
	// payload retention cleared it.
	Payload []byte `json:"payload"`
	// Deliveries are, for an event of a source with named targets, its
	// delivery to each target, oldest first.
	Deliveries []hookbox.Event `json:"deliveries,omitempty"`
	// ReplayAttempts is the number a conditional replay of this event
	// compares (if_attempts, --if-attempts; hookbox.ReplayAttempts): the
	// event's attempts, or for an event with deliveries the sum of
	// theirs. Absent when the deliveries could not all be read.
	ReplayAttempts *int `json:"replay_attempts,omitempty"`
	// HeldBy is, for a pending delivery with an order key whose key's
	// first delivery (hookbox.Ops.KeyHead) is dead, that delivery: under
	// on_dead: hold (the default) it holds the key, and this one waits
	// until it is replayed and succeeds, or skipped (hookbox.Ops.Skip);
	// under on_dead: skip it holds nothing. 0 for none, or when it could
	// not be read.
	HeldBy int64 `json:"held_by,omitempty"`
}

// LoadEventDetail reads an event with its attempts (and its deliveries).
func LoadEventDetail(ctx context.Context, st interface {
	Event(ctx context.Context, id int64) (hookbox.Event, error)
	Events(ctx context.Context, f hookbox.Filter) ([]hookbox.Event, error)
	Attempts(ctx context.Context, eventID int64) ([]hookbox.Attempt, error)
}, id int64) (EventDetail, error) {
	ev, err := st.Event(ctx, id)
	if err != nil {
		return EventDetail{}, err
	}
	d := EventDetail{Event: ev, Payload: ev.Payload, Attempts: []hookbox.Attempt{}}
	at, err := st.Attempts(ctx, id)
	if err != nil {
		return EventDetail{}, err
	}
	if at != nil {
		d.Attempts = at
	}
	if ev.FanOut {
		ds, err := st.Events(ctx, hookbox.Filter{Parent: id, Limit: MaxListLimit})
		if err != nil {
			return EventDetail{}, err
		}
		slices.Reverse(ds)
		d.Deliveries = ds
	}
	if !ev.FanOut || len(d.Deliveries) < MaxListLimit {
		n := hookbox.ReplayAttempts(ev, d.Deliveries)
		d.ReplayAttempts = &n
	}
	// The key's head, in one seek of the order index: a dead one before
	// this delivery holds the key under on_dead: hold. Left out when the
	// store cannot say, or the read fails: the event is shown anyway.
	if h, ok := st.(interface {
		KeyHead(ctx context.Context, name, key string) (int64, hookbox.Status, error)
	}); ok && ev.Status == hookbox.StatusPending && ev.OrderKey != "" {
		if id, status, err := h.KeyHead(ctx, ev.Source, ev.OrderKey); err == nil && status == hookbox.StatusDead && id < ev.ID {
			d.HeldBy = id
		}
	}
	return d, nil
}

func (a *admin) show(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	raw := false
	switch r.URL.Query().Get("payload") {
	case "", "base64":
	case "raw":
		raw = true
	default:
		writeError(w, http.StatusBadRequest, "payload: want raw or base64")
		return
	}
	d, err := LoadEventDetail(r.Context(), a.cfg.Store, id)
	if errors.Is(err, hookbox.ErrNotFound) {
		writeError(w, http.StatusNotFound, "no event "+strconv.FormatInt(id, 10))
		return
	}
	if err != nil {
		a.internal(w, "show event", err)
		return
	}
	if raw {
		if d.Payload == nil {
			writeError(w, http.StatusGone, "the payload was cleared by payload retention")
			return
		}
		w.Header().Set("Content-Type", "application/octet-stream")
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Content-Length", strconv.Itoa(len(d.Payload)))
		w.WriteHeader(http.StatusOK)
		w.Write(d.Payload)
		return
	}
	d.Show(a.cfg.ShowHeader)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusOK)
	EncodeEventDetail(w, d, false)
}

// EncodeEventDetail writes d to w as JSON followed by a newline, as
// json.Marshal makes it (with indent, as json.MarshalIndent with two
// spaces), but with the payload's base64 streamed to w rather than built
// in memory: marshalling the detail of a 32 MiB payload allocated its
// 43 MiB of base64 again for each request (10 MiB more than the store's
// read for 8 MiB, measured by TestAdminEventDetailStreamsPayload).
func EncodeEventDetail(w io.Writer, d EventDetail, indent bool) error {
	payload := d.Payload
	d.Payload = nil
	var b []byte
	var err error
	if indent {
		b, err = json.MarshalIndent(d, "", "  ")
	} else {
		b, err = json.Marshal(d)
	}
	if err != nil {
		return err
	}
	b = printable.JSON(b) // as writeJSON
	if payload == nil {
		_, err := w.Write(append(b, '\n'))
		return err
	}
	start, end, err := topLevelValue(b, "payload")
	if err != nil {
		return err
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	bw.Write(b[:start])
	bw.WriteByte('"')
	enc := base64.NewEncoder(base64.StdEncoding, bw)
	enc.Write(payload)
	enc.Close()
	bw.WriteByte('"')
	bw.Write(b[end:])
	bw.WriteByte('\n')
	return bw.Flush()
}

// topLevelValue finds the value of key in the JSON object b, which must
// be at its top level: the offsets of its first byte and past its last.
func topLevelValue(b []byte, key string) (start, end int, err error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	depth, keyNext, found := 0, false, false
	for {
		before := int(dec.InputOffset())
		tok, err := dec.Token()
		if err != nil {
			return 0, 0, fmt.Errorf("encode event: no %q in the object: %w", key, err)
		}
		if depth == 1 {
			switch {
			case keyNext:
				found, keyNext = tok == key, false
				continue
			case found:
				// The value starts after the key's colon and any space.
				start = before + bytes.IndexFunc(b[before:], func(r rune) bool { return r != ':' && r != ' ' && r != '\n' })
				end = int(dec.InputOffset())
				if _, delim := tok.(json.Delim); delim {
					return 0, 0, fmt.Errorf("encode event: %q is not a scalar", key)
				}
				return start, end, nil
			default:
				keyNext = true
			}
		}
		if d, ok := tok.(json.Delim); ok {
			switch d {
			case '{', '[':
				depth++
				if depth == 1 {
					keyNext = true
				}
			default:
				depth--
			}
		}
	}
}

// ShowHeaders replaces the headers of evs, in place, with what show makes
// of them (such as redact.ShowHeader): what a sender sent as a credential
// (X-Gitlab-Token is the shared secret itself) never reaches a reply or a
// terminal.
func ShowHeaders(evs []hookbox.Event, show func(http.Header) http.Header) {
	for i := range evs {
		evs[i].Header = show(evs[i].Header)
	}
}

// Show replaces d's headers with what show makes of them, as ShowHeaders.
func (d *EventDetail) Show(show func(http.Header) http.Header) {
	d.Event.Header = show(d.Event.Header)
	ShowHeaders(d.Deliveries, show)
}

// ReplayReply is the body of a replay answer. Its replayed and skipped
// lists and skipped_reasons are always present, empty when there is
// nothing in them (see NewReplayReply).
type ReplayReply struct {
	hookbox.ReplayResult
	// SkippedReasons says, by event id (a JSON object's keys are text),
	// why each event of Skipped was left alone: what the CLI prints
	// beside it ("no such event", "it is done; pass --include-done …").
	SkippedReasons map[string]string `json:"skipped_reasons"`
	DryRun         bool              `json:"dry_run"`
	// ReplayStop, set when the replay failed, adds what it left done
	// and how to go on: error, stopped, replayed_count, resume_after_id
	// and rerun.
	*ReplayStop
}

// NewReplayReply is the reply for res; reason says why a skipped event
// was left alone (nil: no reasons, as for a replay by filter, which
// skips none).
func NewReplayReply(res hookbox.ReplayResult, dryRun bool, reason func(id int64) string) ReplayReply {
	if res.Replayed == nil {
		res.Replayed = []int64{}
	}
	if res.Skipped == nil {
		res.Skipped = []int64{}
	}
	r := ReplayReply{ReplayResult: res, SkippedReasons: map[string]string{}, DryRun: dryRun}
	if reason != nil {
		for _, id := range res.Skipped {
			r.SkippedReasons[strconv.FormatInt(id, 10)] = reason(id)
		}
	}
	return r
}

func (a *admin) replayOne(w http.ResponseWriter, r *http.Request) {
	id, ok := pathID(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	includeDone, err1 := boolParam(q, "include_done")
	expect, err2 := ExpectFrom(q, id)
	if err := errors.Join(err1, err2); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	ops := a.cfg.Store
	p := hookbox.ReplayParams{IDs: []int64{id}, IncludeDone: includeDone, Expect: expect}
	res, err := ops.Replay(r.Context(), p)
	if err != nil {
		a.internal(w, "replay", err)
		return
	}
	if len(res.Replayed) == 0 {
		ev, err := a.cfg.Store.Event(r.Context(), id)
		switch {
		case errors.Is(err, hookbox.ErrNotFound):
			writeError(w, http.StatusNotFound, "no event "+strconv.FormatInt(id, 10))
		case err != nil:
			a.internal(w, "replay", err)
		case ev.PayloadCleared || len(res.NoPayload) > 0:
			writeError(w, http.StatusConflict, NoPayloadReason)
		default:
			// In flight, done without include_done, changed since the
			// caller looked (if_attempts), or, for a FanOut event, each
			// of its deliveries for one of those.
			writeError(w, http.StatusConflict, NotReplayed(r.Context(), a.cfg.Store, p, res, ev))
		}
		return
	}
	a.log.Info("admin replay", "event_ids", res.Replayed, "skipped", res.Skipped)
	a.notify()
	// Some of a FanOut event's deliveries may have been left alone (in
	// flight, done): they are in skipped, with why.
	writeJSON(w, http.StatusOK, NewReplayReply(res, false, func(id int64) string {
		return ReplaySkipReason(r.Context(), a.cfg.Store, p, id)
	}))
}

// NoPayloadReason says why an event whose payload was cleared is never
// replayed.
const NoPayloadReason = "the event's payload was cleared by payload retention (payload_retention_days); " +
	"replaying it would send an empty body under the original signature headers, so it is not replayed"

func (a *admin) replayBulk(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f, err := FilterFromQuery(q, a.cfg.Now())
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	// An empty value would be read as none, as if left out: a script
	// whose variable came out empty (source=$SOURCE) replayed every
	// source's events, and one resuming a stopped replay
	// (after_id=$RESUME_AFTER_ID) the events it had already sent.
	// Listings read an empty filter as none; a replay refuses.
	for _, n := range append([]string{"after_id", "rate", "pace_after"}, filterParams...) {
		if q.Has(n) && q.Get(n) == "" {
			writeError(w, http.StatusBadRequest, n+": given empty, which would be read as not given; give a value or leave it out")
			return
		}
	}
	if q.Has("limit") {
		// A limit would read as "replay N of them"; a replay takes every
		// match, so it is refused rather than ignored.
		writeError(w, http.StatusBadRequest, "bulk replay replays every matching event: limit does not apply; narrow the match with since, until or before_id (dry_run=true lists it)")
		return
	}
	if q.Has("if_attempts") {
		// The condition is one event's attempts as seen; a bulk replay
		// would otherwise replay unconditionally what the caller meant
		// to guard.
		writeError(w, http.StatusBadRequest, "if_attempts applies to the replay of one event (POST /admin/events/{id}/replay), not to a bulk replay")
		return
	}
	if f.Source == "" && f.Status == "" && f.EventType == "" && f.DeliveryID == "" && f.OrderKey == "" && f.Since.IsZero() && f.Until.IsZero() && f.BeforeID == 0 {
		writeError(w, http.StatusBadRequest, "bulk replay needs a filter: status, source, type, delivery_id, key, since, until or before_id")
		return
	}
	dry, err1 := boolParam(q, "dry_run")
	includeDone, err2 := boolParam(q, "include_done")
	afterID, err3 := afterIDParam(q)
	rate, err4 := replayRateParam(q)
	paceAfter, err5 := paceAfterParam(q)
	// Its own parameters, as the filter's (FilterFromQuery) and the
	// flags (boolParam): read by the first of several, a value given
	// twice would pick one the client did not mean.
	once := givenOnce(q, "after_id", "rate", "pace_after")
	if err := errors.Join(once, err1, err2, err3, err4, err5); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	ops := a.cfg.Store
	p := hookbox.ReplayParams{Filter: f, IncludeDone: includeDone, DryRun: dry, AfterID: afterID, Rate: rate, PaceAfter: paceAfter}
	res, err := ops.Replay(r.Context(), p)
	if err != nil && dry {
		a.internal(w, "replay (dry run, nothing was changed)", err)
		return
	}
	if err != nil {
		// The slices before the failure have committed: say which.
		a.replayFailed(w, p, res, err)
		return
	}
	if !dry {
		a.log.Info("admin bulk replay", "replayed", len(res.Replayed))
		if len(res.Replayed) > 0 {
			a.notify()
		}
	}
	// A replay by filter names no event, so it skips none.
	writeJSON(w, http.StatusOK, NewReplayReply(res, dry, nil))
}

// PurgeReply is the body of a purge answer.
type PurgeReply struct {
	hookbox.PurgeResult
	Before      time.Time `json:"before"`
	DryRun      bool      `json:"dry_run"`
	IncludeDead bool      `json:"include_dead"`
	Note        string    `json:"note"`
	// PurgeStop is set when the purge failed: the counts above are then
	// what it deleted before it stopped.
	*PurgeStop
}

func (a *admin) purge(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	// Read by the first of several, "days=1&days=100" purged by the
	// first (the flags refuse repeats themselves: boolParam).
	if err := givenOnce(q, "days"); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	if q.Get("days") == "" {
		writeError(w, http.StatusBadRequest, "days is required: finished events older than this many days are deleted")
		return
	}
	days, err := strconv.Atoi(q.Get("days"))
	if err != nil {
		// Not a number: name what was sent, not a stand-in count.
		writeError(w, http.StatusBadRequest, fmt.Sprintf("days: want a whole number of days from 0 to %d, not %s",
			hookbox.MaxDays, quoteClient(q.Get("days"))))
		return
	}
	before, err := hookbox.DaysAgo(a.cfg.Now(), days)
	if err != nil {
		writeError(w, http.StatusBadRequest, "days: "+err.Error())
		return
	}
	dry, err1 := boolParam(q, "dry_run")
	includeDead, err2 := boolParam(q, "include_dead")
	if err := errors.Join(err1, err2); err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return
	}
	ops := a.cfg.Store
	res, err := ops.Purge(r.Context(), hookbox.PurgeParams{Before: before, IncludeDead: includeDead, DryRun: dry})
	reply := PurgeReply{PurgeResult: res, Before: before.UTC(), DryRun: dry, IncludeDead: includeDead, Note: PurgeNote}
	switch {
	case err != nil && dry:
		a.internal(w, "purge", err) // a dry run deletes nothing
		return
	case err != nil:
		// The batches before the failure have committed.
		a.purgeFailed(w, reply, err)
		return
	case !dry:
		a.log.Info("admin purge", "done", res.Done, "stored", res.Stored, "dead", res.Dead, "before", before)
	}
	writeJSON(w, http.StatusOK, reply)
}

func (a *admin) notify() {
	if a.cfg.Notify != nil {
		a.cfg.Notify()
	}
}

// adminRetryAfter is the Retry-After, in seconds, of the admin API's
// 503s, as the console's: long enough for a database restart's first
// seconds, short enough for a script that waits on it.
const adminRetryAfter = "5"

// internal answers a failed store call: 503 with Retry-After when the
// database could not be reached (try again), else 500.
func (a *admin) internal(w http.ResponseWriter, what string, err error) {
	a.log.Error("admin: "+what, "err", err)
	if errors.Is(err, hookbox.ErrUnavailable) {
		w.Header().Set("Retry-After", adminRetryAfter)
		writeError(w, http.StatusServiceUnavailable, what+" failed: the database did not answer; try again (see the server log)")
		return
	}
	writeError(w, http.StatusInternalServerError, what+" failed; see the server log")
}

// afterIDParam reads after_id, where a bulk replay starts: only events
// with larger ids are replayed (0 when absent).
func afterIDParam(q url.Values) (int64, error) {
	v := q.Get("after_id")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n <= 0 {
		return 0, fmt.Errorf("after_id: want a positive id (a stopped replay's resume_after_id)")
	}
	return n, nil
}

// replayRateParam reads rate, a bulk replay's pace in events a second
// after the first second's worth (hookbox.ReplayParams.Rate): absent, the
// default pace; 0, every event due at once.
func replayRateParam(q url.Values) (int, error) {
	v := q.Get("rate")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("rate: want events per second, a whole number from 0 (0: all due at once), not %s", quoteClient(v))
	}
	if n == 0 {
		return hookbox.ReplayAtOnce, nil
	}
	return n, nil
}

// paceAfterParam reads pace_after, how many events a stopped replay's
// pace counted (its resume_pace_after): the replay that goes on from it
// paces its events after them (hookbox.ReplayParams.PaceAfter).
func paceAfterParam(q url.Values) (int, error) {
	v := q.Get("pace_after")
	if v == "" {
		return 0, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 0 || n > hookbox.MaxPaceAfter {
		return 0, fmt.Errorf("pace_after: want a count from 0 (a stopped replay's resume_pace_after), not %s", quoteClient(v))
	}
	return n, nil
}

func pathID(w http.ResponseWriter, r *http.Request) (int64, bool) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id <= 0 {
		writeError(w, http.StatusBadRequest, "event id: want a positive whole number")
		return 0, false
	}
	return id, true
}

// maxQuoted is how many bytes of a client's value an error answer quotes.
const maxQuoted = 40

// quoteClient quotes a value a client sent for an error answer: cut to
// maxQuoted bytes (marked with …) and Go-quoted, so control characters and
// invalid UTF-8 come back escaped and a long value is not echoed whole.
func quoteClient(v string) string {
	if len(v) <= maxQuoted {
		return strconv.Quote(v)
	}
	cut := maxQuoted
	for cut > 0 && !utf8.RuneStart(v[cut]) {
		cut-- // cut on a rune boundary, not in the middle of one
	}
	return strconv.Quote(v[:cut]) + "…"
}

// boolParam reads a flag: absent is false, given without a value true.
// Given more than once it is refused (givenOnce): every flag of the admin
// API steers an action, and "dry_run=false&dry_run=true" read by its
// first value retired a target's deliveries for good.
func boolParam(q url.Values, name string) (bool, error) {
	if err := givenOnce(q, name); err != nil {
		return false, err
	}
	v := q.Get(name)
	if v == "" {
		_, present := q[name]
		return present, nil // "?dry_run" alone means true
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, fmt.Errorf("%s: want true or false", name)
	}
	return b, nil
}

// FilterFromQuery reads a listing filter from query parameters: status,
// source, type, delivery_id, key (an order key), since, until (see
// ParseTime), limit and before_id.
func FilterFromQuery(q url.Values, now time.Time) (hookbox.Filter, error) {
	if err := givenOnce(q, "status", "source", "type", "delivery_id", "key", "since", "until", "limit", "before_id"); err != nil {
		return hookbox.Filter{}, err
	}
	f := hookbox.Filter{Source: q.Get("source"), EventType: q.Get("type"), Status: hookbox.Status(q.Get("status")),
		DeliveryID: q.Get("delivery_id"), OrderKey: q.Get("key")}
	if err := errors.Join(CheckFilterText("source", f.Source), CheckFilterText("type", f.EventType),
		CheckFilterText("delivery_id", f.DeliveryID), CheckFilterText("key", f.OrderKey)); err != nil {
		return f, err
	}
	if f.Status != "" && !f.Status.Valid() {
		return f, fmt.Errorf("status: want pending, processing, done, dead or stored")
	}
	var err error
	if f.Since, err = ParseTime(q.Get("since"), now); err != nil {
		return f, fmt.Errorf("since: %w", err)
	}
	if f.Until, err = ParseTime(q.Get("until"), now); err != nil {
		return f, fmt.Errorf("until: %w", err)
	}
	f.Limit, f.BeforeID, err = pageFromQuery(q)
	return f, err
}

// givenOnce refuses a query that gives one of names more than once: each
// takes one value, and reading the first of several would page or match
// what the client did not mean (a client that appends before_id to the
// last page's address would be handed the same page forever; a bulk
// replay given "status=&status=dead" would take every status).
func givenOnce(q url.Values, names ...string) error {
	for _, n := range names {
		if len(q[n]) > 1 {
			return fmt.Errorf("%s: given %d times; give it once", n, len(q[n]))
		}
	}
	return nil
}

// pageFromQuery reads a listing's page: limit (1 to MaxListLimit, 0 when
// absent) and before_id (the next page starts below it).
func pageFromQuery(q url.Values) (limit int, beforeID int64, err error) {
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n <= 0 || n > MaxListLimit {
			return 0, 0, fmt.Errorf("limit: want a whole number from 1 to %d", MaxListLimit)
		}
		limit = n
	}
	if v := q.Get("before_id"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n <= 0 {
			return 0, 0, fmt.Errorf("before_id: want a positive id")
		}
		beforeID = n
	}
	return limit, beforeID, nil
}

// CheckFilterText refuses a text filter (source, event type) that no store
// could hold: one that is not valid UTF-8 or holds a NUL byte. PostgreSQL
// refuses such a value outright and SQLite can only match nothing, so both
// answer it as bad input, named by param.
func CheckFilterText(param, v string) error {
	if !storable(v) {
		return fmt.Errorf("%s: want valid UTF-8 text without NUL bytes", param)
	}
	return nil
}

// ParseTime reads a point in time: empty (none), a duration back from now
// ("90m", "24h", "7d", at most hookbox.MaxDays days), an RFC 3339 time or a
// date (2006-01-02, UTC) after the start of year 1.
func ParseTime(s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return time.Time{}, nil
	}
	if days, ok := strings.CutSuffix(s, "d"); ok {
		if n, err := strconv.ParseFloat(days, 64); err == nil && n >= 0 && n <= hookbox.MaxDays {
			return now.Add(-time.Duration(n * 24 * float64(time.Hour))), nil
		}
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("%q: want a duration back from now, like 24h", s)
		}
		return now.Add(-d), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		t, err = time.Parse("2006-01-02", s)
	}
	if err == nil {
		if !t.After(time.Time{}) {
			// The zero time is a filter's "no bound": until it would
			// match every event instead of none.
			return time.Time{}, fmt.Errorf("%q: want a time after 0001-01-01T00:00:00Z", s)
		}
		return t, nil
	}
	return time.Time{}, fmt.Errorf("%q: want a duration back from now (24h, 7d) or a time (RFC 3339, like 2025-01-02T15:04:05Z)", s)
}
