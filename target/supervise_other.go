//go:build !linux

package target

// ExecSupervisor does nothing outside Linux: commands run directly, and
// only KillRunning kills them when the program is about to exit. See the
// Linux version.
func ExecSupervisor() {}
