package lograte

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestLimiter: one line per key per interval is admitted, the next one
// after the interval says how many were held back, keys are independent.
func TestLimiter(t *testing.T) {
	var l Limiter
	now := time.Now()
	if ok, _ := l.Allow("a", now); !ok {
		t.Fatal("first line held back")
	}
	for i := range 5 {
		if ok, _ := l.Allow("a", now.Add(time.Duration(i)*time.Second)); ok {
			t.Fatal("a second line within the minute admitted")
		}
	}
	if ok, _ := l.Allow("b", now); !ok {
		t.Fatal("another key held back")
	}
	if ok, held := l.Allow("a", now.Add(DefaultEvery)); !ok || held != 5 {
		t.Fatalf("after the interval: %v, %d held; want true, 5", ok, held)
	}
}

// TestLogWritesOneLinePerInterval: of a thousand lines for one key in an
// interval, one is written at the level asked and the rest at debug, whose
// attributes are built only when debug is on.
func TestLogWritesOneLinePerInterval(t *testing.T) {
	var buf bytes.Buffer
	lg := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	var l Limiter
	built := 0
	for range 1000 {
		l.Log(context.Background(), lg, slog.LevelWarn, "k", "refused", func() []slog.Attr {
			built++
			return []slog.Attr{slog.String("path", "/x")}
		})
	}
	if n := strings.Count(buf.String(), "refused"); n != 1 || built != 1 {
		t.Errorf("%d lines written, attributes built %d times; want 1 and 1:\n%s", n, built, buf.String())
	}
}

// TestLogCleared: after a run of failure lines (written or held back), the
// first success writes one info line with their number; later successes,
// and successes of a key that never failed, write none.
func TestLogCleared(t *testing.T) {
	var buf bytes.Buffer
	lg := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	var l Limiter
	ctx := context.Background()
	l.LogCleared(ctx, lg, "store", "store works again")
	for range 7 {
		l.Log(ctx, lg, slog.LevelError, "store", "store failed", func() []slog.Attr { return nil })
	}
	l.Log(ctx, lg, slog.LevelError, "other", "other failed", func() []slog.Attr { return nil })
	l.LogCleared(ctx, lg, "store", "store works again")
	l.LogCleared(ctx, lg, "store", "store works again")
	out := buf.String()
	if n := strings.Count(out, "store works again"); n != 1 || !strings.Contains(out, "failures=7") {
		t.Fatalf("want one line with failures=7 after the run, none before or after it:\n%s", out)
	}
	if _, _, ok := l.Cleared("other"); !ok {
		t.Fatal("another key's run was cleared with store's")
	}
}

// TestLogClearedSpacedOut: a key that fails and succeeds in turn writes
// its failure line once per interval, and the line saying the failures
// ended only after a run with a written line: not one per switch (the
// first version wrote 36 in 2 s of claims failing half the time).
func TestLogClearedSpacedOut(t *testing.T) {
	var buf bytes.Buffer
	lg := slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelInfo}))
	var l Limiter
	ctx := context.Background()
	for range 100 {
		l.Log(ctx, lg, slog.LevelError, "claim", "claim failed", func() []slog.Attr { return nil })
		l.LogCleared(ctx, lg, "claim", "claim works again")
	}
	out := buf.String()
	if f, c := strings.Count(out, "claim failed"), strings.Count(out, "claim works again"); f != 1 || c != 1 {
		t.Fatalf("100 failures each followed by a success wrote %d failure and %d recovery lines, want 1 and 1:\n%s", f, c, out)
	}
}
