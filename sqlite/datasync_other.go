//go:build !linux

package sqlite

import "os"

// datasync flushes f to disk.
func datasync(f *os.File) error { return f.Sync() }
