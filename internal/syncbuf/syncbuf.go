// Package syncbuf holds Buffer, a text buffer that goroutines may write
// to while another reads it: the log destination of tests that watch what
// a server, a worker pool or a child process logs.
package syncbuf

import (
	"strings"
	"sync"
)

// Buffer is a strings.Builder guarded by a mutex. The zero value is an
// empty buffer ready to use.
type Buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

// Write appends p; it never fails.
func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
