// Command hookbox receives webhooks, stores each delivery exactly once and
// works it to completion. Run `hookbox --help` for the commands.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := newRootCmd().ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "hookbox:", err)
		os.Exit(1)
	}
}
