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
		// Errors may quote input (flags, a server's reply): escaped.
		fmt.Fprintln(os.Stderr, "hookbox:", printableLines(err.Error()))
		os.Exit(1)
	}
}
