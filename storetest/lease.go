package storetest

import (
	"testing"
	"time"
)

// LeaseTest is the lease a test of AfterHeld asks for; AfterHeld holds
// half as long again.
const LeaseTest = time.Second

// AfterHeld runs op while hold keeps something op needs (SQLite's writer,
// a PostgreSQL lock): hold closes held once it holds it and keeps it until
// release is closed. AfterHeld awaits waiting (op is waiting for what hold
// keeps), holds on for one and a half LeaseTest, lets go, and returns the
// lease end op reports and the time it let go. A store whose leases run
// from their write returns an end after that time; one that counts from
// before the wait returns one already past.
func AfterHeld(t *testing.T, hold func(held chan<- struct{}, release <-chan struct{}) error,
	waiting func() bool, op func() (time.Time, error)) (end, released time.Time) {
	t.Helper()
	held, release, holdErr := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() { holdErr <- hold(held, release) }()
	select {
	case <-held:
	case err := <-holdErr:
		t.Fatalf("hold: %v", err)
	}
	type result struct {
		end time.Time
		err error
	}
	done := make(chan result, 1)
	go func() {
		end, err := op()
		done <- result{end, err}
	}()
	deadline := time.Now().Add(20 * time.Second)
	for !waiting() {
		if time.Now().After(deadline) {
			t.Fatal("op never waited for what hold keeps")
		}
		time.Sleep(5 * time.Millisecond)
	}
	time.Sleep(LeaseTest + LeaseTest/2)
	released = time.Now()
	close(release)
	if err := <-holdErr; err != nil {
		t.Fatal(err)
	}
	r := <-done
	if r.err != nil {
		t.Fatal(r.err)
	}
	return r.end, released
}
