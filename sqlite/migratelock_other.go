//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package sqlite

import "context"

// lockMigrations takes no lock here: there is no flock(2). Two processes
// migrating a new file at once may then fail as described in
// migratelock_flock.go; starting one first avoids it.
func lockMigrations(ctx context.Context, path string) (unlock func(), err error) {
	return func() {}, nil
}

// lockServe takes no lock here: there is no flock(2). Run one serve per
// file.
func lockServe(path string) (release func(), err error) {
	return func() {}, nil
}
