package faults_test

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/verify"
)

// TestUnauthenticatedMemory is the attack of issue 13 item 5: 8
// connections each announce and send 24.8 MiB to a source that accepts
// 25 MiB, with a well-formed signature of all zeros (so no header check can
// refuse it), and withhold the last byte so that every body stays in
// flight. Before the bytes-in-flight budget the process grew from 26 to
// 398 MiB (the figures; 18 to 410 MiB here, 18 to 442 MiB chunked);
// now the budget (64 MiB by default) takes each body's bytes as they
// arrive, in buffers that double, so one body reaches its end and the
// others are answered 503 with Retry-After as their next buffer would not
// fit (session 17: peak growth 62 to 90 MiB declared, 71 to 90 chunked),
// and the peak RSS stays within the budget plus a margin for the runtime. The chunked run sends the same bodies
// without a Content-Length (and withholds the last chunk), so the server
// cannot know their size in advance.
func TestUnauthenticatedMemory(t *testing.T) {
	needBinary(t)
	if raceEnabled {
		t.Skip("the race detector's shadow memory makes RSS figures meaningless")
	}
	zeros := "sha256=" + strings.Repeat("0", 64)
	const budget = 64 << 10 // KiB: the default max_inflight_body_bytes
	t.Run("declared", func(t *testing.T) { unauthenticatedMemory(t, zeros, false, false, budget+48<<10) })
	t.Run("chunked", func(t *testing.T) { unauthenticatedMemory(t, zeros, true, false, budget+48<<10) })
	// A signature header that is not even well formed is refused before
	// a byte of the body is read: all 8 get 401 and memory stays flat.
	t.Run("malformed signature", func(t *testing.T) { unauthenticatedMemory(t, "sha256=0", false, true, 16<<10) })
}

// unauthenticatedMemory runs the attack with the given signature header and
// fails if the peak RSS grows by more than limitKiB, or, with allRefused,
// if any connection is not refused.
func unauthenticatedMemory(t *testing.T, signature string, chunked, allRefused bool, limitKiB int64) {
	dir := t.TempDir()
	big := source{name: "big", vc: verify.Config{Scheme: "github", Secrets: []string{"faults-big-secret"}}, maxBody: 26214400}
	srv := newServer(t, dir, writeConfig(t, dir, serverSpec{db: dbtest.SQLiteURL(t), sources: []source{big}}))
	p := srv.start()

	before := procStatus(t, p.Pid(), "VmRSS")
	const conns = 8
	size := int64(248 << 20 / 10) // 24.8 MiB
	replies := make([]rawReply, conns)
	held := make(chan net.Conn, conns)
	var wg sync.WaitGroup
	for i := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			replies[i] = withheldBody(p.Addr(), i, size, signature, chunked, held)
		}()
	}
	// Every writer has either written all but the last byte (the server
	// read it) or been refused.
	wg.Wait()
	rss := procStatus(t, p.Pid(), "VmRSS")
	peak := procStatus(t, p.Pid(), "VmHWM")
	close(held)
	for c := range held {
		c.Close()
	}
	refused := 0
	for i, r := range replies {
		if r.status == http.StatusServiceUnavailable && r.header.Get("Retry-After") != "" || r.status == http.StatusUnauthorized {
			refused++
		} else if r.status != 0 {
			t.Errorf("connection %d: status %d %q", i, r.status, r.body)
		}
	}
	t.Logf("RSS %d MiB before the attack, %d MiB during it, peak %d MiB; %d of %d connections refused (503 or 401)",
		before>>10, rss>>10, peak>>10, refused, conns)
	if refused == 0 {
		t.Errorf("no connection was refused: every 24.8 MiB body was buffered")
	}
	if allRefused && refused != conns {
		t.Errorf("%d of %d connections with a malformed signature refused, want all", refused, conns)
	}
	if grew := peak - before; grew > limitKiB {
		t.Errorf("peak RSS grew by %d MiB under the attack, want at most %d MiB", grew>>10, limitKiB>>10)
	}
	srv.stop()
}

// withheldBody posts size bytes to /webhooks/big with the given signature
// header, withholding the last byte (chunked: the last chunk). It
// returns the reply if one came before it had written size-1 bytes;
// otherwise it hands the open connection to held and returns no reply.
func withheldBody(addr string, i int, size int64, signature string, chunked bool, held chan<- net.Conn) rawReply {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return rawReply{err: err}
	}
	c.SetDeadline(time.Now().Add(2 * time.Minute))
	length := fmt.Sprintf("Content-Length: %d", size)
	if chunked {
		length = "Transfer-Encoding: chunked"
	}
	fmt.Fprintf(c, "POST /webhooks/big HTTP/1.1\r\nHost: %s\r\nX-Hub-Signature-256: %s\r\nX-GitHub-Delivery: mem-%d\r\n%s\r\n\r\n",
		addr, signature, i, length)
	replyc := make(chan rawReply, 1)
	go func() {
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			replyc <- rawReply{err: err}
			return
		}
		var b bytes.Buffer
		b.ReadFrom(resp.Body)
		resp.Body.Close()
		replyc <- rawReply{status: resp.StatusCode, header: resp.Header, body: b.String()}
	}()
	chunk := bytes.Repeat([]byte("a"), 256<<10)
	for left := size - 1; left > 0; {
		n := min(left, int64(len(chunk)))
		var err error
		if chunked {
			_, err = fmt.Fprintf(c, "%x\r\n%s\r\n", n, chunk[:n])
		} else {
			_, err = c.Write(chunk[:n])
		}
		if err != nil {
			r := <-replyc // refused: the server answered and closed
			c.Close()
			return r
		}
		left -= n
	}
	select {
	case r := <-replyc:
		c.Close()
		return r
	default:
		held <- c
		return rawReply{}
	}
}

// procStatus reads a "kB" field (VmRSS, VmHWM) of /proc/PID/status.
func procStatus(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Skipf("no /proc: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("%s: %q", field, line)
			}
			return n
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}
