package server

import (
	"testing"
	"time"
)

// TestLogLimiter: one line per key per minute is admitted, the next one
// after the interval says how many were held back, keys are independent.
func TestLogLimiter(t *testing.T) {
	var l logLimiter
	now := time.Now()
	if ok, _ := l.allow("a", now); !ok {
		t.Fatal("first line held back")
	}
	for i := range 5 {
		if ok, _ := l.allow("a", now.Add(time.Duration(i)*time.Second)); ok {
			t.Fatal("a second line within the minute admitted")
		}
	}
	if ok, _ := l.allow("b", now); !ok {
		t.Fatal("another key held back")
	}
	if ok, held := l.allow("a", now.Add(rejectLogEvery)); !ok || held != 5 {
		t.Fatalf("after the interval: %v, %d held; want true, 5", ok, held)
	}
}
