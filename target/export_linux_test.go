package target

// CanSupervise reports whether Exec can run commands under a supervisor
// here.
const CanSupervise = true

// SetSupervised makes Exec run commands under a supervisor (on) or
// directly (off), as if ExecSupervisor had been called or not, and
// returns what it did before.
func SetSupervised(on bool) (was bool) { return supervised.Swap(on) }

// StartError is e's explanation of err, a failure to start its command.
func (e *Exec) StartError(err error) error { return e.startError(err) }
