// Package lograte spaces out log lines whose number a sender chooses
// (refused deliveries, refused admin and console requests): a flood of bad
// requests must not become a flood of log lines, each of which costs CPU
// on the request's path and whose volume is the attacker's to choose.
//
// A Limiter writes one line per key per Every at the level asked; the
// others of that interval go to debug, and the next line written says how
// many were held back. Keys must come from a bounded set (configured
// names, fixed strings), never from the request, so that the Limiter's
// memory stays bounded.
package lograte

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"
)

// DefaultEvery is the interval of a Limiter whose Every is zero.
const DefaultEvery = time.Minute

// Limiter admits one line per key per interval. The zero value is ready
// to use. It is safe for concurrent use.
type Limiter struct {
	// Every is the interval (zero: DefaultEvery).
	Every time.Duration

	mu   sync.Mutex
	last map[string]time.Time
	skip map[string]int // lines sent to debug since the last admitted
	runs map[string]run // lines asked for since the last Cleared, per key
	open atomic.Int32   // len(runs), read without the lock by Cleared
}

// run is a key's lines since its last Cleared: how many, from when, and
// whether one of them was written (not held back).
type run struct {
	n       int
	first   time.Time
	written bool
}

// Allow reports whether a line for key may be written now at the level
// asked, and how many were held back since the last one that was.
func (l *Limiter) Allow(key string, now time.Time) (bool, int) {
	every := l.Every
	if every <= 0 {
		every = DefaultEvery
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		l.last, l.skip, l.runs = map[string]time.Time{}, map[string]int{}, map[string]run{}
	}
	r, ok := l.runs[key]
	if !ok {
		r.first = now
		l.open.Add(1)
	}
	r.n++
	l.runs[key] = r
	if t, ok := l.last[key]; ok && now.Sub(t) < every {
		l.skip[key]++
		return false, 0
	}
	r.written = true
	l.runs[key] = r
	held := l.skip[key]
	l.last[key], l.skip[key] = now, 0
	return true, held
}

// Log writes msg to lg at level when Allow admits a line for key, with
// the number held back since the last line (held_back_since_last_line,
// when any), and at debug otherwise. attrs makes the line's attributes,
// only when a line is written: a flood's requests are answered without
// building any.
func (l *Limiter) Log(ctx context.Context, lg *slog.Logger, level slog.Level, key, msg string, attrs func() []slog.Attr) {
	if ok, held := l.Allow(key, time.Now()); ok {
		as := attrs()
		if held > 0 {
			as = append(as, slog.Int("held_back_since_last_line", held))
		}
		lg.LogAttrs(ctx, level, msg, as...)
		return
	}
	if lg.Enabled(ctx, slog.LevelDebug) {
		lg.LogAttrs(ctx, slog.LevelDebug, msg, attrs()...)
	}
}

// Cleared ends key's run of lines, for a caller whose lines report
// failures and which has just succeeded: it reports how many lines were
// asked for key since the last Cleared (written or held back) and when
// the first was, or ok false when there were none or all were held back
// (a run none of whose lines was written needs no line saying it ended,
// so the end of a run is said at most once per interval, as its lines
// are). It takes no lock when no key has a run, so a success path can
// call it every time.
func (l *Limiter) Cleared(key string) (n int, since time.Time, ok bool) {
	if l.open.Load() == 0 {
		return 0, time.Time{}, false
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.runs[key]
	if !ok {
		return 0, time.Time{}, false
	}
	delete(l.runs, key)
	l.open.Add(-1)
	return r.n, r.first, r.written
}

// LogCleared writes msg to lg at info when key had a run of lines (see
// Cleared), with their number (failures) and how long the run lasted
// (for): the line that says a failure reported before is over.
func (l *Limiter) LogCleared(ctx context.Context, lg *slog.Logger, key, msg string) {
	if n, since, ok := l.Cleared(key); ok {
		lg.LogAttrs(ctx, slog.LevelInfo, msg, slog.Int("failures", n),
			slog.Duration("for", time.Since(since).Round(time.Millisecond)))
	}
}
