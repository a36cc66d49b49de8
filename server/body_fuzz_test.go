package server

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"testing"
)

// pieces is a body that arrives in reads of the sizes it is given (a
// zero among them is a read of nothing, never two in a row: a connection
// gives bytes, an error or a deadline in the end), as a sender writing in
// chunks, and counts what it handed out.
type pieces struct {
	data  []byte
	sizes []byte
	next  int
	read  int64
	zero  bool // the last read was of nothing
}

func (p *pieces) Read(b []byte) (int, error) {
	if len(p.data) == 0 {
		return 0, io.EOF
	}
	n := len(b)
	if len(p.sizes) > 0 {
		// Sizes are in units of 97 bytes, so that a few of them reach
		// past the 16 KiB first buffer.
		n = min(n, int(p.sizes[p.next%len(p.sizes)])*97)
		p.next++
		if n == 0 && p.zero {
			n = 1 // a read of nothing now and then, not for good
		}
		p.zero = n == 0
	}
	n = copy(b[:n], p.data)
	p.data = p.data[n:]
	p.read += int64(n)
	return n, nil
}

// FuzzReadBody feeds readBody bodies of any length, declared or not (a
// declared length no larger than the limit, as the receiver checks
// first, and the body net/http's reader cuts to it), arriving in reads of
// any sizes, under any limit and budget, and checks what it promises: a
// body within the limit comes back whole and byte for byte, a longer one
// is *http.MaxBytesError, a body shorter than declared io.ErrUnexpectedEOF,
// and a budget too small errBusy; what it took is what the budget holds,
// less than twice the most it may have to hold (the declared length, else
// the limit), the buffer read into no more than four times what the
// sender has sent (or the first buffer); and releasing it returns the
// budget to nothing held.
func FuzzReadBody(f *testing.F) {
	f.Add(uint32(1<<20), int32(-1), uint32(1<<21), uint32(40000), []byte{1, 0, 200}, byte('a'))
	f.Add(uint32(100), int32(50), uint32(1<<20), uint32(100), []byte{}, byte('b'))
	f.Add(uint32(100), int32(-1), uint32(1<<20), uint32(101), []byte{0, 1}, byte('c'))
	f.Add(uint32(70000), int32(70000), uint32(100000), uint32(69999), []byte{255}, byte('d'))
	f.Add(uint32(1<<20), int32(-1), uint32(200000), uint32(300000), []byte{17, 3}, byte('e'))
	f.Add(uint32(1<<20), int32(-1), uint32(8<<20-1), uint32(300000), []byte{}, byte('f'))
	f.Add(uint32(100<<10), int32(-1), uint32(8<<20-1), uint32(40<<10), []byte{200}, byte('g'))
	f.Fuzz(func(t *testing.T, limit uint32, declared int32, budget uint32, size uint32, sizes []byte, fill byte) {
		lim := int64(limit%(2<<20)) + 1
		n := int64(size % (3 << 20))
		if declared >= 0 && int64(declared) > lim {
			t.Skip("a declared length past the limit is refused before the body is read")
		}
		data := bytes.Repeat([]byte{fill}, int(n))
		for i := range data {
			data[i] += byte(i / 251) // not one byte repeated: a misplaced copy shows
		}
		in := &pieces{data: data, sizes: sizes}
		var rd io.Reader = in
		if declared >= 0 {
			rd = io.LimitReader(in, int64(declared)) // as net/http's body reader does
		}
		r := httptest.NewRequest(http.MethodPost, "/webhooks/s", rd)
		r.ContentLength = int64(declared)
		if declared < 0 {
			r.ContentLength = -1
		}
		s := &Server{cfg: Config{MinBodyRate: DefaultMinBodyRate, BodyGrace: DefaultBodyGrace, BodyTimeout: DefaultBodyTimeout},
			budget: newByteBudget(int64(budget%(8<<20)), lim)}
		client := netip.MustParseAddr("192.0.2.1")
		body, held, err := s.readBody(httptest.NewRecorder(), r, client, lim)

		want, wantErr := data, error(nil)
		switch {
		case declared >= 0 && n < int64(declared):
			wantErr = io.ErrUnexpectedEOF
		case declared >= 0:
			want = data[:declared]
		case n > lim:
			wantErr = &http.MaxBytesError{Limit: lim}
		}
		var tooLarge *http.MaxBytesError
		switch {
		case errors.Is(err, errBusy):
			// The budget refused a buffer: nothing else can be said.
		case wantErr == nil:
			if err != nil || !bytes.Equal(body, want) {
				t.Fatalf("body of %d bytes (limit %d, declared %d): got %d bytes, %v", len(want), lim, declared, len(body), err)
			}
		case errors.As(wantErr, &tooLarge):
			if !errors.As(err, &tooLarge) || tooLarge.Limit != lim {
				t.Fatalf("body of %d bytes past the limit %d: got %v", n, lim, err)
			}
		default:
			if !errors.Is(err, wantErr) {
				t.Fatalf("body of %d bytes declared %d: got %v, want %v", n, declared, err, wantErr)
			}
		}
		if used := s.budget.inUse(); used != held {
			t.Fatalf("readBody says it took %d, the budget holds %d", held, used)
		}
		most := lim
		if declared >= 0 {
			most = int64(declared)
		}
		if held > 2*most {
			t.Fatalf("took %d for a body of at most %d", held, most)
		}
		// Each buffer is taken once the one before it is full, and is at
		// most four times its size: the buffer a body is read into is at
		// most four times what was sent (or the first), and with the
		// outgrown ones, which stay counted, all are at most six times.
		if held > max(firstBodyBuffer, 6*in.read) {
			t.Fatalf("took %d when %d bytes had been sent", held, in.read)
		}
		if err == nil && int64(cap(body)) > max(firstBodyBuffer, 4*in.read) {
			t.Fatalf("read into a buffer of %d when %d bytes had been sent", cap(body), in.read)
		}
		s.budget.release(client, held)
		if used := s.budget.inUse(); used != 0 || len(s.budget.by) != 0 {
			t.Fatalf("released, the budget still holds %d (%v)", used, s.budget.by)
		}
	})
}
