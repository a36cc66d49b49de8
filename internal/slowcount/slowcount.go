// Package slowcount keeps a count that takes a read of a whole table to
// make, such as the done events of a store's Stats, so that a reader
// called at every scrape does not make it at every call.
//
// Guarantees: a count below ExactBelow is made again at every call, so
// it is exact; at or above it, a count serves for Recount, or ten times
// as long as it took to make if that is longer, and is then made again.
// Callers wait for a count another caller is making rather than start
// their own, so at most one runs at a time. A count that fails is not
// kept.
package slowcount

import (
	"sync"
	"time"
)

// ExactBelow is the count below which Get makes it again at every call.
const ExactBelow = 100_000

// Recount is how long a count at or above ExactBelow serves Get, at the
// least.
const Recount = time.Minute

// Cache holds the last count. Its zero value is ready to use.
type Cache struct {
	mu   sync.Mutex
	n    int
	at   time.Time // when the count started; zero: never counted
	took time.Duration
}

// Get returns the last count while it is fresh enough (see the package
// comment), else the count that count makes now.
func (c *Cache) Get(count func() (int, error)) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.at.IsZero() && c.n >= ExactBelow && time.Since(c.at) < max(Recount, 10*c.took) {
		return c.n, nil
	}
	start := time.Now()
	n, err := count()
	if err != nil {
		return 0, err
	}
	c.n, c.at, c.took = n, start, time.Since(start)
	return n, nil
}
