//go:build race

package verify

// raceEnabled: the race detector makes sync.Pool drop items and adds
// allocations, so allocation counts are not checked under it.
const raceEnabled = true
