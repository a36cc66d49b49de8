package postgres

import (
	"errors"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// setUserTimeout sets TCP_USER_TIMEOUT on the socket c: the kernel closes
// the connection once data it sent has gone unacknowledged for d (or, with
// keepalive, once probes have gone unanswered for d).
func setUserTimeout(c syscall.RawConn, d time.Duration) error {
	var serr error
	if err := c.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT, int(d.Milliseconds()))
	}); err != nil {
		return err
	}
	return serr
}

// socketTimes reads TCP_USER_TIMEOUT and the keepalive interval back from
// the socket c, for tests.
func socketTimes(c syscall.RawConn) (user, interval time.Duration, err error) {
	var ms, s int
	var uerr, ierr error
	if err := c.Control(func(fd uintptr) {
		ms, uerr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT)
		s, ierr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_KEEPINTVL)
	}); err != nil {
		return 0, 0, err
	}
	return time.Duration(ms) * time.Millisecond, time.Duration(s) * time.Second, errors.Join(uerr, ierr)
}
