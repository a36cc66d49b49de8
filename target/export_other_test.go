//go:build !linux

package target

// CanSupervise reports whether Exec can run commands under a supervisor
// here.
const CanSupervise = false

// SetSupervised does nothing outside Linux: commands always run directly.
func SetSupervised(bool) (was bool) { return false }
