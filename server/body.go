package server

import (
	"errors"
	"io"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/hookbox/hookbox/groupcommit"
)

// Defaults of the body-reading limits in Config.
const (
	// DefaultMinBodyRate is Config.MinBodyRate's default: 64 KiB a second,
	// a sixth of what the 60 s read timeout already asks of a 25 MB body.
	DefaultMinBodyRate = 64 << 10
	// DefaultBodyGrace is Config.BodyGrace's default.
	DefaultBodyGrace = 5 * time.Second
	// DefaultBodyTimeout is Config.BodyTimeout's default, the http.Server
	// ReadTimeout that service.HTTPServer sets.
	DefaultBodyTimeout = 60 * time.Second
)

// errBusy means the budget for body bytes in flight is spent.
var errBusy = errors.New("body bytes in flight at the limit")

// byteBudget counts the body bytes held by requests in flight against a
// limit, and what each client holds of them. Taking never waits: a request
// that does not fit is refused at once (503), so a flood of bodies cannot
// queue up memory or goroutines.
//
// Once more than half the budget is held, a client already holding more
// than its share is refused too, so that one client (a sender with no
// secret withholding its bodies, say) can take at most about half the
// budget from the others rather than all of it. Clients are told apart by
// address (an IPv6 one by its /64, what one host is commonly given); see
// clientKey.
type byteBudget struct {
	limit int64
	share int64 // what one client may hold once half the limit is held
	mu    sync.Mutex
	used  int64
	by    map[netip.Addr]int64
}

// newByteBudget returns a budget of limit bytes whose clients' share is an
// eighth of it, but never less than twice the largest body limit and a
// request's reserve (so a client can always receive one body of any size
// while the rest is free).
func newByteBudget(limit, largestBody int64) *byteBudget {
	return &byteBudget{limit: limit, share: max(limit/8, 2*largestBody+requestReserve), by: map[netip.Addr]int64{}}
}

// requestOverhead is the memory a delivery holds besides its body's
// buffers and its headers while it is verified and waits for the store:
// its connection's two goroutines and their stacks, net/http's buffers,
// the request and the delivery made of it. Measured with Go 1.26 on amd64
// (2,000 deliveries waiting on a store that does not answer): 26 KiB each
// with a 10-byte body and few headers, and 23 KiB more with 32 KiB more
// of headers. Without it the budget counted 10 bytes for such a
// delivery and so did not bound how many waited at once (only the
// connections did, which behind a proxy is nothing); with it, at most
// about 2,500 of a few header lines wait under the default budget (each
// line counts headerLineOverhead too), some 70 MiB, and the next is
// answered 503 at once instead of after StoreWait.
const requestOverhead = 24 << 10

// requestReserve is the part of the budget, beyond twice the largest body
// limit, that lets a lone delivery of the largest body be received: its
// overhead and headers up to the 64 KiB hookbox serves with
// (service.HTTPServer's MaxHeaderBytes), in up to MaxHeaderLines lines.
const requestReserve = requestOverhead + 64<<10 + MaxHeaderLines*headerLineOverhead

// MaxHeaderLines is the most header lines a delivery may come with. One
// with more is refused with 431 before its body is read. net/http holds
// each line parsed as a map entry and strings, about 160 bytes besides
// its text, so without a bound 64 KiB of headers sent as some 11,000
// one-character lines held 1.7 MiB, and a sender with no secret held that
// for each body it withheld (the budget counts a request's headers once
// its body is in). Senders send tens of lines, and proxies add a few.
const MaxHeaderLines = 256

// headerLineOverhead is the memory one header line holds besides its text
// while a delivery waits: net/http's map entry, the value's string and
// slice, and the stored header's map entry. Measured with Go 1.26 on
// amd64: about 160 bytes.
const headerLineOverhead = 160

// headerLines returns how many header lines h holds (a name given twice
// counts twice).
func headerLines(h http.Header) int {
	n := 0
	for _, vs := range h {
		n += len(vs)
	}
	return n
}

// requestCost is what a request whose body has been read counts against
// the budget besides the body: requestOverhead and its headers, their
// bytes as sent ("Name: value" and a line break each) and
// headerLineOverhead for each line.
func requestCost(r *http.Request) int64 {
	n := int64(requestOverhead)
	for k, vs := range r.Header {
		for _, v := range vs {
			n += int64(len(k) + len(v) + 4 + headerLineOverhead)
		}
	}
	return n
}

// take reserves n bytes for client, reporting false (and reserving
// nothing) when they do not fit.
func (b *byteBudget) take(client netip.Addr, n int64) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	used := b.used + n
	mine := b.by[client] + n
	if used > b.limit || mine > b.share && used > b.limit/2 {
		return false
	}
	b.used, b.by[client] = used, mine
	return true
}

// release gives back n bytes that client took.
func (b *byteBudget) release(client netip.Addr, n int64) {
	if n == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.used -= n
	if mine := b.by[client] - n; mine > 0 {
		b.by[client] = mine
	} else {
		delete(b.by, client)
	}
}

// holdBody returns the Hold of a body's n bytes taken for client (nil
// for none): they are given back once the handler and Ingest have both
// let go of the body (IngestFunc).
func (s *Server) holdBody(client netip.Addr, n int64) *groupcommit.Hold {
	if n == 0 {
		return nil
	}
	return groupcommit.NewHold(func() { s.budget.release(client, n) })
}

// inUse returns the bytes held, for tests.
func (b *byteBudget) inUse() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.used
}

// clientKey is what the budget tells r's client by (clientKeyOf).
func (s *Server) clientKey(r *http.Request) netip.Addr { return clientKeyOf(r, s.cfg.TrustedProxies) }

// firstBodyBuffer is the largest first buffer a body is read into.
const firstBodyBuffer = 16 << 10

// nextBuffer is the size of the buffer that follows a full one of size
// have, for a body of at most want bytes: twice the size, or want itself
// once twice the size would reach half of it. The buffers of one body
// therefore add up to less than twice want, and a buffer is only ever
// allocated once its predecessor's bytes have arrived.
func nextBuffer(have, want int64) int64 {
	if next := 2 * have; next < want/2 {
		return next
	}
	return want
}

// readBody reads the body of r, at most limit bytes (a larger one yields
// *http.MaxBytesError), taking its bytes from the budget as they arrive
// (errBusy when they do not fit): nothing before the first byte, then
// each buffer as the one before it fills (nextBuffer), so a sender holds
// at most its first buffer (up to 16 KiB) or about four times what it has
// sent, whichever is more, and less than twice the body's length in all.
// held is what it took, to release after the reply (or later, see
// holdBody), error or not: the buffers a body outgrew stay counted, as
// garbage the collector has yet to free. A declared length (already
// checked against limit) is the size of the last buffer; an undeclared
// body's last buffer is the limit. The sender must keep up the server's
// minimum body rate (see bodyReader); a body that falls behind ends with
// a timeout error.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request, client netip.Addr, limit int64) (body []byte, held int64, err error) {
	want := limit
	var rd io.Reader
	if r.ContentLength >= 0 {
		want, rd = r.ContentLength, r.Body
		if want == 0 {
			return []byte{}, 0, nil
		}
	} else {
		rd = http.MaxBytesReader(w, r.Body, limit)
	}
	in := s.newBodyReader(w, rd)
	defer func() { in.done(err == nil) }()
	// Nothing is taken until the sender has sent something.
	if err := in.awaitFirst(); err == io.EOF && r.ContentLength < 0 {
		return []byte{}, 0, nil
	} else if err == io.EOF {
		return nil, 0, io.ErrUnexpectedEOF
	} else if err != nil {
		return nil, 0, err
	}
	size := min(want, firstBodyBuffer)
	if !s.budget.take(client, size) {
		return nil, 0, errBusy
	}
	held = size
	body = append(make([]byte, 0, size), in.first[0])
	for {
		if len(body) == cap(body) {
			if int64(len(body)) == want {
				if r.ContentLength >= 0 {
					return body, held, nil // net/http's reader ends at the declared length
				}
				// Full at the limit: only the end of the body may follow.
				if _, err := in.Read(in.first[:]); err == io.EOF {
					return body, held, nil
				} else if err != nil {
					return nil, held, err
				}
				continue // a zero-byte read; try again
			}
			grown := nextBuffer(int64(cap(body)), want)
			if !s.budget.take(client, grown) {
				return nil, held, errBusy
			}
			held += grown
			body = append(make([]byte, 0, grown), body...)
		}
		n, err := in.Read(body[len(body):cap(body)])
		body = body[:len(body)+n]
		if err == io.EOF {
			if r.ContentLength >= 0 && int64(len(body)) < want {
				return nil, held, io.ErrUnexpectedEOF
			}
			return body, held, nil
		}
		if err != nil {
			return nil, held, err
		}
	}
}

// bodyReader reads a request body under a read deadline that moves with
// what has arrived: the sender has Config.BodyGrace for free, and after it
// must have sent Config.MinBodyRate bytes a second on average since the
// body was first asked for, within Config.BodyTimeout in all. A sender that
// stops, or trickles, is cut off (a read ends with a timeout error) instead
// of holding its share of the body budget for the whole read timeout. On
// a connection that takes no deadlines (a test's recorder) it only reads.
type bodyReader struct {
	r       io.Reader
	rc      *http.ResponseController
	start   time.Time
	rate    float64 // bytes a second
	grace   time.Duration
	timeout time.Duration // the most the whole body may take
	step    int           // the most one read asks for
	got     int64         // bytes read so far
	set     time.Time     // the deadline last set; zero before the first
	off     bool          // the connection takes no deadlines
	first   [1]byte       // where the first byte is read, before any buffer is taken
}

// maxBodyStep is the most one read of a body asks for (see bodyReader.step).
const maxBodyStep = 64 << 10

func (s *Server) newBodyReader(w http.ResponseWriter, r io.Reader) *bodyReader {
	// One read may block until all it asked for has come (net/http's
	// chunked reader reads on to the end of a chunk), under a deadline set
	// before it: asking for at most half the grace's worth of bytes at the
	// minimum rate lets a sender that keeps up the rate always finish a
	// read before the deadline it started under.
	step := int(min(max(float64(s.cfg.MinBodyRate)*s.cfg.BodyGrace.Seconds()/2, 512), maxBodyStep))
	return &bodyReader{r: r, rc: http.NewResponseController(w), start: time.Now(),
		rate: float64(s.cfg.MinBodyRate), grace: s.cfg.BodyGrace, timeout: s.cfg.BodyTimeout, step: step}
}

// Read moves the deadline to what the bytes so far have earned, then reads
// at most step bytes (a small body is read in one call; a large one moves
// the deadline once a read, a fraction of a microsecond against the MAC of
// the bytes read).
func (b *bodyReader) Read(p []byte) (int, error) {
	if len(p) > b.step {
		p = p[:b.step]
	}
	if !b.off {
		// In float seconds first: a huge count at a rate of 1 would
		// overflow a Duration.
		earned := b.grace.Seconds() + float64(b.got)/b.rate
		d := b.start.Add(b.timeout)
		if earned < b.timeout.Seconds() {
			d = b.start.Add(time.Duration(earned * float64(time.Second)))
		}
		if !d.Equal(b.set) {
			if err := b.rc.SetReadDeadline(d); err != nil {
				b.off = true
			} else {
				b.set = d
			}
		}
	}
	n, err := b.r.Read(p)
	b.got += int64(n)
	return n, err
}

// awaitFirst reads the body's first byte into b.first; io.EOF when the
// body is empty.
func (b *bodyReader) awaitFirst() error {
	for {
		n, err := b.Read(b.first[:])
		if n > 0 {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// done clears the deadline once the whole body is read (ok): what follows
// (the commit, the reply) is not the sender's to hurry, and net/http's own
// watch for a client that leaves must not time out meanwhile; net/http
// sets the deadlines of the connection's next request itself. A body not
// read to its end keeps its deadline: after the reply net/http reads what
// is left of it (up to 256 KiB, to reuse the connection), and that read
// must end when the sender's time does, not wait on it for good.
func (b *bodyReader) done(ok bool) {
	if ok && !b.set.IsZero() {
		b.rc.SetReadDeadline(time.Time{})
	}
}

// isTimeout reports whether err is a read deadline passing.
func isTimeout(err error) bool {
	return errors.Is(err, os.ErrDeadlineExceeded)
}
