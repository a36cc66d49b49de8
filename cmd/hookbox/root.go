package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"time"

	"github.com/spf13/cobra"

	"github.com/hookbox/hookbox/config"
	esc "github.com/hookbox/hookbox/internal/printable"
)

// globalFlags are shared by every command that touches the database.
type globalFlags struct {
	configPath string
	db         string
	// dbTimeout is --db-timeout as written; dbTimeoutUsed the timeout
	// the command's store was opened with (see cliStoreOptions).
	dbTimeout     string
	dbTimeoutUsed time.Duration
}

func newRootCmd() *cobra.Command {
	g := &globalFlags{}
	root := &cobra.Command{
		Use:   "hookbox",
		Short: "Receive webhooks, store each delivery once, work it to completion",
		Long: `hookbox verifies each webhook delivery, stores it exactly once under the
sender's stable id, answers 202 only after the row is committed, and drains a
durable queue so the work behind each event runs to completion.

The database is chosen by URL: --db, else HOOKBOX_DB, else the config file's
db, else sqlite:hookbox.db. postgres://… selects PostgreSQL.

Exit codes: 0 done, 1 the command failed, 2 the command line is wrong (an
unknown command or flag, a bad flag value, a missing or stray argument) and
nothing was done. health exits 0 or 1 only.`,
		SilenceUsage:  true,
		SilenceErrors: true,
		// Runnable, so that an unknown command reaches the Args check
		// markUsageErrors sets (a usage error, exit 2).
		RunE: func(cmd *cobra.Command, args []string) error { return cmd.Help() },
	}
	root.PersistentFlags().StringVar(&g.configPath, "config", "", "YAML config file")
	root.PersistentFlags().StringVar(&g.db, "db", "", "database URL (sqlite:PATH or postgres://…); default $HOOKBOX_DB, then the config's db, then "+config.DefaultDB)
	root.AddCommand(newServeCmd(g), newMigrateCmd(g), newSendCmd(g), newTailCmd(g), newBenchCmd(), newVersionCmd(), newConfigCmd(g), newHealthCmd(g))
	root.AddCommand(newEventsCmd(g), newReplayCmd(g), newPurgeCmd(g), newTargetsCmd(g), newRejectedCmd(g))
	root.AddCommand(newBackupCmd(g), newRestoreIDsCmd(g))
	root.PersistentFlags().StringVar(&g.dbTimeout, "db-timeout", "", dbTimeoutUsage)
	explainDBErrors(root, g)
	markUsageErrors(root)
	return root
}

// loadConfig reads --config when given; without it, an empty config.
// needSources is for the commands that verify or sign deliveries with
// the sources' secrets (serve, config check, send --source, rejected
// recheck): they need --config, and load it whole (config.Load), so that
// an unset secret's variable is an error. Every other command reads only
// the database, the addresses and the names of sources and targets, and
// loads the file with config.LoadPartial: where the secrets live in the
// service's environment only (docs/deploy.md), an operator's hookbox
// events list must not fail for want of them.
func (g *globalFlags) loadConfig(needSources bool) (*config.Config, error) {
	if g.configPath == "" {
		if needSources {
			return nil, fmt.Errorf("no sources configured: pass --config FILE (see examples/hookbox.yaml)")
		}
		return &config.Config{}, nil
	}
	if !needSources {
		return config.LoadPartial(g.configPath, g.db != "" || os.Getenv("HOOKBOX_DB") != "")
	}
	return config.Load(g.configPath)
}

// dbURL applies the precedence: flag, environment, config, default.
func (g *globalFlags) dbURL(c *config.Config) string {
	switch {
	case g.db != "":
		return g.db
	case os.Getenv("HOOKBOX_DB") != "":
		return os.Getenv("HOOKBOX_DB")
	case c != nil && c.DB != "":
		return c.DB
	}
	return config.DefaultDB
}

// DefaultListen is the address serve listens on when neither --listen nor
// the config's listen names one.
const DefaultListen = ":8080"

// listenAddr applies the precedence for serve's address, which send uses
// to find the server too: the --listen flag, the config's listen, the
// default.
func listenAddr(flag string, c *config.Config) string {
	switch {
	case flag != "":
		return flag
	case c != nil && c.Listen != "":
		return c.Listen
	}
	return DefaultListen
}

// newLogger builds the process logger from the config's log section.
func newLogger(w io.Writer, c config.Log) *slog.Logger {
	level := slog.LevelInfo
	switch c.Level {
	case "debug":
		level = slog.LevelDebug
	case "warn":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	}
	opts := &slog.HandlerOptions{Level: level}
	if c.Format == "json" {
		// The text handler quotes a value that does not print and
		// escapes what does not print in it; the JSON handler escapes
		// C0 controls only, and would write a sender's C1 controls and
		// bidi overrides raw (see printable.JSON).
		return slog.New(slog.NewJSONHandler(esc.JSONWriter(w), opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}
