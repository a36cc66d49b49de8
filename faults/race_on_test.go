//go:build race

package faults_test

// raceEnabled: the test binary has the race detector, so the child is
// built with it too (same build cache, and the server is checked as well).
const raceEnabled = true
