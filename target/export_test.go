package target

import "time"

// SetExecWaitDelay sets how long Exec waits, once an attempt is over, for
// its killed processes to exit and its output to close (execWaitDelay),
// and returns what it was.
func SetExecWaitDelay(d time.Duration) (was time.Duration) {
	was, execWaitDelay = execWaitDelay, d
	return was
}
