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
	// The keys from the prefix up to the prefix with its last character
	// the next one: every key that starts with the prefix.
	p := routing.NoKeyPrefix
	next := p[:len(p)-1] + string(rune(p[len(p)-1]+1))
	if want := "(d.order_key < '" + p + "' OR d.order_key >= '" + next + "')"; !strings.Contains(heldKeys, want) {
		t.Errorf("heldKeys lacks %q:\n%s", want, heldKeys)
	}
}
