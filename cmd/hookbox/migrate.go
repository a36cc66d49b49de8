package main

import (
	"fmt"

	"github.com/spf13/cobra"

	"github.com/hookbox/hookbox/service"
)

func newMigrateCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "migrate",
		Short: "Create or upgrade the database schema (serve does this on start too)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := g.loadConfig(false)
			if err != nil {
				return err
			}
			st, err := service.OpenStore(cmd.Context(), g.dbURL(cfg), service.StoreOptions{})
			if err != nil {
				return err
			}
			fmt.Fprintln(cmd.OutOrStdout(), "schema is up to date")
			return st.Close()
		},
	}
}
