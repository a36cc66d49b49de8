//go:build !linux

package postgres

import (
	"errors"
	"syscall"
	"time"
)

// setUserTimeout does nothing where TCP_USER_TIMEOUT is not known; the
// worker's StoreTimeout and ingest's step bounds still apply.
func setUserTimeout(syscall.RawConn, time.Duration) error { return nil }

// socketTimes is not known off Linux.
func socketTimes(syscall.RawConn) (user, interval time.Duration, err error) {
	return 0, 0, errors.New("TCP_USER_TIMEOUT is Linux's")
}
