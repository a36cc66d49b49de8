// Command hookbox receives webhooks, stores each delivery exactly once and
// works it to completion. Run `hookbox --help` for the commands.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/hookbox/hookbox/target"
)

func main() {
	// First: a process started as an exec command's supervisor runs it
	// and exits here (see target.ExecSupervisor).
	target.ExecSupervisor()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go exitOnSecondSignal(cancel)
	if code := run(ctx, os.Args[1:], os.Stdout, os.Stderr); code != exitOK {
		cancel()
		os.Exit(code)
	}
}

// sameStop is how soon after the first a signal counts as the same one,
// sent twice: timeout(1) signals its child and then the child's process
// group, which holds the child too, so hookbox run under it gets two
// SIGTERMs at once; a second Ctrl-C comes later than this.
const sameStop = 500 * time.Millisecond

// exitOnSecondSignal cancels the command at the first SIGINT or SIGTERM
// (serve then stops in order, letting running work finish) and exits at
// once at the second, sameStop or more after it. Nothing acknowledged is
// lost by that: deliveries are answered only once committed, and work
// that was running is leased, so it runs again when its lease ends. The
// exec commands running are killed with their process groups first, so
// that none runs on beside the next process's attempt at its event.
func exitOnSecondSignal(cancel context.CancelFunc) {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	awaitSecondSignal(sigs, cancel, time.Now)
	target.KillRunning()
	fmt.Fprintln(os.Stderr, "hookbox: second signal: exiting now; work in flight runs again after its lease")
	os.Exit(130)
}

// awaitSecondSignal calls cancel at the first signal from sigs and
// returns at the first after it that comes sameStop or more later, as now
// tells the time.
func awaitSecondSignal(sigs <-chan os.Signal, cancel context.CancelFunc, now func() time.Time) {
	<-sigs
	first := now()
	cancel()
	for range sigs {
		if now().Sub(first) >= sameStop {
			return
		}
	}
}
