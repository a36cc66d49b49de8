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
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go exitOnSecondSignal(cancel)
	if err := newRootCmd().ExecuteContext(ctx); err != nil {
		// Errors may quote input (flags, a server's reply): escaped.
		fmt.Fprintln(os.Stderr, "hookbox:", printableLines(err.Error()))
		os.Exit(1)
	}
}

// exitOnSecondSignal cancels the command at the first SIGINT or SIGTERM
// (serve then stops in order, letting running work finish) and exits at
// once at the second. Nothing acknowledged is lost by that: deliveries
// are answered only once committed, and work that was running is leased,
// so it runs again when its lease ends.
func exitOnSecondSignal(cancel context.CancelFunc) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	<-sigs
	cancel()
	<-sigs
	fmt.Fprintln(os.Stderr, "hookbox: second signal: exiting now; work in flight runs again after its lease")
	os.Exit(130)
}
