package service

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox/metrics"
)

// TestSummaryCountsHandshakes: a handshake (a verified URL check answered
// 200 and not stored) is counted as a handshake in the "deliveries" line,
// not as a refusal.
func TestSummaryCountsHandshakes(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	var c deliveryCounts
	c.observe("slack", metrics.OutcomeHandshake, 0)
	c.observe("slack", metrics.OutcomeNew, time.Millisecond)
	c.observe("slack", metrics.OutcomeBadSignature, 0)
	c.log(context.Background(), log, time.Minute)
	line := buf.String()
	for _, want := range []string{"msg=deliveries", "stored=1", "refused=1", "handshake=1"} {
		if !strings.Contains(line, want) {
			t.Errorf("summary line %q lacks %s", line, want)
		}
	}

	// A minute of handshakes alone still makes a line.
	buf.Reset()
	c.observe("slack", metrics.OutcomeHandshake, 0)
	c.log(context.Background(), log, time.Minute)
	if line := buf.String(); !strings.Contains(line, "refused=0") || !strings.Contains(line, "handshake=1") {
		t.Errorf("summary line after one handshake: %q, want refused=0 handshake=1", line)
	}
}
