package main

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
)

// TestListPagingFlagsRefused: the listing commands refuse a --before-id
// that names no page (0 or below), as the admin API refuses such a
// before_id, with a usage error naming the flag, instead of listing the
// first page as if no cursor had been given; --limit out of range is
// refused the same way, and so is --since at the zero time, which the
// filter reads as no bound (--until there listed every event).
func TestListPagingFlagsRefused(t *testing.T) {
	dbURL := dbtest.SQLiteURL(t)
	st := dbtest.Open(t, dbURL)
	cliSeed(t, st, "polar", "t", hookbox.StatusPending, time.Now(), "p1")
	for _, list := range [][]string{{"events", "list"}, {"rejected", "list"}} {
		for _, bad := range []string{"--before-id=-5", "--before-id=0", "--before-id=-9223372036854775808",
			"--limit=0", "--limit=-1", "--limit=1000000000", "--since=0001-01-01T00:00:00Z"} {
			args := append(append([]string{}, list...), "--db", dbURL, bad)
			out, _, err := runCLI(t, args...)
			flag, _, _ := strings.Cut(bad, "=")
			var ue usageError
			if !errors.As(err, &ue) || !strings.Contains(err.Error(), flag) {
				t.Errorf("hookbox %s = %v, output %q; want a usage error naming %s", strings.Join(args, " "), err, out, flag)
			}
		}
	}
}
