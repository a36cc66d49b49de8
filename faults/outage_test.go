package faults_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite" // for the trigger fallback

	"github.com/hookbox/hookbox/faults"
	"github.com/hookbox/hookbox/postgres/pgtest"
)

// outage describes one way of making the database unusable under load.
type outage struct {
	serverDB string // the URL hookbox serve uses
	checkDB  string // the URL the test checks the store through
	cut      func(t *testing.T)
	restore  func(t *testing.T)
	// strict: no commit can succeed during the outage, so every answer to
	// a request sent after cut and answered before restore must be 503,
	// except a 202 duplicate:true, whose row was committed before (the
	// store answers it without writing). Otherwise (a full disk, where
	// SQLite may still reuse allocated WAL space) a new 202 is allowed,
	// and the end-of-run checks show that each such delivery was stored.
	strict bool
	// unready: /readyz must be 503 during the outage. A database that
	// cannot be reached is. A SQLite file that can be read but not
	// written is 503 only while its last commit failed, and a batch of
	// redeliveries alone, writing nothing, can commit: not checked.
	unready bool
}

// outageFigures are what one outage run saw.
type outageFigures struct {
	during, during503 int
	during202         int // new deliveries acknowledged during the outage
	during202Dup      int // redeliveries of stored ids acknowledged during it
	figures
}

// runOutage drives load through an outage: some deliveries first, then
// cut, then at least minOutage and 30 answers, then restore; ingest must
// resume without a restart, and the queue drain.
func runOutage(t *testing.T, o outage) outageFigures {
	dir := t.TempDir()
	srcs := []source{polarSrc, stripeSrc, githubSrc}
	ep := newEndpoint("")
	l := newLoad(ep, srcs, 0.1)
	l.keep = true
	sink := faults.NewSink(faults.SinkOptions{Check: l.checkBody})
	t.Cleanup(sink.Close)
	srv := newServer(t, dir, writeConfig(t, dir, serverSpec{db: o.serverDB, sources: srcs, forward: sink.URL}))
	p := srv.start()
	ep.set(p.URL())

	ctx, stopLoad := context.WithCancel(context.Background())
	defer stopLoad()
	l.run(ctx, 8)
	waitFor(t, 30*time.Second, "100 deliveries acknowledged before the outage", func() (bool, string) {
		n := l.accepted()
		return n >= 100, fmt.Sprint(n, " acknowledged")
	})

	o.cut(t)
	cutAt := time.Now()
	minOutage := 2 * time.Second
	if *fullRun {
		minOutage = 10 * time.Second
	}
	waitFor(t, 60*time.Second, "30 answers during the outage", func() (bool, string) {
		n := len(l.repliesBetween(cutAt, time.Now()))
		return n >= 30 && time.Since(cutAt) >= minOutage, fmt.Sprint(n, " answers")
	})
	ready := get(t, p.URL()+"/readyz")
	restoreAt := time.Now()
	o.restore(t)

	waitFor(t, 60*time.Second, "a 202 after the outage, without a restart", func() (bool, string) {
		for _, r := range l.repliesBetween(restoreAt, time.Now()) {
			if r.status == http.StatusAccepted {
				return true, ""
			}
		}
		return false, "none yet"
	})
	before := l.accepted()
	waitFor(t, 30*time.Second, "100 more deliveries acknowledged after the outage", func() (bool, string) {
		n := l.accepted() - before
		return n >= 100, fmt.Sprint(n, " acknowledged")
	})
	stopLoad()
	l.wait()

	var of outageFigures
	for _, r := range l.repliesBetween(cutAt, restoreAt) {
		of.during++
		switch {
		case r.status == http.StatusServiceUnavailable:
			of.during503++
			if r.retryAfter == "" {
				t.Errorf("503 without Retry-After during the outage (%s)", r.key)
			}
		case r.status == http.StatusAccepted && r.duplicate:
			of.during202Dup++
		case r.status == http.StatusAccepted:
			of.during202++
			if o.strict {
				t.Errorf("202 for %s during the outage (sent %s after the cut)", r.key, r.sent.Sub(cutAt))
			}
		default:
			t.Errorf("during the outage, %s got status %d %v %q, want 503", r.key, r.status, r.err, r.body)
		}
	}
	if of.during503 == 0 {
		t.Errorf("no 503 during the outage (%d answers, %d of them 202)", of.during, of.during202)
	}
	if o.unready && ready != http.StatusServiceUnavailable {
		t.Errorf("/readyz during the outage = %d, want 503", ready)
	}
	of.figures = drainAndCheck(t, fleet{srv}, openStore(t, o.checkDB), l, sink, 2*time.Minute)
	t.Logf("outage %s: %d answers during it (%d 503, %d 202 new, %d 202 duplicate), /readyz %d; acknowledged %d, stored %d, sink saw %d (%d duplicates), not done %d",
		restoreAt.Sub(cutAt).Round(time.Millisecond), of.during, of.during503, of.during202, of.during202Dup, ready,
		of.Acknowledged, of.Stored, of.SinkSeen, of.SinkDups, of.NotDone)
	return of
}

func get(t *testing.T, url string) int {
	t.Helper()
	resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(url)
	if err != nil {
		t.Errorf("GET %s: %v", url, err)
		return 0
	}
	resp.Body.Close()
	return resp.StatusCode
}

// TestPostgresOutage cuts a TCP proxy between hookbox serve and PostgreSQL
// under load: every answer during the outage is 503 with Retry-After (never
// 202), /readyz is 503; when the proxy lets connections through again,
// ingest and the workers resume without a restart and every acknowledged
// delivery ends done at the sink.
func TestPostgresOutage(t *testing.T) {
	needBinary(t)
	t.Parallel()
	dbURL := pgtest.URL(t)
	proxy, viaProxy := faults.URLProxyFor(t, dbURL)
	runOutage(t, outage{
		serverDB: viaProxy,
		checkDB:  dbURL,
		cut:      func(*testing.T) { proxy.Cut() },
		restore:  func(*testing.T) { proxy.Restore() },
		strict:   true,
		unready:  true,
	})
}

// TestSQLiteOutage makes the SQLite files unwritable under load, by the
// first means this machine allows: the immutable attribute (chattr +i on
// the database and its WAL), or a small tmpfs filled up so that SQLite gets
// SQLITE_FULL. Each subtest skips with the reason when its means is
// missing; only when both skip does the last resort run, a BEFORE INSERT
// trigger that RAISEs (what TestSQLiteCannotCommit does without load).
func TestSQLiteOutage(t *testing.T) {
	needBinary(t)
	t.Parallel()
	real := 0
	t.Run("immutable", func(t *testing.T) {
		dir := t.TempDir()
		if why := chattrUnsupported(dir); why != "" {
			t.Skip(why)
		}
		real++
		path := filepath.Join(dir, "hookbox.db")
		files := []string{path, path + "-wal"} // not -shm: it is mmapped, and a refused page fault would be SIGBUS
		t.Cleanup(func() { chattr("-i", files...) })
		runOutage(t, outage{
			serverDB: "sqlite:" + path,
			checkDB:  "sqlite:" + path,
			cut: func(t *testing.T) {
				if err := chattr("+i", files...); err != nil {
					t.Fatal(err)
				}
			},
			restore: func(t *testing.T) {
				if err := chattr("-i", files...); err != nil {
					t.Fatal(err)
				}
			},
			strict: true,
		})
	})
	t.Run("disk-full", func(t *testing.T) {
		mnt := filepath.Join(t.TempDir(), "mnt")
		if why := mountTmpfs(t, mnt, "32m"); why != "" {
			t.Skip(why)
		}
		real++
		path := filepath.Join(mnt, "hookbox.db")
		filler := filepath.Join(mnt, "filler")
		runOutage(t, outage{
			serverDB: "sqlite:" + path,
			checkDB:  "sqlite:" + path,
			cut: func(t *testing.T) {
				if err := fill(filler); err != nil {
					t.Fatal(err)
				}
			},
			restore: func(t *testing.T) {
				if err := os.Remove(filler); err != nil {
					t.Fatal(err)
				}
			},
		})
	})
	t.Run("trigger", func(t *testing.T) {
		if real > 0 {
			t.Skip("a real outage ran; the trigger is only the last resort")
		}
		path := filepath.Join(t.TempDir(), "hookbox.db")
		var db *sql.DB
		runOutage(t, outage{
			serverDB: "sqlite:" + path,
			checkDB:  "sqlite:" + path,
			cut: func(t *testing.T) {
				var err error
				if db, err = sql.Open("sqlite", "file:"+path+"?_pragma=busy_timeout(10000)"); err != nil {
					t.Fatal(err)
				}
				if _, err := db.Exec(`CREATE TRIGGER refuse BEFORE INSERT ON events BEGIN SELECT RAISE(ABORT, 'database or disk is full'); END`); err != nil {
					t.Fatal(err)
				}
			},
			restore: func(t *testing.T) {
				if _, err := db.Exec(`DROP TRIGGER refuse`); err != nil {
					t.Fatal(err)
				}
				db.Close()
			},
			strict: true,
		})
	})
}

// chattr runs chattr with op on files.
func chattr(op string, files ...string) error {
	out, err := exec.Command("chattr", append([]string{op}, files...)...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("chattr %s: %v: %s", op, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// chattrUnsupported returns why the immutable attribute cannot stop writes
// in dir, or "" when it can.
func chattrUnsupported(dir string) string {
	if _, err := exec.LookPath("chattr"); err != nil {
		return "chattr is not installed"
	}
	probe := filepath.Join(dir, "probe")
	f, err := os.Create(probe)
	if err != nil {
		return err.Error()
	}
	defer func() {
		chattr("-i", probe)
		f.Close()
		os.Remove(probe)
	}()
	if err := chattr("+i", probe); err != nil {
		return "the file system or our privileges do not allow the immutable attribute: " + err.Error()
	}
	if _, err := f.Write([]byte("x")); err == nil {
		return "writes through an open descriptor still succeed on an immutable file here"
	}
	return ""
}

// mountTmpfs mounts a tmpfs of size at dir (unmounted when the test ends)
// and returns "" , or why it cannot.
func mountTmpfs(t *testing.T, dir, size string) string {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err.Error()
	}
	if _, err := exec.LookPath("mount"); err != nil {
		return "mount is not installed"
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput()
	if err != nil {
		return fmt.Sprintf("cannot mount a tmpfs (%v: %s)", err, strings.TrimSpace(string(out)))
	}
	// Registered after TempDir's cleanup, so it runs first; the server's
	// cleanup (registered later) has killed the process by then.
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
	return ""
}

// fill writes a file at path until the file system is full.
func fill(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				// Fill the last partial block too.
				for _, n := range []int{4096, 512, 1} {
					for {
						if _, err := f.Write(buf[:n]); err != nil {
							break
						}
					}
				}
				return nil
			}
			return err
		}
	}
}
