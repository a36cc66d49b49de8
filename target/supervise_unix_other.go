//go:build unix && !linux

package target

import (
	"os"
	"os/exec"
	"syscall"
	"time"
)

// supervisor returns nil: outside Linux commands run directly (no
// parent-death signal to build a supervisor on).
func supervisor(*exec.Cmd, time.Time) (*supervision, error) { return nil, nil }

// supervisorResult is never called outside Linux.
func supervisorResult(*os.File) (*syscall.WaitStatus, bool, error) { return nil, false, nil }

// lockForParentDeath does nothing outside Linux, which has no parent-death
// signal.
func lockForParentDeath(*syscall.SysProcAttr) func() { return func() {} }
