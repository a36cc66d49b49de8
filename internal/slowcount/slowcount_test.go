package slowcount

import (
	"errors"
	"testing"
)

// TestKeptOnlyAtOrAboveExactBelow: below ExactBelow each Get counts; at
// or above it, the count is kept; a failed count is not kept.
func TestKeptOnlyAtOrAboveExactBelow(t *testing.T) {
	var c Cache
	calls := 0
	count := func(n int, err error) func() (int, error) {
		return func() (int, error) { calls++; return n, err }
	}
	for i := range 3 {
		if n, _ := c.Get(count(ExactBelow-1-i, nil)); n != ExactBelow-1-i {
			t.Fatalf("below ExactBelow: got %d, want the new count %d", n, ExactBelow-1-i)
		}
	}
	if _, err := c.Get(count(0, errors.New("down"))); err == nil {
		t.Fatal("a failed count returned no error")
	}
	if n, _ := c.Get(count(ExactBelow, nil)); n != ExactBelow {
		t.Fatalf("got %d, want %d", n, ExactBelow)
	}
	calls = 0
	if n, _ := c.Get(count(7, nil)); n != ExactBelow || calls != 0 {
		t.Fatalf("at ExactBelow: got %d after %d counts, want the kept %d and none", n, calls, ExactBelow)
	}
}
