package postgres_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/postgres"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/storetest"
)

// TestExecModeURL: pgx takes default_query_exec_mode from the URL. With
// exec or simple_protocol (which pgx suggests behind a transaction
// pooler) it sent the headers, meant as jsonb, as bytea's hex, and every
// delivery was refused as bad: answered 400, none stored. Open now
// refuses those two, saying what to write, and the other modes store
// deliveries (found by a helper's review, session 44).
func TestExecModeURL(t *testing.T) {
	for _, mode := range []string{"cache_statement", "cache_describe", "describe_exec", "exec", "simple_protocol"} {
		t.Run(mode, func(t *testing.T) {
			base := pgtest.URL(t)
			sep := "?"
			if strings.Contains(base, "?") {
				sep = "&"
			}
			url := base + sep + "default_query_exec_mode=" + mode
			if mode == "exec" || mode == "simple_protocol" {
				s, err := postgres.Open(context.Background(), url, postgres.Options{})
				if err == nil {
					s.Close()
				}
				if err == nil || !strings.Contains(err.Error(), "default_query_exec_mode="+mode+" is not supported") {
					t.Errorf("Open with default_query_exec_mode=%s: %v, want it refused", mode, err)
				}
				return
			}
			s := open(t, url)
			for i := range 3 {
				if _, err := s.Ingest(context.Background(), []hookbox.Delivery{storetest.Delivery("s", fmt.Sprint(i))}); err != nil {
					t.Fatalf("ingest with default_query_exec_mode=%s: %v", mode, err)
				}
			}
		})
	}
}
