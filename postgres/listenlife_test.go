package postgres_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookbox/hookbox/postgres/pgtest"
)

// TestListenConnectionRenewed: the connection that listens for wake-ups
// is taken out of the pool, whose lifetime (pool_max_conn_lifetime) then
// no longer renews it; it ends itself at that age and Listen listens on a
// new one. It lived as long as the process, so after a switch of the
// server behind the URL, wake-ups stopped and workers fell back to
// polling.
func TestListenConnectionRenewed(t *testing.T) {
	base := pgtest.URL(t)
	app := fmt.Sprintf("hblisten%d", time.Now().UnixNano())
	sep := "?"
	if strings.Contains(base, "?") {
		sep = "&"
	}
	s := open(t, base+sep+"pool_max_conn_lifetime=1s&pool_max_conn_lifetime_jitter=0s&application_name="+app)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wakes := make(chan struct{}, 100)
	go s.Listen(ctx, func() {
		select {
		case wakes <- struct{}{}:
		default:
		}
	})
	admin, err := pgx.Connect(context.Background(), os.Getenv(pgtest.EnvURL))
	if err != nil {
		t.Fatal(err)
	}
	defer admin.Close(context.Background())
	listener := func() int {
		var pid int
		err := admin.QueryRow(context.Background(),
			`SELECT pid FROM pg_stat_activity WHERE application_name = $1 AND query LIKE 'LISTEN%'`, app).Scan(&pid)
		if err != nil {
			return 0
		}
		return pid
	}
	first := 0
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		pid := listener()
		if first == 0 {
			first = pid
		} else if pid != 0 && pid != first {
			return // listening on a new connection
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 20 s the same connection (pid %d) still listens, with a lifetime of 1 s", first)
		}
	}
}
