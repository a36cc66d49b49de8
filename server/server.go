// Package server is hookbox's HTTP front door: POST /webhooks/{source}, the
// health endpoints, and (later) the admin API and metrics.
//
// Guarantees of the receiving endpoint:
//   - 202 is written only after the delivery's row is committed (the Ingest
//     function returned a receipt); a duplicate is a 202 too.
//   - A store that cannot commit yields 503 with Retry-After, never 2xx.
//   - Bad input yields 400/401/404/405/413 and stores nothing.
//   - Replies and logs never contain a secret or an expected signature.
package server

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/verify"
)

// IngestFunc stores one delivery and returns its receipt once committed.
type IngestFunc func(ctx context.Context, d hookbox.Delivery) (hookbox.Receipt, error)

// Source is one sender the server accepts deliveries from.
type Source struct {
	Name         string
	Verifier     verify.Verifier
	MaxBodyBytes int64 // 0 means Config.MaxBodyBytes
}

// Config is what the server needs to run.
type Config struct {
	Sources      []Source
	Ingest       IngestFunc
	Ready        func(ctx context.Context) error // store reachability, for /readyz
	MaxBodyBytes int64                           // default 1 MiB
	RetryAfter   time.Duration                   // sent with 503; default 5s
	Logger       *slog.Logger
	// Observe, if set, is told how each delivery ended: outcome is "new",
	// "duplicate" or why it was refused ("bad_signature", "malformed",
	// "too_large", "unknown_source", "unavailable"); source is "" when
	// unknown; took runs from receipt to reply (0 for a refusal).
	Observe func(source, outcome string, took time.Duration)
}

// Server routes requests; it is an http.Handler.
type Server struct {
	cfg     Config
	sources map[string]*Source
	mux     *http.ServeMux
	log     *slog.Logger
}

// New builds a Server.
func New(cfg Config) *Server {
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 1 << 20
	}
	if cfg.RetryAfter <= 0 {
		cfg.RetryAfter = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s := &Server{cfg: cfg, sources: map[string]*Source{}, mux: http.NewServeMux(), log: cfg.Logger}
	for i := range cfg.Sources {
		src := cfg.Sources[i]
		if src.MaxBodyBytes <= 0 {
			src.MaxBodyBytes = cfg.MaxBodyBytes
		}
		s.sources[src.Name] = &src
	}
	s.mux.HandleFunc("POST /webhooks/{source}", s.receive)
	s.mux.HandleFunc("/webhooks/{source}", s.wrongMethod)
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.HandleFunc("GET /readyz", s.readyz)
	s.mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint")
	})
	return s
}

// Handle registers an extra route on the server's mux (admin API, metrics).
func (s *Server) Handle(pattern string, h http.Handler) { s.mux.Handle(pattern, h) }

// ServeHTTP implements http.Handler.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) { s.mux.ServeHTTP(w, r) }

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
	src, ok := s.sources[name]
	if !ok {
		writeError(w, http.StatusNotFound, "unknown source")
		s.observe("", "unknown_source", time.Time{})
		return
	}
	if r.ContentLength > src.MaxBodyBytes {
		s.reject(w, name, http.StatusRequestEntityTooLarge, "body larger than "+strconv.FormatInt(src.MaxBodyBytes, 10)+" bytes")
		return
	}
	body, err := readBody(w, r, src.MaxBodyBytes)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			s.reject(w, name, http.StatusRequestEntityTooLarge, "body larger than "+strconv.FormatInt(src.MaxBodyBytes, 10)+" bytes")
			return
		}
		s.reject(w, name, http.StatusBadRequest, "could not read body")
		return
	}
	now := time.Now()
	res, err := src.Verifier.Verify(verify.Request{Header: r.Header, Body: body, Now: now})
	if err != nil {
		status := http.StatusUnauthorized
		if errors.Is(err, verify.ErrMalformed) {
			status = http.StatusBadRequest
		}
		s.reject(w, name, status, err.Error())
		return
	}
	if !storable(res.DeliveryID) || !storable(res.EventType) {
		s.reject(w, name, http.StatusBadRequest, "delivery id or event type is not valid UTF-8 text")
		return
	}
	d := hookbox.Delivery{
		Source:     name,
		DeliveryID: res.DeliveryID,
		IDIsHash:   res.IDIsHash,
		EventType:  res.EventType,
		Header:     KeptHeader(r.Header),
		Payload:    body,
		ReceivedAt: now,
	}
	rc, err := s.cfg.Ingest(r.Context(), d)
	if err != nil {
		if r.Context().Err() != nil {
			return // the client left; it will retry
		}
		if errors.Is(err, hookbox.ErrBadDelivery) {
			// The store refuses this delivery alone (an id too long, a value
			// the database rejects): retrying cannot help.
			s.reject(w, name, http.StatusBadRequest, "the delivery cannot be stored as sent")
			return
		}
		s.log.Error("store delivery", "source", name, "delivery_id", d.DeliveryID, "err", err)
		w.Header().Set("Retry-After", strconv.Itoa(int(s.cfg.RetryAfter.Seconds())))
		writeError(w, http.StatusServiceUnavailable, "cannot store the delivery right now; retry later")
		s.observe(name, "unavailable", time.Time{})
		return
	}
	s.log.LogAttrs(r.Context(), slog.LevelInfo, "delivery", slog.String("source", name),
		slog.String("delivery_id", d.DeliveryID), slog.Int64("event_id", rc.ID), slog.Bool("duplicate", rc.Duplicate),
		slog.String("type", d.EventType), slog.Int("bytes", len(body)))
	writeReceipt(w, rc)
	outcome := "new"
	if rc.Duplicate {
		outcome = "duplicate"
	}
	s.observe(name, outcome, start)
}

func (s *Server) reject(w http.ResponseWriter, source string, status int, reason string) {
	s.log.Info("delivery rejected", "source", source, "status", status, "reason", reason)
	writeError(w, status, reason)
	outcome := "malformed"
	switch status {
	case http.StatusUnauthorized:
		outcome = "bad_signature"
	case http.StatusRequestEntityTooLarge:
		outcome = "too_large"
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
	w.Header().Set("Allow", http.MethodPost)
	writeError(w, http.StatusMethodNotAllowed, "use POST")
}

func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Ready != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := s.cfg.Ready(ctx); err != nil {
			s.log.Warn("not ready", "err", err)
			writeError(w, http.StatusServiceUnavailable, "store unreachable")
			return
		}
	}
	writeJSON(w, http.StatusOK, map[string]string{"status": "ready"})
}

// readBody reads at most limit bytes; a larger body yields
// *http.MaxBytesError. The buffer grows with the bytes that actually arrive:
// sizing it from the client's Content-Length would let idle connections
// that only announce large bodies reserve memory.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	rd := http.MaxBytesReader(w, r.Body, limit)
	var buf bytes.Buffer
	buf.Grow(int(min(max(r.ContentLength, 0), 64<<10)))
	if _, err := buf.ReadFrom(rd); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// storable reports whether s can be stored as text in every store: valid
// UTF-8 without NUL bytes (PostgreSQL text refuses both).
func storable(s string) bool {
	return utf8.ValidString(s) && !strings.ContainsRune(s, 0)
}

// hiddenHeaders are not stored: hop-by-hop headers and credentials meant for
// hookbox or a proxy in front of it, not for the app behind it.
var hiddenHeaders = map[string]bool{
	"Authorization": true, "Proxy-Authorization": true, "Cookie": true,
	"Connection": true, "Keep-Alive": true, "Te": true, "Trailer": true,
	"Transfer-Encoding": true, "Upgrade": true, "Content-Length": true,
	"Accept-Encoding": true,
}

// KeptHeader returns the request headers worth storing for forwarding and
// inspection.
func KeptHeader(h http.Header) http.Header {
	out := make(http.Header, len(h))
	for k, v := range h {
		if !hiddenHeaders[k] {
			out[k] = v
		}
	}
	return out
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(`{"error":"encode reply"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(append(b, '\n'))
}

func writeError(w http.ResponseWriter, status int, msg string) {
	writeJSON(w, status, map[string]string{"error": msg})
}
