package service

import "testing"

// TestDisplayDB: the start line's database never shows a password, in the
// URL's user part or in its query.
func TestDisplayDB(t *testing.T) {
	for in, want := range map[string]string{
		"sqlite:hookbox.db": "sqlite:hookbox.db",
		"postgres://app:pw-secret-1@db.internal:5432/hooks?sslmode=disable&password=pw-secret-2": "postgres://app@db.internal:5432/hooks",
		"postgresql://db.internal/hooks": "postgresql://db.internal/hooks",
	} {
		if got := displayDB(in); got != want {
			t.Errorf("displayDB(%q) = %q, want %q", in, got, want)
		}
	}
}
