// Package ui is hookbox's operator console: server-rendered HTML pages
// under /ui/ over the same store the admin API serves, embedded in the
// binary, with no JavaScript at all.
//
// Guarantees:
//
//   - Without an admin token configured nothing is registered: /ui/ is a
//     404, like the admin API.
//   - Every page needs the admin token: a session cookie set by the login
//     form (HttpOnly, SameSite=Strict, scoped to /ui/, signed with a key
//     derived from the token and expiring after SessionTTL; the token
//     itself is never stored in it), or "Authorization: Bearer TOKEN".
//   - Each login is a session of its own, with a random id the store
//     remembers (hookbox.SessionStore). A cookie is admitted only while
//     its session is live in the store, so logging out ends it at every
//     process sharing the database, and after a restart; when the store
//     cannot tell, the cookie is refused (503), never admitted.
//   - The cookie is Secure when the request came over TLS, or when a
//     trusted proxy (Config.TrustedProxies) says its client used HTTPS
//     (X-Forwarded-Proto).
//   - Every POST made with the cookie carries a CSRF token bound to the
//     session; without it the request is refused (403) and changes
//     nothing. Bearer requests need none: a browser never adds that
//     header on its own. A login a browser says was posted from another
//     site is refused.
//   - A request answered before its body is read (no session or token,
//     a login posted from another site, a page that takes no body) gets
//     its answer at once, on a connection then closed rather than left
//     waiting for the body.
//   - A form is read only once the request's session or token is
//     admitted (the login form's, once the request passes its site
//     check): at most 8 KiB at the login form and 64 KiB elsewhere (413
//     past it), arriving within 10 s of being asked for (408 after; the
//     server's read timeout, a minute, is for webhook bodies).
//   - Guesses are limited (Config.Guesses): a wrong token at the login
//     form or as Bearer, and a session cookie signed with a wrong one,
//     each spend one of the client's, shared with the admin API.
//   - Everything that came from a sender (payloads, headers, event types,
//     ids, source names asked for) goes through html/template's
//     contextual escaping, and every page is served with a
//     Content-Security-Policy that allows no script at all, so text a
//     sender wrote renders inert.
//   - Signature and credential header values are masked (ShowHeader) and
//     configured secrets are never shown.
//   - A listing (events, dead, rejected) whose address holds a filter it
//     cannot read (a wrong value, a parameter given twice) answers 400,
//     as the admin API does, and lists nothing: its page shows the filter
//     form and says which filter is wrong and what it takes.
package ui

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/lograte"
	"github.com/hookbox/hookbox/redact"
	"github.com/hookbox/hookbox/rejected"
	"github.com/hookbox/hookbox/server"
)

//go:embed templates/*.html static/*
var assets embed.FS

// SessionTTL is how long a login lasts.
const SessionTTL = 12 * time.Hour

// cookieName names the session cookie.
const cookieName = "hookbox_session"

// Config is what the console needs.
type Config struct {
	// Token is the admin token; empty means no console.
	Token string
	// Store is shown, replayed, skipped and re-checked, and remembers the live
	// sessions.
	Store hookbox.Store
	// Sources are the configured source names, shown in the overview even
	// before they have events.
	Sources []string
	// Deliveries, if set, returns this process's delivery counts since
	// it started, per source and outcome (metrics.Metrics.DeliveryCounts).
	Deliveries func() map[string]map[string]int64
	// ShowHeader makes headers fit to show (see server.AdminConfig).
	ShowHeader func(http.Header) http.Header
	// Recheck verifies rejected deliveries again (see server.AdminConfig);
	// nil hides re-check.
	Recheck func(ctx context.Context, p rejected.RecheckParams) (rejected.RecheckResult, error)
	// Notify, if set, wakes the workers after a replay or a skip.
	Notify func()
	// Guesses, if set, slows down clients that send wrong tokens, at the
	// login form, as Bearer or in a session cookie signed with one (429
	// past their allowance); share the admin API's (server.AuthLimiter).
	Guesses *server.AuthLimiter
	// TrustedProxies are the peers whose X-Forwarded-Proto is believed:
	// from them, "https" makes the session cookie Secure. From any other
	// peer the header is ignored.
	TrustedProxies []netip.Prefix
	Logger         *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Register adds the console's routes under /ui/ to m. With an empty
// token it registers nothing.
func Register(m server.Mux, cfg Config) {
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
	key := sha256.Sum256([]byte("hookbox ui key\x00" + cfg.Token))
	u := &console{cfg: cfg, key: key[:], tokenSum: sha256.Sum256([]byte(cfg.Token)), pages: parsePages(), log: cfg.Logger}
	static, _ := fs.Sub(assets, "static")
	m.Handle("GET /ui/static/", secure(http.StripPrefix("/ui/static/", http.FileServerFS(static))))
	m.Handle("GET /ui/login", secure(http.HandlerFunc(u.loginForm)))
	m.Handle("POST /ui/login", secure(http.HandlerFunc(u.login)))
	m.Handle("POST /ui/logout", u.guard(u.logout))
	m.Handle("GET /ui/{$}", u.guard(u.overview))
	m.Handle("GET /ui/events", u.guard(u.events))
	m.Handle("GET /ui/events/{id}", u.guard(u.event))
	m.Handle("POST /ui/events/{id}/replay", u.guard(u.replayOne))
	m.Handle("POST /ui/events/{id}/skip", u.guard(u.skipOne))
	m.Handle("GET /ui/dead", u.guard(u.dead))
	m.Handle("POST /ui/replay", u.guard(u.replayBulk))
	m.Handle("GET /ui/rejected", u.guard(u.rejectedList))
	m.Handle("GET /ui/rejected/{id}", u.guard(u.rejectedOne))
	m.Handle("POST /ui/rejected/recheck", u.guard(u.recheck))
	m.Handle("GET /ui/uncertain", u.guard(u.uncertain))
	m.Handle("/ui/", u.guard(func(w http.ResponseWriter, r *http.Request, s session) {
		u.fail(w, r, s, http.StatusNotFound, "No such page.")
	}))
	m.Handle("GET /ui", http.RedirectHandler("/ui/", http.StatusMovedPermanently))
}

type console struct {
	cfg      Config
	key      []byte
	tokenSum [sha256.Size]byte
	pages    map[string]*template.Template
	log      *slog.Logger
	// refusals spaces out the lines about refused tokens and logins,
	// whose number whoever sends them chooses (lograte), and about a
	// store that cannot tell whether sessions are live.
	refusals lograte.Limiter
}

// clip cuts a request path for a log line: enough to see what was asked.
func clip(p string) string {
	const most = 256
	if len(p) <= most {
		return p
	}
	return p[:most] + "…"
}

// session is who is asking: id is the session's (the store's key for
// it) and csrf the token its forms carry (both "" for a Bearer request,
// which needs neither).
type session struct {
	id     string
	csrf   string
	bearer bool
}

// secure sets the headers every console response carries: no script may
// run, nothing is framed or cached, nothing is sniffed. A reply written
// before the request's body was read to its end (a refused token, no
// session, a page that takes no body) is the connection's last, and does
// not wait for the body (server.CloseUnreadBodies).
func secure(h http.Handler) http.Handler {
	return server.CloseUnreadBodies(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hd := w.Header()
		hd.Set("Content-Security-Policy", "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
		hd.Set("X-Content-Type-Options", "nosniff")
		hd.Set("X-Frame-Options", "DENY")
		hd.Set("Referrer-Policy", "no-referrer")
		hd.Set("Cache-Control", "no-store")
		h.ServeHTTP(w, r)
	}))
}

// guard admits requests with a valid session cookie or Bearer token, and
// POSTs made with the cookie only when they carry the session's CSRF
// token. A GET without either goes to the login form. An Authorization
// header in another scheme than Bearer (a proxy's Basic login in front of
// the console) is left alone: the cookie decides.
func (u *console) guard(h func(http.ResponseWriter, *http.Request, session)) http.Handler {
	return secure(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if tok, ok := server.BearerToken(r.Header.Get("Authorization")); ok {
			refund, ok := u.takeGuess(w, r)
			if !ok {
				return
			}
			if !u.tokenMatches(tok) {
				u.refusals.Log(r.Context(), u.log, slog.LevelWarn, "bearer", "ui request refused: wrong token", func() []slog.Attr {
					return []slog.Attr{slog.String("method", r.Method), slog.String("path", clip(r.URL.Path)),
						slog.String("remote", r.RemoteAddr)}
				})
				w.Header().Set("WWW-Authenticate", `Bearer realm="hookbox admin"`)
				http.Error(w, "missing or invalid admin token", http.StatusUnauthorized)
				return
			}
			refund()
			if r.Method == http.MethodPost && !parseForm(w, r, maxFormBytes) {
				return
			}
			h(w, r, session{bearer: true})
			return
		}
		signed, state, forged := u.sessionCookies(r)
		var s session
		if state == cookieSigned {
			// Only a request whose MAC is right gets here: the store is
			// asked before a guess is taken.
			var err error
			if s, err = u.liveSession(r.Context(), signed); err != nil {
				// Fail closed: a session the store cannot vouch for may
				// be one that was logged out.
				u.refusals.Log(r.Context(), u.log, slog.LevelError, "sessions", "ui: cannot tell whether a session is live; refused", func() []slog.Attr {
					return []slog.Attr{slog.Any("err", err)}
				})
				w.Header().Set("Retry-After", "5")
				http.Error(w, "the console cannot check its sessions now (the database did not answer); try again", http.StatusServiceUnavailable)
				return
			}
			if s.id == "" {
				// Logged out (here or at another process) or forgotten.
				state = cookieEnded
			}
		}
		if state != cookieNone {
			// The cookie's key derives from the token, so a cookie made
			// with a guessed token is a guess too. A request with a live
			// session spends a guess, given back, so that a client out
			// of guesses learns nothing from its cookies (and cookies of
			// the same name that sibling domains set beside it cost the
			// operator nothing). Any other spends a guess for each
			// cookie, one signed with the right token but no live
			// session as much as one signed with a wrong one: a client
			// that sends many, each signed with another candidate, tests
			// no more tokens than it has guesses, and is answered alike
			// whether the right one is among them or not.
			if state == cookieSigned {
				refund, ok := u.takeGuess(w, r)
				if !ok {
					return
				}
				refund()
			} else {
				if !u.spendGuesses(w, r, forged+len(signed)) {
					return
				}
				// Cleared, so that a browser holding one from before the
				// token changed, or from a session that ended, stops
				// sending it.
				u.clearSession(w, r)
			}
		}
		if state != cookieSigned {
			if r.Method == http.MethodGet || r.Method == http.MethodHead {
				http.Redirect(w, r, "/ui/login?next="+url.QueryEscape(r.URL.RequestURI()), http.StatusSeeOther)
				return
			}
			http.Error(w, "log in first", http.StatusUnauthorized)
			return
		}
		if r.Method == http.MethodPost {
			if !parseForm(w, r, maxFormBytes) {
				return
			}
			if subtle.ConstantTimeCompare([]byte(r.PostForm.Get("csrf")), []byte(s.csrf)) != 1 {
				u.log.Warn("ui POST refused: missing or wrong CSRF token", "path", r.URL.Path, "remote", r.RemoteAddr)
				http.Error(w, "missing or invalid CSRF token: reload the page and try again", http.StatusForbidden)
				return
			}
		}
		h(w, r, s)
	}))
}

// maxFormBytes bounds a console form's body. The largest form, a bulk
// replay's filter, needs a few hundred bytes; net/http's own bound is
// 10 MB, held in memory outside the webhooks' body budget.
const maxFormBytes = 64 << 10

// maxLoginFormBytes bounds the login form's body, which any client may
// post: the token and the page to go to after (a console URL).
const maxLoginFormBytes = 8 << 10

// formWait is how long a form's body may take to arrive once it is asked
// for. A browser sends a form with its headers; the server's read timeout
// (a minute, for webhook bodies) would let a client that withholds one
// hold its connection, and the form read so far, that long.
const formWait = 10 * time.Second

// parseForm parses a POST's form, of at most limit bytes arriving within
// formWait, and answers 413, 408 or 400 (reporting false) when it cannot.
func parseForm(w http.ResponseWriter, r *http.Request, limit int64) bool {
	if r.ContentLength > limit {
		http.Error(w, "form too large", http.StatusRequestEntityTooLarge)
		return false
	}
	rc := http.NewResponseController(w)
	timed := rc.SetReadDeadline(time.Now().Add(formWait)) == nil
	body := &formBody{ReadCloser: r.Body}
	r.Body = http.MaxBytesReader(netHTTPWriter(w), body, limit)
	if err := r.ParseForm(); err != nil {
		switch tooLarge := (*http.MaxBytesError)(nil); {
		case errors.As(err, &tooLarge):
			http.Error(w, "form too large", http.StatusRequestEntityTooLarge)
		case errors.Is(err, os.ErrDeadlineExceeded):
			http.Error(w, "form not received in time", http.StatusRequestTimeout)
		default:
			http.Error(w, "bad form", http.StatusBadRequest)
		}
		return false
	}
	if timed && body.ended {
		// Read to its end: net/http now watches the connection for a
		// client that leaves, and that watch must not time out while the
		// handler works. A body not read (not a form) keeps the deadline,
		// so that net/http's read of it after the reply ends too.
		rc.SetReadDeadline(time.Time{})
	}
	return true
}

// formBody is a form's body that remembers whether it was read to its end.
type formBody struct {
	io.ReadCloser
	ended bool
}

func (b *formBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if err == io.EOF {
		b.ended = true
	}
	return n, err
}

// netHTTPWriter returns the writer net/http gave the handler, under the
// wrappers of secure: http.MaxBytesReader needs it to mark the reply to a
// form it cut as the connection's last, with the client let to read the
// reply before the connection closes.
func netHTTPWriter(w http.ResponseWriter) http.ResponseWriter {
	for {
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return w
		}
		w = u.Unwrap()
	}
}

// tokenMatches compares a bearer token with the admin token in constant
// time.
func (u *console) tokenMatches(tok string) bool {
	sum := sha256.Sum256([]byte(tok))
	return subtle.ConstantTimeCompare(sum[:], u.tokenSum[:]) == 1
}

// mac is the hex HMAC of parts under the console's key.
func (u *console) mac(parts ...string) string {
	m := hmac.New(sha256.New, u.key)
	m.Write([]byte(strings.Join(parts, "\x00")))
	return hex.EncodeToString(m.Sum(nil))
}

// newSession starts a session in the store and returns its cookie value:
// a random id, its expiry and a MAC over both. Each login gets an id of
// its own, so that logging out ends that login only, and two logins in
// one second get different cookies.
func (u *console) newSession(ctx context.Context) (string, time.Time, error) {
	id := rand.Text()
	now := u.cfg.Now()
	exp := time.Unix(now.Add(SessionTTL).Unix(), 0)
	if err := u.cfg.Store.StartSession(ctx, hookbox.Session{ID: id, Expires: exp, Now: now}); err != nil {
		return "", time.Time{}, err
	}
	e := strconv.FormatInt(exp.Unix(), 10)
	return id + "." + e + "." + u.mac("session", id, e), exp, nil
}

// What a request's session cookie is.
const (
	cookieNone   = iota // absent, malformed or expired
	cookieForged        // well formed and unexpired, but its MAC is wrong
	cookieSigned        // its MAC is right: the store says if it is live
	cookieEnded         // signed, but its session is no longer live
)

// signedCookie is a session cookie whose MAC is right.
type signedCookie struct{ id, sig string }

// sessionCookies returns the request's session cookies whose MAC is
// right and that have not expired, what its session cookies are (signed
// if any is: a sibling domain may set some of the same name beside the
// console's own; forged if none is but one is well formed and
// unexpired), and how many well formed, unexpired ones have a wrong MAC.
// Each is checked: the request's headers bound their number (about 540
// in 64 KiB), and a MAC costs a microsecond.
func (u *console) sessionCookies(r *http.Request) ([]signedCookie, int, int) {
	state, forged := cookieNone, 0
	var signed []signedCookie
	for _, c := range r.CookiesNamed(cookieName) {
		id, rest, ok := strings.Cut(c.Value, ".")
		e, sig, ok2 := strings.Cut(rest, ".")
		if !ok || !ok2 || id == "" {
			continue
		}
		exp, err := strconv.ParseInt(e, 10, 64)
		if err != nil || u.cfg.Now().Unix() >= exp {
			continue
		}
		if hmac.Equal([]byte(sig), []byte(u.mac("session", id, e))) {
			signed = append(signed, signedCookie{id, sig})
			state = cookieSigned
		} else {
			forged++
			if state == cookieNone {
				state = cookieForged
			}
		}
	}
	return signed, state, forged
}

// liveSession returns the session of the first of signed that the store
// says is live, or a session with no id when none is. An error means the
// store could not tell: the caller must refuse the request.
func (u *console) liveSession(ctx context.Context, signed []signedCookie) (session, error) {
	for _, c := range signed {
		live, err := u.cfg.Store.SessionLive(ctx, c.id, u.cfg.Now())
		if err != nil {
			return session{}, err
		}
		if live {
			return session{id: c.id, csrf: u.mac("csrf", c.sig)}, nil
		}
	}
	return session{}, nil
}

func (u *console) loginForm(w http.ResponseWriter, r *http.Request) {
	u.render(w, r, session{}, http.StatusOK, "login", "Log in", loginData{Next: safeNext(r.URL.Query().Get("next"))})
}

type loginData struct {
	Next  string
	Error string
}

func (u *console) login(w http.ResponseWriter, r *http.Request) {
	// A page of another site must not post logins from the operator's
	// browser: its wrong tokens would spend the guesses of the operator's
	// address. Browsers say where a request comes from in secure contexts
	// (HTTPS, localhost); a request that does not say is let through, as
	// comparing Origin with Host would refuse every login behind a proxy
	// that rewrites Host.
	if site := r.Header.Get("Sec-Fetch-Site"); site != "" && site != "same-origin" && site != "none" {
		http.Error(w, "log in from the console's own login page", http.StatusForbidden)
		return
	}
	if !parseForm(w, r, maxLoginFormBytes) {
		return
	}
	next := safeNext(r.PostForm.Get("next"))
	token := r.PostForm.Get("token")
	refund := func() {}
	if token != "" {
		var wait time.Duration
		var ok bool
		if refund, wait, ok = u.cfg.Guesses.Take(r); !ok {
			u.render(w, r, session{}, http.StatusTooManyRequests, "login", "Log in", loginData{Next: next, Error: server.TooManyGuesses(w, wait) + "."})
			return
		}
	}
	if !u.tokenMatches(token) {
		u.refusals.Log(r.Context(), u.log, slog.LevelWarn, "login", "ui login refused", func() []slog.Attr {
			return []slog.Attr{slog.String("remote", r.RemoteAddr)}
		})
		u.render(w, r, session{}, http.StatusUnauthorized, "login", "Log in", loginData{Next: next, Error: "That is not the admin token."})
		return
	}
	refund()
	val, exp, err := u.newSession(r.Context())
	if err != nil {
		u.log.Error("ui: start session", "err", err)
		w.Header().Set("Retry-After", "5")
		u.render(w, r, session{}, http.StatusServiceUnavailable, "login", "Log in",
			loginData{Next: next, Error: "The session could not be stored (the database did not answer); try again."})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: val, Path: "/ui/", Expires: exp, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: u.https(r)})
	http.Redirect(w, r, next, http.StatusSeeOther)
}

// logout ends the session in the store, at every process sharing it,
// before it clears the cookie: a copy of the cookie is refused from then
// on. When the store cannot end it, the cookie is kept, so the operator
// sees the failure and can try again.
func (u *console) logout(w http.ResponseWriter, r *http.Request, s session) {
	if s.id != "" {
		// A client that goes away does not cut this short: the
		// operator asked for the session to end.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), 10*time.Second)
		defer cancel()
		if err := u.cfg.Store.EndSession(ctx, s.id); err != nil {
			u.internal(w, r, s, "log out", err)
			return
		}
	}
	u.clearSession(w, r)
	http.Redirect(w, r, "/ui/login", http.StatusSeeOther)
}

// clearSession tells the browser to drop its session cookie.
func (u *console) clearSession(w http.ResponseWriter, r *http.Request) {
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/ui/", MaxAge: -1, HttpOnly: true,
		SameSite: http.SameSiteStrictMode, Secure: u.https(r)})
}

// https reports whether the browser reached the console over HTTPS: r
// came over TLS, or through a trusted proxy that says so.
func (u *console) https(r *http.Request) bool {
	return r.TLS != nil || server.ForwardedHTTPS(r, u.cfg.TrustedProxies)
}

// takeGuess spends one of r's client's guesses (Config.Guesses) and
// returns the function that gives it back; out of guesses, it answers 429
// and reports false.
func (u *console) takeGuess(w http.ResponseWriter, r *http.Request) (refund func(), ok bool) {
	refund, wait, ok := u.cfg.Guesses.Take(r)
	if !ok {
		http.Error(w, server.TooManyGuesses(w, wait), http.StatusTooManyRequests)
	}
	return refund, ok
}

// spendGuesses spends n of r's client's guesses, as takeGuess does one,
// none given back; out of guesses part way, it answers 429 and reports
// false.
func (u *console) spendGuesses(w http.ResponseWriter, r *http.Request, n int) bool {
	for range n {
		if _, ok := u.takeGuess(w, r); !ok {
			return false
		}
	}
	return true
}

// safeNext keeps a post-login destination inside the console.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/ui/") || strings.HasPrefix(next, "//") || strings.ContainsAny(next, "\\\r\n") {
		return "/ui/"
	}
	return next
}

// page is what every template gets.
type page struct {
	Title string
	Nav   string
	CSRF  string
	// LoggedIn shows the navigation and the log-out button (not for a
	// Bearer request, which has no session to end).
	LoggedIn bool
	Session  bool
	Flash    string
	Data     any
}

// render writes the page name with data, or a plain 500 when the
// template fails (before anything was written).
func (u *console) render(w http.ResponseWriter, r *http.Request, s session, status int, name, title string, data any) {
	t := u.pages[name]
	var b strings.Builder
	p := page{Title: title, Nav: name, CSRF: s.csrf, LoggedIn: s.csrf != "" || s.bearer, Session: s.csrf != "",
		Flash: flash(r.URL.Query().Get("done")), Data: data}
	if err := t.ExecuteTemplate(&b, "layout", p); err != nil {
		u.log.Error("ui: render "+name, "err", err)
		http.Error(w, "the page failed to render; see the server log", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.WriteHeader(status)
	fmt.Fprint(w, b.String())
}

// fail shows an error page.
func (u *console) fail(w http.ResponseWriter, r *http.Request, s session, status int, msg string) {
	u.render(w, r, s, status, "error", http.StatusText(status), msg)
}

// internal logs err and shows an error page that does not repeat it: a
// 503 when the database could not be reached (the operator may try
// again), else a 500.
func (u *console) internal(w http.ResponseWriter, r *http.Request, s session, what string, err error) {
	u.log.Error("ui: "+what, "err", err)
	if errors.Is(err, hookbox.ErrUnavailable) {
		w.Header().Set("Retry-After", "5")
		u.fail(w, r, s, http.StatusServiceUnavailable, what+" failed: the database did not answer; try again (see the server log).")
		return
	}
	u.fail(w, r, s, http.StatusInternalServerError, what+" failed; see the server log.")
}

// flashes are the fixed messages a redirect after a POST may ask for.
var flashes = map[string]string{
	"replayed": "Replayed: the event is pending again, due now.",
	"skipped":  "Skipped: the delivery stays dead, with its payload, and no longer holds its order key; any of the key's deliveries waiting behind it go on.",
	// A delivery that held a key of its own held up nothing.
	"skipped-own":  "Skipped: the delivery stays dead, with its payload; it held up no other delivery.",
	"skip-already": "The delivery was skipped before: nothing changed.",
}

func flash(key string) string { return flashes[key] }

// parsePages parses each page template with the layout.
func parsePages() map[string]*template.Template {
	base := template.Must(template.New("").Funcs(funcs).ParseFS(assets, "templates/layout.html", "templates/partials.html"))
	names, err := fs.Glob(assets, "templates/*.html")
	if err != nil {
		panic(err)
	}
	pages := map[string]*template.Template{}
	for _, n := range names {
		name := strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")
		if name == "layout" || name == "partials" {
			continue
		}
		pages[name] = template.Must(template.Must(base.Clone()).ParseFS(assets, n))
	}
	return pages
}
