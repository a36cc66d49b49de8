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
