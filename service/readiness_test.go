package service

import (
	"errors"
	"testing"
	"time"

	"github.com/hookbox/hookbox/server"
)

// TestCommitHealthWindow: a failed commit makes the receiver not ready
// until a commit succeeds, or, when nothing is committed meanwhile (a load
// balancer stopped sending), until commitFailWindow has passed.
func TestCommitHealthWindow(t *testing.T) {
	var h commitHealth
	t0 := time.Unix(1_800_000_000, 0)
	if err := h.ready(t0); err != nil {
		t.Fatalf("ready before any commit: %v", err)
	}
	h.observe(nil, t0)
	h.observe(errors.New("database or disk is full"), t0.Add(time.Second))
	err := h.ready(t0.Add(2 * time.Second))
	if !errors.Is(err, server.ErrCommitsFailing) {
		t.Fatalf("ready 1 s after a failed commit: %v, want ErrCommitsFailing", err)
	}
	if err := h.ready(t0.Add(time.Second + commitFailWindow + time.Millisecond)); err != nil {
		t.Errorf("ready past the window with nothing committed: %v, want nil", err)
	}
	h.observe(nil, t0.Add(3*time.Second))
	if err := h.ready(t0.Add(3 * time.Second)); err != nil {
		t.Errorf("ready after a commit succeeded again: %v, want nil", err)
	}
}
