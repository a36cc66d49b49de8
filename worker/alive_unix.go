//go:build unix

package worker

import (
	"errors"
	"syscall"
)

// processAlive reports whether a process with this pid runs on this
// machine (one of another user counts).
func processAlive(pid int) bool {
	if pid <= 0 {
		return true // unknown: assume alive, and wait for staleness
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
