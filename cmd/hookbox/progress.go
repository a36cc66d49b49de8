package main

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/mattn/go-isatty"
)

// isTerminal reports whether w is a terminal. A writer with an
// IsTerminal method says so itself (a test's stand-in for one).
func isTerminal(w io.Writer) bool {
	if t, ok := w.(interface{ IsTerminal() bool }); ok {
		return t.IsTerminal()
	}
	f, ok := w.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}

// progressInterval is how often a progress line is redrawn while nothing
// new is reported, to keep its elapsed time current.
const progressInterval = 250 * time.Millisecond

// progress keeps one line on a terminal up to date with what a long
// operation has done so far and how long it has run ("purging: 12000
// deleted, 8s"). It draws nothing when its writer is not a terminal, so
// piped and logged output stays clean. Safe for concurrent use.
type progress struct {
	w     io.Writer
	start time.Time
	stop  chan struct{}
	done  chan struct{}

	mu    sync.Mutex
	text  string
	width int
}

// startProgress starts redrawing what, then text as update sets it, on w
// when w is a terminal; it returns nil otherwise. A nil *progress does
// nothing.
func startProgress(w io.Writer, what string) *progress {
	if !isTerminal(w) {
		return nil
	}
	p := &progress{w: w, start: time.Now(), stop: make(chan struct{}), done: make(chan struct{}), text: what}
	p.draw()
	go func() {
		defer close(p.done)
		t := time.NewTicker(progressInterval)
		defer t.Stop()
		for {
			select {
			case <-p.stop:
				return
			case <-t.C:
				p.draw()
			}
		}
	}()
	return p
}

// update sets the line's text and redraws it.
func (p *progress) update(format string, args ...any) {
	if p == nil {
		return
	}
	p.mu.Lock()
	p.text = fmt.Sprintf(format, args...)
	p.mu.Unlock()
	p.draw()
}

// draw writes the line over the previous one.
func (p *progress) draw() {
	p.mu.Lock()
	defer p.mu.Unlock()
	line := fmt.Sprintf("%s, %s", p.text, time.Since(p.start).Round(time.Second))
	pad := max(0, p.width-len(line))
	p.width = len(line)
	fmt.Fprintf(p.w, "\r%s%*s", line, pad, "")
}

// end stops redrawing and clears the line, so that the command's own
// output starts on a clean line.
func (p *progress) end() {
	if p == nil {
		return
	}
	close(p.stop)
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "\r%*s\r", p.width, "")
}
