//go:build !linux

package main

// readProcLimits reads no process limit outside Linux.
func readProcLimits() []procLimit { return nil }
