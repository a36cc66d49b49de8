package faults

import (
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"time"
)

// Sink is a forward target that records every Idempotency-Key it accepts.
// It can refuse a fraction of requests (with 503) so that retries are
// exercised, and it checks each body with Check when set.
type Sink struct {
	// URL is the base URL; forward to URL + "/" + source.
	URL string

	srv      *httptest.Server
	failRate float64
	check    func(key string, body []byte) error

	mu       sync.Mutex
	accepted map[string]int // key → 2xx answers
	first    map[string]Forwarded
	refused  int
	problems []string
}

// Forwarded is the first accepted request of one key.
type Forwarded struct {
	At      time.Time
	EventID string // Hookbox-Event-Id: the row id at the sender
	Attempt string // Hookbox-Attempt
}

// SinkOptions configure a Sink.
type SinkOptions struct {
	// FailRate is the fraction of requests answered 503 (0 to 1).
	FailRate float64
	// Check, if set, judges each accepted request's key and body; an error
	// is recorded as a problem (and the request still answered 200, so the
	// problem is not hidden by a retry).
	Check func(key string, body []byte) error
}

// NewSink starts a Sink on a loopback port.
func NewSink(opts SinkOptions) *Sink {
	s := &Sink{failRate: opts.FailRate, check: opts.Check, accepted: map[string]int{}, first: map[string]Forwarded{}}
	s.srv = httptest.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.srv.URL
	return s
}

func (s *Sink) serve(w http.ResponseWriter, r *http.Request) {
	key := r.Header.Get("Idempotency-Key")
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, "read body", http.StatusBadRequest)
		return
	}
	if s.failRate > 0 && rand.Float64() < s.failRate {
		s.mu.Lock()
		s.refused++
		s.mu.Unlock()
		http.Error(w, "refused on purpose", http.StatusServiceUnavailable)
		return
	}
	var problem error
	switch {
	case r.Method != http.MethodPost:
		problem = fmt.Errorf("method %s", r.Method)
	case key == "":
		problem = fmt.Errorf("request to %s without Idempotency-Key", r.URL.Path)
	case s.check != nil:
		problem = s.check(key, body)
	}
	s.mu.Lock()
	if problem != nil {
		s.problems = append(s.problems, problem.Error())
	}
	if key != "" {
		s.accepted[key]++
		if s.accepted[key] == 1 {
			s.first[key] = Forwarded{At: time.Now(), EventID: r.Header.Get("Hookbox-Event-Id"), Attempt: r.Header.Get("Hookbox-Attempt")}
		}
	}
	s.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

// SinkStats summarises what a Sink saw.
type SinkStats struct {
	Distinct   int // keys accepted at least once
	Accepted   int // 2xx answers in all
	Duplicates int // Accepted - Distinct: repeats of a key already accepted
	Refused    int // requests answered 503 on purpose
}

// Stats returns the counts so far.
func (s *Sink) Stats() SinkStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := SinkStats{Distinct: len(s.accepted), Refused: s.refused}
	for _, n := range s.accepted {
		st.Accepted += n
	}
	st.Duplicates = st.Accepted - st.Distinct
	return st
}

// Seen reports whether key was accepted at least once.
func (s *Sink) Seen(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.accepted[key] > 0
}

// Missing returns the keys among want that were never accepted, sorted.
func (s *Sink) Missing(want map[string]bool) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k := range want {
		if s.accepted[k] == 0 {
			out = append(out, k)
		}
	}
	sort.Strings(out)
	return out
}

// Keys returns a copy of the accepted keys with their counts.
func (s *Sink) Keys() map[string]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int, len(s.accepted))
	for k, n := range s.accepted {
		out[k] = n
	}
	return out
}

// First returns the first accepted request of key.
func (s *Sink) First(key string) (Forwarded, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f, ok := s.first[key]
	return f, ok
}

// Problems returns what Check and the basic checks objected to.
func (s *Sink) Problems() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.problems...)
}

// Close stops the sink.
func (s *Sink) Close() { s.srv.Close() }
