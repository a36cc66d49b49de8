package postgres

import (
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

// userTimeout reads TCP_USER_TIMEOUT back from the socket c, for tests.
func userTimeout(c syscall.RawConn) (time.Duration, error) {
	var ms int
	var gerr error
	if err := c.Control(func(fd uintptr) {
		ms, gerr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT)
	}); err != nil {
		return 0, err
	}
	return time.Duration(ms) * time.Millisecond, gerr
}
