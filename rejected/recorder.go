// Package rejected keeps the log of refused deliveries for the operator,
// masks what it shows of them, and verifies them again once a source's
// configuration is fixed (Recheck).
//
// Guarantees of the Recorder, which the receiving path calls:
//
//   - Record never blocks and never touches the database: a rejection goes
//     into a bounded queue that one background writer drains. A full queue
//     drops the rejection and counts it, so a flood of bad deliveries never
//     slows a good one waiting for the same database.
//   - Writes are rate-limited per source (a token bucket per configured
//     source, one bucket shared by every unknown name), so one noisy sender
//     cannot crowd the others out of the log; what the limit refuses is
//     counted, not stored.
//   - The log never holds more than Options.MaxCount rows nor rows older
//     than Options.MaxAge once a write commits: each write trims it in the
//     same transaction. While nothing is written, Trim trims it (serve
//     calls it hourly), so a row outlives MaxAge by an hour at most. Past MaxCount it gives up the oldest rows of its
//     largest group, each configured source's rows being a group and every
//     unknown name's rows one more (hookbox.RejectionBounds), so a sender
//     flooding the log, at its rate limit, evicts its own rows and not
//     those of a source that was refused less.
//   - A failing store makes one warning every ten seconds at most, each
//     after the first saying how many it held back: while the store is
//     down a batch fails every quarter of a second, at a rate the senders
//     of bad deliveries set. Every rejection it drops is counted
//     ("store_failed").
//   - Memory is bounded: at most QueueSize rejections wait, each holding at
//     most MaxBodyBytes of body, copied out of the request's buffer.
//   - Text from the sender (the source name asked for, header names and
//     values) is stored as valid UTF-8 without NUL bytes, cut to a bound.
//     A header name or value that was cut ends with a mark of its length
//     and so is longer than hookbox.MaxIDLength, which no kept text is
//     otherwise: a re-check knows which headers are not as sent
//     (HeaderAltered).
//   - A header kept that carries a source's secret itself (a token, kept
//     for a re-check) is listed in the row (MarkCredentials), and
//     DisplayHeader masks it by that list: the CLI, the admin API and the
//     console mask it without the source's configuration at hand.
package rejected

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode/utf8"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/lograte"
	"github.com/hookbox/hookbox/redact"
)

// Defaults of Options.
const (
	DefaultMaxCount     = 10000
	DefaultMaxAge       = 7 * 24 * time.Hour
	DefaultMaxBodyBytes = 64 << 10
	DefaultRate         = 10 // rejections a second per source
	DefaultBurst        = 100
	DefaultQueueSize    = 256
)

// maxText bounds each text field kept of a sender's request: a header
// name or value, the source name asked for, the reason.
const maxText = hookbox.MaxIDLength

// maxHeaderValues bounds the header values kept of one request.
const maxHeaderValues = 64

// leftOutHeader names the header the log adds, with their count, when it
// left values out past maxHeaderValues. U+FFFD is in no name the log keeps
// unaltered, so HeaderAltered takes it for what it is, and a sender
// cannot send it.
const leftOutHeader = "\uFFFD-Values-Left-Out"

// droppedHeader names the header the log adds, with their count, when
// the server left out of the kept headers some the sender sent and
// ingest verified (those its Connection header names; see MarkDropped).
// Like leftOutHeader it holds U+FFFD, so HeaderAltered takes the row for
// one not kept as sent, and a sender cannot send it.
const droppedHeader = "\uFFFD-Headers-Dropped"

// MarkDropped returns h, the headers kept of a refused delivery, marked
// as lacking n headers that ingest verified (the sender named them in
// Connection, and only what is kept for an event is logged), so that a
// re-check refuses it (ReasonHeaderAltered): it would verify other
// headers than ingest did, and one sender could choose which (a bad
// webhook-signature named in Connection, a good svix-signature kept).
// h is changed in place.
func MarkDropped(h http.Header, n int) http.Header {
	if n > 0 && h != nil {
		h[droppedHeader] = []string{strconv.Itoa(n)}
	}
	return h
}

// credentialsHeader names the header the log adds to list, as its values,
// the names of the kept headers that carry a source's secret itself (a
// token source's header, kept for a re-check: see MarkCredentials), so
// that whoever shows the rejection masks them without the source's
// configuration at hand (DisplayHeader). Like leftOutHeader it holds
// U+FFFD, so no sender can send it; unlike it, it is not counted against
// maxHeaderValues nor taken for an alteration (HeaderAltered), and a
// re-check leaves it out of what it verifies and stores.
const credentialsHeader = "\uFFFD-Credential-Headers"

// writeBatch is the most rejections one write transaction stores, and
// writeEvery how long the writer gathers them before writing.
const (
	writeBatch = 64
	writeEvery = 250 * time.Millisecond
)

// failLogEvery is how often the writer logs that the store fails, as the
// receiving path does for deliveries it cannot store.
const failLogEvery = 10 * time.Second

// Options configure a Recorder. Zero fields take the defaults.
type Options struct {
	MaxCount     int           // rows kept at most
	MaxAge       time.Duration // rows older than this are trimmed
	MaxBodyBytes int           // body bytes kept per rejection
	Rate         float64       // rejections stored per second per source
	Burst        int           // and in a burst
	QueueSize    int           // rejections waiting for the writer
	Logger       *slog.Logger
	// Dropped, if set, is told each time a rejection is not stored and
	// why: "rate_limited", "queue_full", "store_failed" or "stopped"
	// (recorded after Close: a request the server was still answering as
	// it stopped).
	Dropped func(source, why string)
}

// Recorder writes rejections to a store in the background. Its methods
// are safe for concurrent use.
type Recorder struct {
	st   hookbox.RejectionStore
	opts Options
	log  *slog.Logger
	now  func() time.Time

	queue chan hookbox.Rejection
	done  chan struct{}
	stop  sync.Once
	// closing guards queue against a send after Close closed it: Record
	// holds it for reading, Close for writing.
	closing sync.RWMutex
	closed  bool

	mu      sync.Mutex
	buckets map[string]*bucket

	// failLog spaces out the warnings about batches the store failed.
	failLog lograte.Limiter

	written atomic.Int64
}

// NewRecorder returns a Recorder writing to st and starts its writer; Close
// stops it after writing what is queued.
func NewRecorder(st hookbox.RejectionStore, opts Options) *Recorder {
	if opts.MaxCount <= 0 {
		opts.MaxCount = DefaultMaxCount
	}
	if opts.MaxAge <= 0 {
		opts.MaxAge = DefaultMaxAge
	}
	if opts.MaxBodyBytes <= 0 {
		opts.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if opts.Rate <= 0 {
		opts.Rate = DefaultRate
	}
	if opts.Burst <= 0 {
		opts.Burst = DefaultBurst
	}
	if opts.QueueSize <= 0 {
		opts.QueueSize = DefaultQueueSize
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	r := &Recorder{st: st, opts: opts, log: opts.Logger, now: time.Now,
		queue: make(chan hookbox.Rejection, opts.QueueSize), done: make(chan struct{}), buckets: map[string]*bucket{},
		failLog: lograte.Limiter{Every: failLogEvery}}
	go r.writeLoop()
	return r
}

// MaxBodyBytes is how much of a body a rejection keeps.
func (r *Recorder) MaxBodyBytes() int { return r.opts.MaxBodyBytes }

// Bounds returns the bounds the log is trimmed to now.
func (r *Recorder) Bounds() hookbox.RejectionBounds {
	return hookbox.RejectionBounds{MaxCount: r.opts.MaxCount, Since: r.now().Add(-r.opts.MaxAge)}
}

// Trim trims the log to Bounds now, as each write does, and returns how
// many rows it deleted: rows past MaxAge go even while no refusal comes
// to be written.
func (r *Recorder) Trim(ctx context.Context) (int, error) {
	return r.st.AddRejections(ctx, nil, r.Bounds())
}

// Allow takes one token from the bucket of source (or the one shared by
// every unknown source name) and reports whether a rejection from it may
// be recorded now. A caller that gets false records nothing and need not
// read the body.
func (r *Recorder) Allow(source string, known bool) bool {
	key := source
	if !known {
		key = "\x00unknown" // one bucket for every name nobody configured
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	b := r.buckets[key]
	now := r.now()
	if b == nil {
		b = &bucket{tokens: float64(r.opts.Burst), at: now}
		r.buckets[key] = b
	}
	if !b.take(now, r.opts.Rate, float64(r.opts.Burst)) {
		r.dropped(source, known, "rate_limited")
		return false
	}
	return true
}

// Record queues rj for the writer, or drops it (counted) when the queue is
// full; it never waits. Its body is copied, up to MaxBodyBytes, and its
// text cleaned (see the package guarantees), so the caller's buffers may
// be reused at once.
func (r *Recorder) Record(rj hookbox.Rejection) {
	r.closing.RLock()
	defer r.closing.RUnlock()
	if r.closed {
		r.dropped(rj.Source, !rj.UnknownSource, "stopped")
		return
	}
	if len(r.queue) == cap(r.queue) {
		// Full already: drop before copying anything.
		r.dropped(rj.Source, !rj.UnknownSource, "queue_full")
		return
	}
	rj = r.clean(rj)
	select {
	case r.queue <- rj:
	default:
		r.dropped(rj.Source, !rj.UnknownSource, "queue_full")
	}
}

// Close stops the writer once it has written what was queued. A Record
// after it (from a handler net/http was still running as the server
// stopped) is dropped and counted, never a send on the closed queue.
func (r *Recorder) Close() {
	r.stop.Do(func() {
		r.closing.Lock()
		r.closed = true
		close(r.queue)
		r.closing.Unlock()
	})
	<-r.done
}

// Written returns how many rejections the writer stored.
func (r *Recorder) Written() int64 { return r.written.Load() }

func (r *Recorder) dropped(source string, known bool, why string) {
	if r.opts.Dropped == nil {
		return
	}
	if !known {
		source = ""
	}
	r.opts.Dropped(source, why)
}

// writeLoop stores queued rejections until Close, one transaction of at
// most writeBatch every writeEvery at the most: a flood costs the
// database a few small transactions a second, whatever the rate limits
// let through, and ingest rarely waits behind one. What the writer cannot
// take waits in the queue, and what the queue cannot hold is dropped.
func (r *Recorder) writeLoop() {
	defer close(r.done)
	batch := make([]hookbox.Rejection, 0, writeBatch)
	timer := time.NewTimer(0)
	<-timer.C
	for rj := range r.queue {
		batch = append(batch[:0], rj)
		timer.Reset(writeEvery)
	gather:
		for len(batch) < writeBatch {
			select {
			case more, ok := <-r.queue:
				if !ok {
					break gather // closing: write what is here now
				}
				batch = append(batch, more)
			case <-timer.C:
				break gather
			}
		}
		full := len(batch) == writeBatch
		r.write(batch)
		clear(batch) // let the bodies go
		if full {
			<-timer.C // not before writeEvery has passed since the batch began
		} else if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// write stores one batch, counting it dropped if the store fails, and
// saying so in a line every failLogEvery at most: during an outage a
// batch fails every writeEvery while bad deliveries come.
func (r *Recorder) write(batch []hookbox.Rejection) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := r.st.AddRejections(ctx, batch, r.Bounds())
	if err != nil {
		r.failLog.Log(ctx, r.log, slog.LevelWarn, "store", "rejected deliveries not logged", func() []slog.Attr {
			return []slog.Attr{slog.Int("count", len(batch)), slog.Any("err", err)}
		})
		for _, rj := range batch {
			r.dropped(rj.Source, !rj.UnknownSource, "store_failed")
		}
		return
	}
	r.written.Add(int64(len(batch)))
}

// clean copies rj's body (cut to the limit) and makes its text storable.
func (r *Recorder) clean(rj hookbox.Rejection) hookbox.Rejection {
	if rj.ReceivedAt.IsZero() {
		rj.ReceivedAt = r.now()
	}
	if rj.Body != nil {
		keep := min(len(rj.Body), r.opts.MaxBodyBytes)
		if keep < len(rj.Body) {
			rj.BodyComplete = false
		}
		rj.Body = append(make([]byte, 0, keep), rj.Body[:keep]...)
	} else {
		rj.BodyComplete = false
	}
	rj.Source = Text(rj.Source)
	rj.Reason = Text(rj.Reason)
	rj.RemoteAddr = Text(rj.RemoteAddr)
	if rj.Header != nil {
		h := make(http.Header, len(rj.Header))
		values, left := 0, 0
		for k, vs := range rj.Header {
			if k == credentialsHeader {
				// Names of headers in h, listed whatever the bound: a
				// credential kept unlisted would be shown in clear.
				h[k] = slices.Clone(vs)
				continue
			}
			for _, v := range vs {
				if values == maxHeaderValues {
					left++
					continue
				}
				values++
				name := headerText(k)
				h[name] = append(h[name], headerText(v))
			}
		}
		if left > 0 {
			h[leftOutHeader] = []string{strconv.Itoa(left)}
		}
		rj.Header = h
	}
	return rj
}

// Text returns s as storable text: invalid UTF-8 and NUL bytes replaced
// by U+FFFD, cut to hookbox.MaxIDLength bytes on a rune boundary.
func Text(s string) string {
	t, _ := text(s)
	return t
}

// text is Text, and reports whether it cut s.
func text(s string) (string, bool) {
	if !utf8.ValidString(s) || strings.ContainsRune(s, 0) {
		s = strings.ToValidUTF8(s, "\uFFFD")
		s = strings.ReplaceAll(s, "\x00", "\uFFFD")
	}
	if len(s) <= maxText {
		return s, false
	}
	cut := maxText
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut], true
}

// headerText returns s as Text does, except that what Text cuts ends with
// a mark of its whole length ("…(N bytes)"), and so is longer than
// hookbox.MaxIDLength.
func headerText(s string) string {
	t, cut := text(s)
	if !cut {
		return t
	}
	return t + "…(" + strconv.Itoa(len(s)) + " bytes)"
}

// MarkCredentials returns h, the headers kept of a delivery refused by a
// source whose secret travels in the headers named by credentials (a
// token's: verify.CredentialHeaders), with the names of those it holds
// listed under a name the log reserves: the log keeps such a header so
// that a re-check can verify it, and the list makes DisplayHeader mask
// it wherever the rejection is shown, whether or not the source's
// configuration is at hand (its header name may hold no word that marks
// a credential, such as X-Shared). A source's signature header whose name
// its configuration chose (verify.SignatureHeaders) is listed the same
// way: a sender set up wrong may send the secret there. h is changed in
// place.
func MarkCredentials(h http.Header, credentials []string) http.Header {
	var kept []string
	for _, name := range credentials {
		if _, ok := h[name]; ok {
			kept = append(kept, name)
		}
	}
	if len(kept) > 0 && h != nil {
		h[credentialsHeader] = kept
	}
	return h
}

// DisplayHeader returns a copy of h, a Rejection's kept headers, fit to
// be given to a function that masks headers for showing (such as
// redact.ShowHeader): the values of the headers MarkCredentials listed
// replaced by redact's mask, and the list itself left out.
func DisplayHeader(h http.Header) http.Header {
	if h == nil {
		return nil
	}
	out := make(http.Header, len(h))
	for k, vs := range h {
		if k != credentialsHeader {
			out[k] = vs
		}
	}
	for _, name := range h[credentialsHeader] {
		if vs, ok := out[name]; ok {
			masked := make([]string, len(vs))
			for i := range masked {
				masked[i] = redact.Mask
			}
			out[name] = masked
		}
	}
	return out
}

// KeptAsSent reports whether the log keeps the values of the headers names
// of h as they were sent: storable text no longer than hookbox.MaxIDLength,
// in a request of no more header values than the log keeps. It cuts,
// cleans or leaves out the others (see HeaderAltered).
func KeptAsSent(h http.Header, names []string) bool {
	values := 0
	for _, vs := range h {
		values += len(vs)
	}
	if values > maxHeaderValues {
		return false
	}
	for _, name := range names {
		for _, v := range h[name] {
			if len(v) > maxText || !hookbox.StorableText(v) {
				return false
			}
		}
	}
	return true
}

// HeaderAltered reports whether h, a Rejection's kept headers, may differ
// from the headers sent: a name or value was cut (it is longer than
// hookbox.MaxIDLength: see the package guarantees), or holds U+FFFD (what
// the log puts in place of bytes that are not UTF-8 text, or NUL; one the
// sender sent itself cannot be told apart), or values may have been left
// out (the log keeps a bounded number, and then says how many it left
// out under a name holding U+FFFD).
func HeaderAltered(h http.Header) bool {
	for k, vs := range h {
		if k == credentialsHeader {
			continue // the log's own list (MarkCredentials), not sent
		}
		if len(k) > maxText || strings.ContainsRune(k, utf8.RuneError) {
			return true
		}
		for _, v := range vs {
			if len(v) > maxText || strings.ContainsRune(v, utf8.RuneError) {
				return true
			}
		}
	}
	return false
}

// bucket is a token bucket.
type bucket struct {
	tokens float64
	at     time.Time
}

// take refills the bucket for the time since the last take and takes one
// token if there is one.
func (b *bucket) take(now time.Time, rate, burst float64) bool {
	if el := now.Sub(b.at).Seconds(); el > 0 {
		b.tokens = min(burst, b.tokens+el*rate)
		b.at = now
	}
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
