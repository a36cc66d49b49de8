package main

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/config"
	"github.com/hookbox/hookbox/service"
	"github.com/hookbox/hookbox/target"
	"github.com/hookbox/hookbox/tracing"
)

func newServeCmd(g *globalFlags) *cobra.Command {
	var listen string
	cmd := &cobra.Command{
		Use:   "serve",
		Short: "Run the receiver (and its workers) until SIGINT or SIGTERM",
		Example: `  hookbox serve --config examples/hookbox.yaml
  HOOKBOX_DB=postgres://user@db/hookbox hookbox serve --config hookbox.yaml --listen :9000`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := g.serveConfig(listen)
			if err != nil {
				return err
			}
			reapIfInit(cmd.Context())
			log := newLogger(cmd.ErrOrStderr(), cfg.Log)
			if path := os.Getenv("HOOKBOX_CPUPROFILE"); path != "" {
				stop, err := startCPUProfile(path)
				if err != nil {
					return err
				}
				defer stop()
				log.Info("writing a CPU profile until exit", "path", path)
			}
			// Read here, not in serveWarnings: config check runs under
			// other limits than serve does (a shell, not the unit).
			for _, w := range append(serveWarnings(cfg), procLimitWarnings(cfg, readProcLimits())...) {
				if src := cfg.WarningSource(w); src != "" {
					log.Warn(w, "source", src)
				} else {
					log.Warn(w)
				}
			}
			traced, stopTracing, err := tracing.Setup(cmd.Context(), buildInfo().Version)
			if err != nil {
				return err
			}
			if traced {
				log.Info("tracing on: spans go to the OTLP endpoint of the OTEL_EXPORTER_OTLP_* variables")
			}
			defer func() {
				ctx, cancel := context.WithTimeout(context.WithoutCancel(cmd.Context()), 5*time.Second)
				defer cancel()
				if err := stopTracing(ctx); err != nil {
					log.Warn("tracing: spans not flushed at exit", "err", err)
				}
			}()
			svc, err := service.New(cmd.Context(), cfg, log)
			if err != nil {
				return err
			}
			svc.Version = buildInfo().String()
			return svc.ListenAndServe(cmd.Context())
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "", "address to listen on (default the config's listen, else :8080)")
	return cmd
}

// serveConfig loads the config as serve runs it: the database from --db,
// HOOKBOX_DB or the file, the address from --listen or the file, and
// RETENTION_DAYS over the file's retention_days.
func (g *globalFlags) serveConfig(listen string) (*config.Config, error) {
	cfg, err := g.loadConfig(true)
	if err != nil {
		return nil, err
	}
	fileDB := cfg.DB
	cfg.DB = g.dbURL(cfg)
	if fileDB != "" && fileDB != cfg.DB {
		by, fix := "HOOKBOX_DB", "remove db: from the config file where HOOKBOX_DB names the database "+
			"(the systemd unit and the container image set it), or unset HOOKBOX_DB or set it to the database you mean"
		if g.db != "" {
			by, fix = "--db", "remove db: from the config file, or drop --db or set it to the database you mean"
		}
		// The container image and the systemd unit set HOOKBOX_DB: a db:
		// written in the file would otherwise lose to it without a word.
		cfg.Warnings = append(cfg.Warnings, fmt.Sprintf("the config file's db (%s) is not used: %s overrides it with %s; %s",
			config.MaskDB(fileDB), by, config.MaskDB(cfg.DB), fix))
	}
	if err := config.CheckDB(cfg.DB); err != nil {
		return nil, fmt.Errorf("database (--db, HOOKBOX_DB or db:): %w", err)
	}
	if listen != "" {
		if err := config.CheckListenAddress(listen); err != nil {
			return nil, fmt.Errorf("--listen: %w", err)
		}
	}
	if err := cfg.CheckExecDirs(); err != nil {
		return nil, err
	}
	fileListen := cfg.Listen
	cfg.Listen = listenAddr(listen, cfg)
	// The address webhooks arrive on: --listen, the file's listen or the
	// default.
	if cfg.AdminListen != "" && config.SameListenAddress(cfg.Listen, cfg.AdminListen) {
		from := "--listen"
		switch {
		case listen != "":
		case fileListen != "":
			from = "the config's listen"
		default:
			from = "the default, as the config sets no listen"
		}
		return nil, fmt.Errorf("admin_listen: takes %s, the address webhooks arrive on (%s); give it a port of its own, like \"127.0.0.1:9090\", or leave it out to serve /admin/, /metrics and /ui/ on the webhook port", cfg.Listen, from)
	}
	if v := os.Getenv("RETENTION_DAYS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 || n > hookbox.MaxDays {
			return nil, fmt.Errorf("RETENTION_DAYS: want a whole number of days from 0 (off) to %d, got %q", hookbox.MaxDays, v)
		}
		cfg.SetRetentionDays(n)
	}
	return cfg, nil
}

// serveWarnings is every warning serve logs at start about cfg, and all
// that config check prints: the ones Load found (Config.Warnings, which
// other checks extend: example secrets, secrets too short to be masked,
// sources that check no signature and admit every address, ...), sources
// with no target (serve runs forward and exec targets only, so such a
// source's events are stored and nothing here works them), exec
// commands that cannot be run, and settings of the store cfg.DB names, as
// --db and HOOKBOX_DB left it (a sqlite.busy_timeout so short that any
// other writer makes ingest answer 503). Nothing else logs a warning about
// the config at start (service.New logs none), so the two lists cannot
// drift.
func serveWarnings(cfg *config.Config) []string {
	ws := append([]string(nil), cfg.Warnings...)
	ws = append(ws, cfg.NoTargetWarnings()...)
	ws = append(ws, cfg.StoreWarnings()...)
	return append(ws, cfg.ExecWarnings()...)
}

// reapIfInit starts reaping orphaned processes, until ctx ends, when hookbox
// runs as PID 1 (a container without an init): the background processes of
// killed exec commands are reparented to it and would otherwise stay
// zombies. Anywhere else the real init reaps them. See target.ReapOrphans.
func reapIfInit(ctx context.Context) {
	if os.Getpid() == 1 {
		go target.ReapOrphans(ctx)
	}
}

// startCPUProfile writes a CPU profile of the process to path until the
// returned function is called: HOOKBOX_CPUPROFILE, for profiling serve
// under an outside load generator (BENCHMARKS.md).
func startCPUProfile(path string) (func(), error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("HOOKBOX_CPUPROFILE: %w", err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, fmt.Errorf("HOOKBOX_CPUPROFILE: %w", err)
	}
	return func() { pprof.StopCPUProfile(); f.Close() }, nil
}
