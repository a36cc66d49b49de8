package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/spf13/cobra"
)

func newHealthCmd(g *globalFlags) *cobra.Command {
	var (
		listen  string
		live    bool
		timeout time.Duration
	)
	cmd := &cobra.Command{
		Use:   "health",
		Short: "Exit 0 when the local hookbox answers it is ready",
		Long: `health asks the hookbox serve on this machine for GET /readyz (its store
answers) or, with --live, GET /healthz (the process answers), and exits 0 on
200 and 1 otherwise. It finds serve as send does: --listen, else the
config's listen, else :8080, on the loopback address. It is the container
image's health check, where there is no curl.`,
		Example: `  hookbox health
  hookbox health --config /etc/hookbox/hookbox.yaml --live`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			cfg, err := g.loadConfig(false)
			if err != nil {
				return err
			}
			path := "/readyz"
			if live {
				path = "/healthz"
			}
			target := localURL(listenAddr(listen, cfg)) + path
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
			if err != nil {
				return err
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				return fmt.Errorf("%s: %w", target, err)
			}
			defer resp.Body.Close()
			io.Copy(io.Discard, io.LimitReader(resp.Body, 4096))
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s: %s", target, resp.Status)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s: %s\n", target, resp.Status)
			return nil
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "", "the address hookbox serve listens on, as its --listen (default the config's listen, else "+DefaultListen+")")
	cmd.Flags().BoolVar(&live, "live", false, "ask /healthz (the process answers) instead of /readyz (the store answers too)")
	cmd.Flags().DurationVar(&timeout, "timeout", 3*time.Second, "give up after this long")
	return cmd
}
