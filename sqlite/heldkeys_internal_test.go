package sqlite

import (
	"strings"
	"testing"

	"github.com/hookbox/hookbox/routing"
)

// TestHeldKeysOwnKeyPrefix: the count leaves out the keys of a
// delivery's own by routing's prefix, as its index does (INDEXED BY makes
// the statement fail where the two predicates differ).
func TestHeldKeysOwnKeyPrefix(t *testing.T) {
	if want := "NOT GLOB '" + routing.NoKeyPrefix + "*'"; !strings.Contains(heldKeys, want) {
		t.Errorf("heldKeys lacks %q:\n%s", want, heldKeys)
	}
}
