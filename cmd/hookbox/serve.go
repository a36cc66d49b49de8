package main

import (
	"context"
	"fmt"
	"os"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/service"
	"github.com/hookbox/hookbox/target"
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
			cfg, err := g.loadConfig(true)
			if err != nil {
				return err
			}
			cfg.DB = g.dbURL(cfg)
			cfg.Listen = listenAddr(listen, cfg)
			if v := os.Getenv("RETENTION_DAYS"); v != "" {
				n, err := strconv.Atoi(v)
				if err != nil || n < 0 || n > hookbox.MaxDays {
					return fmt.Errorf("RETENTION_DAYS: want a whole number of days from 0 (off) to %d, got %q", hookbox.MaxDays, v)
				}
				cfg.SetRetentionDays(n)
			}
			reapIfInit(cmd.Context())
			log := newLogger(cmd.ErrOrStderr(), cfg.Log)
			// serve runs forward and exec targets only: a source with
			// neither stores events that nothing here works.
			cfg.Warnings = append(cfg.Warnings, cfg.NoTargetWarnings()...)
			for _, w := range cfg.Warnings {
				log.Warn(w)
			}
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

// reapIfInit starts reaping orphaned processes, until ctx ends, when hookbox
// runs as PID 1 (a container without an init): the background processes of
// killed exec commands are reparented to it and would otherwise stay
// zombies. Anywhere else the real init reaps them. See target.ReapOrphans.
func reapIfInit(ctx context.Context) {
	if os.Getpid() == 1 {
		go target.ReapOrphans(ctx)
	}
}
