// Package server is hookbox's HTTP front door: POST /webhooks/{source}, the
// health endpoints, and the admin API (RegisterAdmin).
//
// Guarantees of the receiving endpoint:
//   - 202 is written only after the delivery's row is committed (the Ingest
//     function returned a receipt); a duplicate is a 202 too.
//   - A store that cannot commit yields 503 with Retry-After, never 2xx.
//   - Bad input yields 400/401/403/404/405/408/413/415 and stores no event.
//     A 400, 401, 404, 408, 413 or 415 is handed to Config.Rejections (the
//     operator's log of refused deliveries) after the reply is written,
//     never before it and never waiting on it; an unknown source's body
//     is read for it only when the log admits the rejection, and only up
//     to its limit.
//   - Nothing of the body is read until the request has passed every check
//     its headers allow: the source's allow_ips, the declared length, and
//     the verifier's CheckHeader (signature header present and well formed,
//     signed timestamp within the tolerance). A request with a body to a
//     path no webhook route takes (the 404 for an unknown path, net/http's
//     redirects to a clean path or a subtree's "/", the health endpoints,
//     the admin API, which reads no body, a refusal of the console) is
//     answered without waiting for the part of its body left unread, on a
//     connection closed soon after the reply (CloseUnreadBodies).
//   - The body bytes held at once, across all requests, stay within
//     Config.MaxInflightBodyBytes; a request that would pass it gets 503
//     with Retry-After. A body is counted until its reply, and after it
//     for as long as Ingest still holds the delivery (a commit its sender
//     did not wait for; see IngestFunc). A body's bytes are taken from
//     that budget as they arrive, not as its Content-Length announces
//     them: a sender holds nothing before its first byte, then at most
//     16 KiB or about four times what it has sent, whichever is more
//     (readBody). Its last buffer is exactly its declared length, or at
//     most the source's limit. Once its body is read, a delivery counts
//     its headers and a fixed overhead too (requestCost), so the budget
//     also bounds how many deliveries wait for the store at once, however
//     small their bodies: past it they get 503 at once, not after
//     StoreWait. Once half the budget is held, a client (an
//     address, an IPv6 /64) holding more than an eighth of it is refused,
//     so one client cannot take the rest from the others (byteBudget).
//   - A sender must keep sending: after Config.BodyGrace it must have sent
//     Config.MinBodyRate bytes a second on average, and all of the body
//     within Config.BodyTimeout; one that falls behind gets 408 and its
//     connection is closed, so a sender that withholds a body cannot hold
//     its part of the budget for long.
//   - Delivery ids and event types are at most hookbox.MaxIDLength bytes
//     (400 otherwise), and logs show at most the first 64 bytes of either.
//   - Replies and logs never contain a secret or an expected signature, and
//     a header that carries a source's secret itself (a token scheme's
//     header) is not stored, so it is neither shown nor forwarded.
//   - A handshake (a sender checking the URL: Slack's url_verification,
//     Zoom's endpoint.url_validation, Discord's PING) is answered with the
//     reply its verifier built, only once its signature is verified, and is
//     never stored.
package server

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/groupcommit"
	"github.com/hookbox/hookbox/internal/lograte"
	"github.com/hookbox/hookbox/internal/printable"
	"github.com/hookbox/hookbox/rejected"
	"github.com/hookbox/hookbox/tracing"
	"github.com/hookbox/hookbox/verify"
)

// IngestFunc stores one delivery and returns its receipt once committed.
//
// ctx carries the delivery's groupcommit.Hold: its body's bytes, counted
// against Config.MaxInflightBodyBytes until the Hold is let go. An
// IngestFunc that may keep d after it returns (it returns when ctx ends
// while the delivery waits on in a queue or a transaction) should hand
// ctx to a groupcommit.Committer's Submit, which holds the Hold as long
// as it holds the item; bytes kept any other way past the return are
// not counted.
type IngestFunc func(ctx context.Context, d hookbox.Delivery) (hookbox.Receipt, error)

// Source is one sender the server accepts deliveries from.
type Source struct {
	Name         string
	Verifier     verify.Verifier
	MaxBodyBytes int64 // 0 means Config.MaxBodyBytes
	// AllowIPs, when not empty, are the only client addresses this source
	// accepts deliveries from; a request from elsewhere gets 403. See
	// Config.TrustedProxies for how the client address is found.
	AllowIPs []netip.Prefix

	// credentials are the headers that carry the source's secret itself
	// (verify.CredentialHeaders): never stored.
	credentials []string
	// signatures are the headers that carry its signature under a name
	// the configuration chose (verify.SignatureHeaders): listed in a
	// rejection's row, so that every view masks them.
	signatures []string
}

// DefaultStoreWait is the default of Config.StoreWait: past any wait of
// the stores' own, and short of the 10 to 30 s senders wait for a reply.
const DefaultStoreWait = 8 * time.Second

// DefaultMaxInflightBodyBytes is the default of Config.MaxInflightBodyBytes.
const DefaultMaxInflightBodyBytes = 64 << 20

// Config is what the server needs to run.
type Config struct {
	Sources      []Source
	Ingest       IngestFunc
	Ready        func(ctx context.Context) error // store reachability and recent commits, for /readyz; see ErrCommitsFailing
	MaxBodyBytes int64                           // default 1 MiB
	RetryAfter   time.Duration                   // sent with 503; default 5s
	// StoreWait is the longest a delivery waits for Ingest before its
	// sender is answered 503 (default DefaultStoreWait). The stores bound
	// their own waits (PostgreSQL's timeouts, SQLite's 5 s for the write
	// lock), but nothing bounds a disk whose fsync never returns; the
	// delivery may still be stored, and the sender's retry is then a
	// duplicate.
	StoreWait time.Duration
	// MaxInflightBodyBytes bounds the body bytes held at once across all
	// requests, from the first byte read until the reply, or until Ingest
	// lets go of the delivery if that is later (default
	// DefaultMaxInflightBodyBytes, and never less than twice the largest
	// source limit and a request's reserve, so that any body the limits
	// admit can be received: a body counts the buffers it outgrew too, see
	// readBody). A request whose body is read counts what else it holds
	// too, its headers and a fixed overhead (requestCost), so that the
	// budget bounds the memory of the deliveries waiting for the store
	// however small their bodies. Past half of it, one client may hold no
	// more than an eighth (byteBudget).
	MaxInflightBodyBytes int64
	// MinBodyRate is the bytes a second a sender must keep up, on average,
	// once BodyGrace has passed since its body was first read from
	// (default DefaultMinBodyRate, and DefaultBodyGrace); BodyTimeout is
	// the most a body may take in all (default DefaultBodyTimeout). See
	// bodyReader.
	MinBodyRate int64
	BodyGrace   time.Duration
	BodyTimeout time.Duration
	// TrustedProxies are the peers whose X-Forwarded-For and Forwarded
	// headers are believed when finding a client's address, for
	// Source.AllowIPs and for each client's share of the body budget. From
	// any other peer those headers are ignored.
	TrustedProxies []netip.Prefix
	Logger         *slog.Logger
	// Rejections, if set, is told of every delivery refused with 400, 401,
	// 404, 408, 413 or 415, after the reply is written; see RejectionLog.
	Rejections RejectionLog
	// UseNonce, if set, remembers the nonce of a verified delivery
	// (verify.Result.Nonce) with its body and reports whether the
	// delivery may be stored (hookbox.NonceStore; serve gathers the calls
	// into batches). A nonce used before with another body is refused with
	// 401; a delivery with a nonce waits for that write, and gets 503 if
	// it fails. Without it nonces are not checked.
	UseNonce func(ctx context.Context, n hookbox.Nonce) (bool, error)
	// Observe, if set, is told how each delivery ended: outcome is "new",
	// "duplicate", "handshake" (a verified URL check, answered, not stored) or
	// why it was refused ("bad_signature", "malformed", "too_large",
	// "too_slow", "unknown_source", "forbidden", "unavailable"); source is
	// "" when unknown; took runs from receipt to reply (0 for a refusal),
	// and so includes the sender's upload of the body.
	Observe func(source, outcome string, took time.Duration)
	// ObserveStore, if set, is told how long each stored delivery (new or
	// duplicate) waited for Ingest: the database's share of Observe's
	// took, from the body read and verified to its commit.
	ObserveStore func(took time.Duration)
}

// RejectionLog records refused deliveries for the operator (the rejected
// package's Recorder is one). Its methods must never wait on anything.
type RejectionLog interface {
	// Allow reports whether a rejection from source (a configured one when
	// known, else the name asked for) may be recorded now; a caller that
	// gets false records nothing.
	Allow(source string, known bool) bool
	// Record takes a rejection; it copies what it keeps of its body.
	Record(hookbox.Rejection)
	// MaxBodyBytes is how much of a body a rejection keeps.
	MaxBodyBytes() int
}

// Server routes requests; it is an http.Handler.
type Server struct {
	cfg     Config
	sources map[string]*Source
	// anyCredentials are the credential and signature headers of every
	// source (Source.credentials, Source.signatures), listed in the row of
	// a delivery to a name no source has: a sender with the right secret
	// and a wrong path sends them there, and a view without the
	// configuration would show them in clear.
	anyCredentials []string
	mux            *http.ServeMux
	log            *slog.Logger
	budget         *byteBudget
	// rejectLog spaces out the info lines about refused deliveries.
	rejectLog lograte.Limiter
	// failLog spaces out the lines about a failing store (one per
	// delivery answered 503, one per /readyz): their number is the
	// senders' and the probes' to choose.
	failLog lograte.Limiter
	ready   readiness
	// unread is mux under CloseUnreadBodies, for requests with a body
	// that no webhook route takes.
	unread http.Handler
}

// failLogEvery is how often failLog writes a line per kind of failure.
const failLogEvery = 10 * time.Second

// readyCache is how long /readyz answers from a failed check of the
// store: probes and outsiders, who need no token, then cannot set how
// often a failing store is pinged, or reconnected to while it is down.
// A store that answers is checked again for every request that does not
// find a check already running; requests that do share its result.
const readyCache = time.Second

// readiness is the last check of Config.Ready, and the one running.
type readiness struct {
	mu  sync.Mutex
	at  time.Time // when err was found
	err error
	// cur is the check running, if any; requests that come meanwhile
	// wait for its result rather than start checks of their own.
	cur *readyCheck
	// waiting counts those requests (for tests).
	waiting int
}

// readyCheck is one call of Config.Ready: done is closed once err is set.
type readyCheck struct {
	done chan struct{}
	err  error
}

// New builds a Server.
func New(cfg Config) *Server {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	if cfg.RetryAfter <= 0 {
		cfg.RetryAfter = 5 * time.Second
	}
	if cfg.StoreWait <= 0 {
		cfg.StoreWait = DefaultStoreWait
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxInflightBodyBytes <= 0 {
		cfg.MaxInflightBodyBytes = DefaultMaxInflightBodyBytes
	}
	if cfg.MinBodyRate <= 0 {
		cfg.MinBodyRate = DefaultMinBodyRate
	}
	if cfg.BodyGrace <= 0 {
		cfg.BodyGrace = DefaultBodyGrace
	}
	if cfg.BodyTimeout <= 0 {
		cfg.BodyTimeout = DefaultBodyTimeout
	}
	s := &Server{cfg: cfg, sources: map[string]*Source{}, mux: http.NewServeMux(), log: cfg.Logger, failLog: lograte.Limiter{Every: failLogEvery}}
	var largest int64
	for i := range cfg.Sources {
		src := cfg.Sources[i]
		if src.MaxBodyBytes <= 0 {
			src.MaxBodyBytes = cfg.MaxBodyBytes
		}
		src.credentials = verify.CredentialHeaders(src.Verifier)
		src.signatures = verify.SignatureHeaders(src.Verifier)
		largest = max(largest, src.MaxBodyBytes)
		s.sources[src.Name] = &src
		for _, name := range slices.Concat(src.credentials, src.signatures) {
			if !slices.Contains(s.anyCredentials, name) {
				s.anyCredentials = append(s.anyCredentials, name)
			}
		}
	}
	s.cfg.MaxInflightBodyBytes = max(s.cfg.MaxInflightBodyBytes, 2*largest+requestReserve)
	s.budget = newByteBudget(s.cfg.MaxInflightBodyBytes, largest)
	s.mux.HandleFunc("POST /webhooks/{source}", s.receive)
	s.mux.HandleFunc("/webhooks/{source}", s.wrongMethod)
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.HandleFunc("GET /readyz", s.readyz)
	// A body sent here is left unread: ServeHTTP serves every path but a
	// webhook's through CloseUnreadBodies.
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint")
	})
	s.unread = CloseUnreadBodies(s.mux)
	return s
}

// Handle registers an extra route on the server's mux (admin API, metrics).
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// ServeHTTP implements http.Handler. A request with a body to any path
// but /webhooks/{source} (the 404 catch-all, net/http's redirect to a
// clean path or to a subtree's "/", the admin API, the console, the
// health endpoints) is served through CloseUnreadBodies: a reply written
// before its body was read to the end is the connection's last, and is
// not held back until the body comes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength != 0 && !receivePath(r.URL.EscapedPath()) {
		s.unread.ServeHTTP(w, r)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// writeReceipt answers 202 with {"id":N,"duplicate":BOOL}, built by hand:
// it is the reply to every stored delivery.
func writeReceipt(w http.ResponseWriter, rc hookbox.Receipt) {
	b := make([]byte, 0, 48)
	b = append(b, `{"id":`...)
	b = strconv.AppendInt(b, rc.ID, 10)
	b = append(b, `,"duplicate":`...)
	b = strconv.AppendBool(b, rc.Duplicate)
	b = append(b, "}\n"...)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusAccepted)
	w.Write(b)
}

func (s *Server) receive(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	name := r.PathValue("source")
	ctx, span := r.Context(), trace.Span(noop.Span{})
	raw := w // http.MaxBytesReader needs net/http's own writer to close the connection
	src, ok := s.sources[name]
	if tracing.On() {
		// A configured name, or "" as in the metrics: any other is the
		// sender's to choose, control characters and all, and as many as
		// it likes.
		known := ""
		if ok {
			known = name
		}
		ctx, span = tracing.Start(ctx, "receive", trace.WithNewRoot(), trace.WithLinks(tracing.Link(r.Header)...),
			trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(tracing.AttrSource.String(known)))
		sw := &statusWriter{ResponseWriter: w}
		w = sw
		defer sw.endSpan(span)
	}
	if !ok {
		s.unknownSource(w, r, name)
		return
	}
	// What the headers alone can refuse is refused before the body is
	// read, and the connection closed rather than drained.
	if len(src.AllowIPs) > 0 && !s.allowed(r, src.AllowIPs) {
		s.rejectUnread(w, r, start, name, http.StatusForbidden, "this source does not accept deliveries from your address")
		return
	}
	if n := headerLines(r.Header); n > MaxHeaderLines {
		s.rejectUnread(w, r, start, name, http.StatusRequestHeaderFieldsTooLarge,
			strconv.Itoa(n)+" header lines; at most "+strconv.Itoa(MaxHeaderLines)+" are accepted")
		return
	}
	if r.ContentLength > src.MaxBodyBytes {
		s.rejectUnread(w, r, start, name, http.StatusRequestEntityTooLarge, "body larger than "+strconv.FormatInt(src.MaxBodyBytes, 10)+" bytes")
		return
	}
	if !hookbox.IdentityEncoded(r.Header) {
		w.Header().Set("Accept-Encoding", "identity")
		s.rejectUnread(w, r, start, name, http.StatusUnsupportedMediaType, "a compressed body (Content-Encoding) is not supported: send it uncompressed")
		return
	}
	now := time.Now()
	vr := verify.Request{Header: r.Header, Now: now}
	if err := src.Verifier.CheckHeader(vr); err != nil {
		s.rejectUnread(w, r, start, name, http.StatusUnauthorized, err.Error())
		return
	}
	client := s.clientKey(r)
	body, held, err := s.readBody(raw, r, client, src.MaxBodyBytes)
	// The reply gets its time from the end of the body, however long
	// the body took: an http.Server's WriteTimeout runs from the
	// request's headers, and a body may take as long as it
	// (service.HTTPServer: 60 s each), so a delivery stored after a slow
	// body was never told. What is left is bounded (replyTime). A writer
	// that has no deadline (a test's recorder) is left as it is.
	_ = http.NewResponseController(raw).SetWriteDeadline(time.Now().Add(s.replyTime()))
	if err == nil {
		// The body is in: from here on the delivery waits on hookbox
		// (the verification, the store), no longer on its sender, and
		// what it holds besides its body is counted too (requestCost).
		if cost := requestCost(r); s.budget.take(client, cost) {
			held += cost
		} else {
			err = errBusy
		}
	}
	// The bytes are held until the reply, or until Ingest lets go of the
	// delivery if later: a sender that leaves (or a StoreWait that passes)
	// ends the wait for the commit, not the delivery queued for it.
	hold := s.holdBody(client, held)
	defer hold.Release()
	if err != nil {
		var tooLarge *http.MaxBytesError
		switch {
		case errors.Is(err, errBusy):
			// A line a minute at most: a client over its share can send
			// many of these for little.
			s.rejectLog.Log(r.Context(), s.log, slog.LevelWarn, "\x00busy", "delivery refused: body bytes in flight at the limit, or this client's share of it", func() []slog.Attr {
				return []slog.Attr{slog.String("source", name), slog.Int64("limit", s.cfg.MaxInflightBodyBytes),
					slog.Int64("content_length", r.ContentLength), slog.String("client", client.String())}
			})
			w.Header().Set("Connection", "close")
			s.unavailable(w, name, "too many deliveries in flight; retry later")
		case isTimeout(err):
			w.Header().Set("Connection", "close") // its deadline has passed: nothing more is read
			s.reject(w, r, start, name, http.StatusRequestTimeout, s.tooSlow(), nil)
		case errors.As(err, &tooLarge):
			s.reject(w, r, start, name, http.StatusRequestEntityTooLarge, "body larger than "+strconv.FormatInt(src.MaxBodyBytes, 10)+" bytes", nil)
		default:
			s.reject(w, r, start, name, http.StatusBadRequest, "could not read body", nil)
		}
		return
	}
	vr.Body = body
	_, vspan := tracing.Start(ctx, "verify")
	res, err := src.Verifier.Verify(vr)
	tracing.EndSpan(vspan, err) // verify's errors hold no secret: they are replies
	if err != nil {
		status := http.StatusUnauthorized
		if errors.Is(err, verify.ErrMalformed) {
			status = http.StatusBadRequest
		}
		s.reject(w, r, start, name, status, err.Error(), body)
		return
	}
	if res.Reply != nil {
		writeHandshake(w, res.Reply)
		// At debug: a signed handshake can be replayed within its
		// tolerance; the minute's summary line counts them.
		s.log.Debug("handshake answered", "source", name, "status", res.Reply.Status)
		s.observe(name, "handshake", time.Time{})
		return
	}
	if len(res.DeliveryID) > hookbox.MaxIDLength {
		s.reject(w, r, start, name, http.StatusBadRequest, "delivery id longer than "+strconv.Itoa(hookbox.MaxIDLength)+" bytes", body)
		return
	}
	if len(res.EventType) > hookbox.MaxIDLength {
		s.reject(w, r, start, name, http.StatusBadRequest, "event type longer than "+strconv.Itoa(hookbox.MaxIDLength)+" bytes", body)
		return
	}
	if !storable(res.DeliveryID) || !storable(res.EventType) {
		s.reject(w, r, start, name, http.StatusBadRequest, "delivery id or event type is not valid UTF-8 text", body)
		return
	}
	// An id with a control character could never be forwarded (it goes in
	// a header); the rule is hookbox.CheckReceivable's, which a re-check
	// of the rejected log applies too.
	if problem, _ := hookbox.NotReceived(res.DeliveryID, res.EventType); problem != "" {
		s.reject(w, r, start, name, http.StatusBadRequest, problem, body)
		return
	}
	if res.Nonce != "" && s.cfg.UseNonce != nil && !s.useNonce(ctx, w, r, start, name, now, res, body) {
		return
	}
	d := hookbox.Delivery{
		Source:     name,
		DeliveryID: res.DeliveryID,
		IDIsHash:   res.IDIsHash,
		EventType:  res.EventType,
		Header:     keptHeader(r.Header, src.credentials),
		Payload:    body,
		ReceivedAt: now,
	}
	sctx, sspan := tracing.Start(ctx, "store")
	sctx, cancel := context.WithTimeout(groupcommit.WithHold(sctx, hold), s.cfg.StoreWait)
	var stored time.Time // read only when observed: a clock read costs 0.2 µs here
	if s.cfg.ObserveStore != nil {
		stored = time.Now()
	}
	rc, err := s.cfg.Ingest(sctx, d)
	cancel()
	if err == nil && s.cfg.ObserveStore != nil {
		s.cfg.ObserveStore(time.Since(stored))
	}
	if err == nil && span.IsRecording() {
		span.SetAttributes(tracing.AttrDeliveryID.String(logText(d.DeliveryID)), tracing.AttrEventID.Int64(rc.ID), tracing.AttrDuplicate.Bool(rc.Duplicate))
	}
	tracing.EndSpan(sspan, err)
	if err != nil {
		if r.Context().Err() != nil {
			// The client left, or net/http thinks so (a client that
			// closed its side after sending, a read deadline passing in
			// its watch for that): 503 all the same, for a client still
			// reading. A handler that wrote nothing would make net/http
			// answer 200 for a delivery that may not be stored.
			s.unavailable(w, name, "the request ended before the delivery was stored; retry")
			return
		}
		if errors.Is(err, hookbox.ErrBadDelivery) {
			// The store refuses this delivery alone (an id too long, a value
			// the database rejects): retrying cannot help.
			s.reject(w, r, start, name, http.StatusBadRequest, "the delivery cannot be stored as sent", body)
			return
		}
		s.failLog.Log(r.Context(), s.log, slog.LevelError, "store", "store delivery", func() []slog.Attr {
			return []slog.Attr{slog.String("source", name), slog.String("delivery_id", logText(d.DeliveryID)), slog.Any("err", err)}
		})
		s.unavailable(w, name, "cannot store the delivery right now; retry later")
		return
	}
	s.failLog.LogCleared(r.Context(), s.log, "store", "store delivery: the store answers again")
	// At debug only: a line per delivery costs about 11 µs of CPU, 5 to
	// 15% of storing it; serve logs a summary a minute at info instead.
	s.log.LogAttrs(r.Context(), slog.LevelDebug, "delivery", slog.String("source", name),
		slog.String("delivery_id", logText(d.DeliveryID)), slog.Int64("event_id", rc.ID), slog.Bool("duplicate", rc.Duplicate),
		slog.String("type", logText(d.EventType)), slog.Int("bytes", len(body)))
	writeReceipt(w, rc)
	outcome := "new"
	if rc.Duplicate {
		outcome = "duplicate"
	}
	s.observe(name, outcome, start)
}

// nonceTimeout bounds the write that remembers a nonce.
const nonceTimeout = 10 * time.Second

// replyTime is the time a delivery's reply has once its body is in: the
// nonce's write and the wait for the store at most, and writeReply to
// write the reply.
func (s *Server) replyTime() time.Duration {
	return nonceTimeout + s.cfg.StoreWait + writeReply
}

// writeReply is the time writing a reply may take.
const writeReply = 10 * time.Second

// useNonce remembers the nonce of a verified delivery with its body and
// reports true, or answers the delivery and reports false: 401 when the
// nonce came before with another body (a replay of a captured signature),
// 503 when it cannot be remembered. now is when the signature was judged,
// before the body was read: the store keeps nonces hookbox.NonceKeep past
// their signed time, which leaves any body time to arrive.
func (s *Server) useNonce(ctx context.Context, w http.ResponseWriter, r *http.Request, start time.Time, source string, now time.Time, res verify.Result, body []byte) bool {
	sum := sha256.Sum256(body)
	ctx, cancel := context.WithTimeout(ctx, nonceTimeout)
	defer cancel()
	ok, err := s.cfg.UseNonce(ctx, hookbox.Nonce{Source: source, Value: res.Nonce, BodySHA256: sum[:], Signed: res.NonceSigned, Now: now})
	switch {
	case err != nil:
		s.failLog.Log(r.Context(), s.log, slog.LevelError, "nonce", "remember the signed token", func() []slog.Attr {
			return []slog.Attr{slog.String("source", source), slog.String("delivery_id", logText(res.DeliveryID)), slog.Any("err", err)}
		})
		s.unavailable(w, source, "cannot check the delivery right now; retry later")
		return false
	case !ok:
		s.reject(w, r, start, source, http.StatusUnauthorized, hookbox.ReplayReason, body)
		return false
	}
	s.failLog.LogCleared(r.Context(), s.log, "nonce", "remember the signed token: the store answers again")
	return true
}

// statusWriter remembers the status of a reply, for the receive span.
type statusWriter struct {
	http.ResponseWriter
	status int
}

// Unwrap lets http.ResponseController reach net/http's writer (read
// deadlines, see bodyReader).
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// endSpan records the reply's status on span and ends it; a 5xx is an
// error (the sender will retry), a 4xx is the sender's.
func (w *statusWriter) endSpan(span trace.Span) {
	span.SetAttributes(tracing.AttrStatus.Int(w.status))
	if w.status >= 500 {
		span.SetStatus(codes.Error, http.StatusText(w.status))
	}
	span.End()
}

// unavailable answers 503 with Retry-After: the sender should try again.
func (s *Server) unavailable(w http.ResponseWriter, source, msg string) {
	w.Header().Set("Retry-After", strconv.Itoa(int(s.cfg.RetryAfter.Seconds())))
	writeError(w, http.StatusServiceUnavailable, msg)
	s.observe(source, "unavailable", time.Time{})
}

// tooSlow is the reason given to a sender whose body fell behind.
func (s *Server) tooSlow() string {
	return "body not received in time: send at least " + strconv.FormatInt(s.cfg.MinBodyRate, 10) +
		" bytes a second after the first " + s.cfg.BodyGrace.String() + ", all of it within " + s.cfg.BodyTimeout.String()
}

// rejectUnread refuses a request whose body has not been read, on a
// connection closed after the reply (closeUnread).
func (s *Server) rejectUnread(w http.ResponseWriter, r *http.Request, at time.Time, source string, status int, reason string) {
	closeUnread(w, r)
	s.reject(w, r, at, source, status, reason, nil)
}

// unreadBodyWindow is how long net/http may wait for the rest of a body
// it reads after the reply (closeUnread): a sender sending it arrives
// well within it; one withholding it is cut off at its end.
const unreadBodyWindow = time.Second

// closeUnread marks a reply to a request whose body is not read (in full)
// as the connection's last. net/http still reads up to 256 KiB of what is
// left of the body after the reply (so that the client, still sending,
// sees the reply rather than a reset), and that read is given
// unreadBodyWindow rather than the whole read timeout.
func closeUnread(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Connection", "close")
	if r.ContentLength != 0 {
		http.NewResponseController(w).SetReadDeadline(time.Now().Add(unreadBodyWindow))
	}
}

// reject refuses a delivery to a configured source received at at, and
// records it in the rejection log; body is the whole body when it was
// read, else nil.
func (s *Server) reject(w http.ResponseWriter, r *http.Request, at time.Time, source string, status int, reason string, body []byte) {
	s.logRejected(r.Context(), source, func() []slog.Attr {
		return []slog.Attr{slog.String("source", source), slog.Int("status", status), slog.String("reason", reason)}
	})
	writeError(w, status, reason)
	if status != http.StatusForbidden && s.cfg.Rejections != nil && s.cfg.Rejections.Allow(source, true) {
		s.record(r, at, source, false, status, reason, body, body != nil)
	}
	outcome := "malformed"
	switch status {
	case http.StatusUnauthorized:
		outcome = "bad_signature"
	case http.StatusForbidden:
		outcome = "forbidden"
	case http.StatusRequestEntityTooLarge, http.StatusRequestHeaderFieldsTooLarge:
		outcome = "too_large"
	case http.StatusRequestTimeout:
		outcome = "too_slow"
	}
	s.observe(source, outcome, time.Time{})
}

// observe reports a delivery's outcome to Config.Observe; a zero start
// reports no duration.
func (s *Server) observe(source, outcome string, start time.Time) {
	if s.cfg.Observe == nil {
		return
	}
	var took time.Duration
	if !start.IsZero() {
		took = time.Since(start)
	}
	s.cfg.Observe(source, outcome, took)
}

func (s *Server) wrongMethod(w http.ResponseWriter, r *http.Request) {
	closeUnread(w, r)
	w.Header().Set("Allow", http.MethodPost)
	writeError(w, http.StatusMethodNotAllowed, "use POST")
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Ready != nil {
		if err := s.checkReady(r.Context()); err != nil {
			if r.Context().Err() != nil && errors.Is(err, r.Context().Err()) {
				// The client left while it waited for another request's
				// check: that says nothing of the store, and a line
				// "not ready" (then "ready again") would be any
				// client's to write.
				return
			}
			s.failLog.Log(r.Context(), s.log, slog.LevelWarn, "readyz", "not ready", func() []slog.Attr {
				return []slog.Attr{slog.Any("err", err)}
			})
			msg := "store unreachable"
			switch {
			case errors.Is(err, hookbox.ErrReadOnly):
				msg = "the database is read-only (a standby after a failover, or default_transaction_read_only): deliveries are answered 503 until it is writable"
			case errors.Is(err, hookbox.ErrTooManyConnections):
				msg = "the database refuses more connections (max_connections, or a connection limit of hookbox's role or database, is reached): deliveries are answered 503 until it has one free"
			case errors.Is(err, ErrCommitsFailing):
				msg = "the store cannot commit deliveries (see the log)"
			}
			writeError(w, http.StatusServiceUnavailable, msg)
			return
		}
		s.failLog.LogCleared(r.Context(), s.log, "readyz", "ready again")
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// checkReady is Config.Ready. A failure is answered again for
// readyCache, and while another request checks whether it has passed: a
// flood of /readyz against a failing store costs one check a second.
// Requests that come while a check runs after a pass wait for that
// check, so a flood of /readyz against a store that answers runs one
// check at a time: on SQLite each check takes the one connection that
// ingest's group commit writes through, and a check per request queued
// as many callers for it as there were requests.
//
// The check runs apart from the request that started it, within 2 s, so
// that a client going away does not cut short what the others wait for.
func (s *Server) checkReady(ctx context.Context) error {
	rd := &s.ready
	rd.mu.Lock()
	if rd.err != nil && (rd.cur != nil || time.Since(rd.at) < readyCache) {
		err := rd.err
		rd.mu.Unlock()
		return err
	}
	if c := rd.cur; c != nil {
		rd.waiting++
		rd.mu.Unlock()
		defer func() {
			rd.mu.Lock()
			rd.waiting--
			rd.mu.Unlock()
		}()
		select {
		case <-c.done:
			return c.err
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	c := &readyCheck{done: make(chan struct{})}
	rd.cur = c
	rd.mu.Unlock()
	defer func() { // also if Ready panics
		rd.mu.Lock()
		rd.cur = nil
		rd.at, rd.err = time.Now(), c.err
		rd.mu.Unlock()
		close(c.done)
	}()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 2*time.Second)
	defer cancel()
	c.err = errReadyPanicked // what waiters see if Ready panics
	c.err = s.cfg.Ready(cctx)
	return c.err
}

// errReadyPanicked is the result of a check whose Ready panicked.
var errReadyPanicked = errors.New("the readiness check panicked")

// ErrCommitsFailing is what Config.Ready wraps when the store answers but
// its last commits failed: /readyz then says so rather than that the store
// is unreachable.
var ErrCommitsFailing = errors.New("the last ingest commit failed")

// maxLoggedText is how much of a delivery id or event type a log line
// shows: enough to find it, not enough to flood the log.
const maxLoggedText = 64

// logText returns s cut to maxLoggedText bytes (on a rune boundary), with
// its full length noted when it was cut.
func logText(s string) string {
	if len(s) <= maxLoggedText {
		return s
	}
	cut := maxLoggedText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…(" + strconv.Itoa(len(s)) + " bytes)"
}

// storable reports whether s can be stored as text in every store
// (hookbox.StorableText: the rule a re-check applies too).
func storable(s string) bool { return hookbox.StorableText(s) }

// hiddenHeaders are not stored: hop-by-hop headers and credentials meant for
// hookbox or a proxy in front of it, not for the app behind it.
var hiddenHeaders = map[string]bool{
	"Authorization": true, "Proxy-Authorization": true, "Cookie": true,
	"Connection": true, "Keep-Alive": true, "Te": true, "Trailer": true,
	"Transfer-Encoding": true, "Upgrade": true, "Content-Length": true,
	"Accept-Encoding": true,
}

// KeptHeader returns the request headers worth storing for forwarding and
// inspection: not hop-by-hop ones, and not those the sender named in
// Connection (hop-by-hop by its own say, and a way to slip routing headers
// past a proxy).
func KeptHeader(h http.Header) http.Header { return keptHeader(h, nil) }

// keptHeader is KeptHeader that also leaves out the headers named in
// credentials (canonical keys).
func keptHeader(h http.Header, credentials []string) http.Header {
	var named map[string]bool
	for _, v := range h["Connection"] {
		for _, name := range strings.Split(v, ",") {
			if name = strings.TrimSpace(name); name != "" {
				if named == nil {
					named = map[string]bool{}
				}
				named[http.CanonicalHeaderKey(name)] = true
			}
		}
	}
	out := make(http.Header, len(h))
	for k, v := range h {
		if !hiddenHeaders[k] && !named[k] && !slices.Contains(credentials, k) {
			out[k] = v
		}
	}
	return out
}

// writeHandshake writes a verifier's handshake reply.
func writeHandshake(w http.ResponseWriter, r *verify.Reply) {
	if r.ContentType != "" {
		w.Header().Set("Content-Type", r.ContentType)
	}
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(r.Status)
	w.Write(r.Body)
}

// writeJSON answers status with v as JSON. What does not print in its
// strings (text from senders and apps: ids, types, headers, errors) is
// written as \u escapes, which decode to the same text but cannot drive
// the terminal of an operator reading the reply (printable.JSON).
func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encode reply"}`)
	}
	b = printable.JSON(b)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

// logRejected logs a refused delivery: at info once a minute per source
// (key; "" for unknown names), saying how many were held back, and at
// debug otherwise (lograte).
func (s *Server) logRejected(ctx context.Context, key string, attrs func() []slog.Attr) {
	s.rejectLog.Log(ctx, s.log, slog.LevelInfo, key, "delivery rejected", attrs)
}

// writeError answers status with {"error": msg}. A struct, not a map: it
// is what every refused delivery of a flood costs.
func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, errorReply{msg})
}

// errorReply is the body of every error answer.
type errorReply struct {
	Error string `json:"error"`
}

// unknownSource refuses a delivery to a name no source has (404), logs it
// and records it with the first bytes of its body, read only when the
// rejection log's rate limit admits it and within the body budget.
func (s *Server) unknownSource(w http.ResponseWriter, r *http.Request, name string) {
	at := time.Now()
	s.logRejected(r.Context(), "", func() []slog.Attr {
		return []slog.Attr{slog.String("unknown_source", logText(name)), slog.Int("status", http.StatusNotFound),
			slog.String("remote", r.RemoteAddr)}
	})
	s.observe("", "unknown_source", time.Time{})
	rl := s.cfg.Rejections
	if rl == nil || !rl.Allow(name, false) {
		closeUnread(w, r)
		writeError(w, http.StatusNotFound, "unknown source")
		return
	}
	var body []byte
	complete := false
	keep := int64(rl.MaxBodyBytes())
	// As for a delivery, the budget is taken only once a byte has come,
	// and the read keeps the sender's pace.
	in, client := s.newBodyReader(w, r.Body), s.clientKey(r)
	switch err := in.awaitFirst(); {
	case err == io.EOF:
		body, complete = []byte{}, r.ContentLength <= 0
	case err != nil:
	case s.budget.take(client, keep+1):
		body, err = io.ReadAll(io.LimitReader(io.MultiReader(bytes.NewReader(in.first[:]), in), keep+1))
		s.budget.release(client, keep+1)
		complete = err == nil && int64(len(body)) <= keep && (r.ContentLength < 0 || int64(len(body)) == r.ContentLength)
		body = body[:min(int64(len(body)), keep)]
	}
	in.done(complete) // else net/http's read of the rest ends with the sender's time
	if !complete {
		w.Header().Set("Connection", "close")
	}
	writeError(w, http.StatusNotFound, "unknown source")
	s.record(r, at, name, true, http.StatusNotFound, "unknown source", body, complete)
}

// record hands a rejection to the rejection log, received at at (what a
// re-check judges signed timestamps against). body, when not nil, is the
// body as read: all of it when complete. The headers that carry a
// configured source's secret itself (a token) are kept only when the log
// keeps the whole body and those headers as sent, as only then can a
// re-check verify them: a delivery refused on its headers alone, or cut,
// or with a token the log would cut, would leave the sender's real token
// in the log for nothing. Those kept are listed in the row
// (rejected.MarkCredentials), so that every view masks them, and so is a
// signature header whose name the configuration chose (an hmac source's
// X-Sig): a sender set up wrong may send the secret itself there, and a
// view without the configuration would not know the name to mask.
func (s *Server) record(r *http.Request, at time.Time, source string, unknown bool, status int, reason string, body []byte, complete bool) {
	size := r.ContentLength
	if complete {
		size = int64(len(body))
	}
	header := KeptHeader(r.Header)
	// The headers the sender named in Connection are not kept, but ingest
	// verified them: a re-check of the rest must not admit the delivery.
	dropped := 0
	for k := range r.Header {
		if _, kept := header[k]; !kept && !hiddenHeaders[k] {
			dropped++
		}
	}
	if src, ok := s.sources[source]; ok && !unknown {
		marked := src.signatures
		if len(src.credentials) > 0 {
			if !complete || len(body) > s.cfg.Rejections.MaxBodyBytes() || !rejected.KeptAsSent(r.Header, src.credentials) {
				header = keptHeader(r.Header, src.credentials)
			} else {
				marked = append(slices.Clip(marked), src.credentials...)
			}
		}
		header = rejected.MarkCredentials(header, marked)
	} else if unknown {
		header = rejected.MarkCredentials(header, s.anyCredentials)
	}
	header = rejected.MarkDropped(header, dropped)
	remote := r.RemoteAddr
	if addr, ok := clientAddr(r, s.cfg.TrustedProxies); ok {
		remote = addr.String()
	}
	s.cfg.Rejections.Record(hookbox.Rejection{
		Source: source, UnknownSource: unknown, ReceivedAt: at, RemoteAddr: remote,
		Status: status, Reason: reason, Header: header,
		BodySize: size, Body: body, BodyComplete: complete,
	})
}
