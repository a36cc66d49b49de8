package main

import (
	"os"

	"github.com/spf13/cobra"

	"github.com/hookbox/hookbox/internal/bench"
)

func newBenchCmd() *cobra.Command {
	f := &bench.Options{}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure ingest and drain against a bare net/http baseline",
		Long: `bench starts each target in this process on a loopback port (or drives
--url), sends unique deliveries signed for --scheme over --connections
keep-alive connections, and prints req/s and latency percentiles of the
accepted (2xx) deliveries and answers by status; it exits non-zero when any
delivery was not accepted. Targets:

  bare            net/http reading the body and answering 202: the machine's
                  own HTTP limit, measured in the same run
  minimal-sqlite  the minimal receiver (internal/bench): verify, group-commit
  minimal-postgres  a narrow row under UNIQUE (source, delivery_id), answer
                  202; the yardstick for hookbox's ingest (ratio_to_minimal)
  naive-sqlite    one transaction and one disk sync per delivery (SQLite FULL)
  sqlite          hookbox on SQLite (group commit, synchronous FULL)
  naive-postgres  one transaction per delivery on PostgreSQL
  postgres        hookbox on PostgreSQL

With --drain, a no-op Go handler drains the queue during the run, and bench
reports the drain rate, the queue lag and the time from 202 to handler
start. With --drain-only N, it stores N events first and times the drain
alone.

With --handler, the sqlite and postgres targets run a Go handler for the
bench source while the load runs, and bench reports ingest as usual plus the
events the handler finished while sending (it does not wait for the queue
to empty):

  noop    an apply-only handler (Pool.Handle) that does nothing
  wait1s  a two-phase handler (worker.TwoPhase): Prepare waits 1 s outside
          any transaction, as a call to another service would; Apply writes
          one row in the transaction that marks the event done. At most
          --concurrency events wait at once, so it finishes about
          concurrency events a second.
  forward the source forwards each event (a forward target, as in a
          config) to a bare HTTP app started by bench on the loopback
          address, which answers 204; with --drain, bench waits for the
          queue to empty and reports the drain rate and the lag.`,
		Example: `  hookbox bench
  hookbox bench --targets bare,minimal-sqlite,sqlite,minimal-postgres,postgres --duration 20s
  hookbox bench --targets bare,naive-sqlite,sqlite,naive-postgres,postgres --postgres postgres://postgres@127.0.0.1/test
  hookbox bench --targets sqlite --drain --duration 60s
  hookbox bench --targets sqlite,postgres --drain-only 200000
  hookbox bench --targets sqlite --handler wait1s --duration 12s
  hookbox bench --targets minimal-sqlite,sqlite --handler forward --drain --duration 20s
  hookbox bench --targets sqlite --preload 10000000 --compare-empty --duration 20s
  hookbox bench --targets postgres --preload 1000000 --purge-during --duration 20s
  hookbox bench --url http://127.0.0.1:8080/webhooks/polar --secret whsec_… --duration 30s`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return bench.Run(cmd.Context(), f, cmd.OutOrStdout()) },
	}
	fl := cmd.Flags()
	fl.StringSliceVar(&f.Targets, "targets", []string{"bare", "sqlite"}, "what to measure, in order: bare, minimal-sqlite, naive-sqlite, sqlite, minimal-postgres, naive-postgres, postgres (a minimal target before hookbox's gives the ratio to it)")
	fl.StringVar(&f.URL, "url", "", "drive a running hookbox at this delivery URL instead of starting targets")
	fl.StringVar(&f.Secret, "secret", "", "signing secret for --url")
	fl.StringVar(&f.Postgres, "postgres", os.Getenv("HOOKBOX_TEST_POSTGRES"), "PostgreSQL URL for the postgres targets")
	fl.StringVar(&f.Scheme, "scheme", "standard-webhooks", "signature scheme: standard-webhooks, stripe, github, hmac, none")
	fl.IntVar(&f.Connections, "connections", 64, "concurrent connections")
	fl.IntVar(&f.Requests, "requests", 200000, "deliveries per target (an upper bound with --duration)")
	fl.DurationVar(&f.Duration, "duration", 0, "send for this long instead of a fixed count")
	fl.IntVar(&f.BodySize, "body-size", 1024, "body size in bytes")
	fl.Float64Var(&f.Duplicates, "duplicates", 0, "share of deliveries that repeat the previous one (0 to 0.5)")
	fl.BoolVar(&f.Drain, "drain", false, "drain the queue with a no-op handler during the run")
	fl.IntVar(&f.DrainOnly, "drain-only", 0, "store this many events, then time the drain alone")
	fl.IntVar(&f.Preload, "preload", 0, "store this many finished events before measuring (table size)")
	fl.BoolVar(&f.CompareEmpty, "compare-empty", false, "with --preload: measure on the empty table first, for the ratio")
	fl.BoolVar(&f.PurgeDuring, "purge-during", false, "with --preload: measure once more while a retention purge deletes the preloaded rows")
	fl.BoolVar(&f.JSON, "json", false, "print results as JSON")
	fl.StringVar(&f.Synchronous, "sqlite-synchronous", "FULL", "SQLite durability for the sqlite target: FULL, NORMAL or OFF (only FULL keeps the promise behind a 202)")
	fl.StringVar(&f.CPUProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	fl.StringVar(&f.Handler, "handler", "", "Go handler for the bench source during the run: noop, wait1s or forward (default: noop with --drain or --drain-only, else none)")
	fl.IntVar(&f.OrderKeys, "order-keys", 0, "with --handler forward: forward through a target with order_by, the deliveries spread over this many order keys")
	fl.IntVar(&f.BatchSize, "batch-size", 0, "workers.batch_size of the sqlite and postgres targets: events a claim takes at most (default 256)")
	fl.IntVar(&f.Concurrency, "concurrency", 0, "workers.concurrency of the sqlite and postgres targets: events prepared (or forwarded) at once (default 32)")
	return cmd
}
