package server

import (
	"sync"
	"time"
)

// rejectLogEvery is how often, per source, a refused delivery is logged at
// info; the others of that interval go to debug. A flood of bad requests
// must not become a flood of log lines (each costs CPU on the delivery
// path, and their volume is the attacker's to choose); the rejected
// deliveries' log (hookbox rejected list) and the periodic deliveries
// summary count them all.
const rejectLogEvery = time.Minute

// logLimiter admits one line per key per interval. Keys are configured
// source names plus "" for every unknown one, so its map stays bounded.
type logLimiter struct {
	mu   sync.Mutex
	last map[string]time.Time
	skip map[string]int // lines sent to debug since the last admitted
}

// allow reports whether a line for key may be logged at info now, and how
// many were held back since the last one that was.
func (l *logLimiter) allow(key string, now time.Time) (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.last == nil {
		l.last, l.skip = map[string]time.Time{}, map[string]int{}
	}
	if t, ok := l.last[key]; ok && now.Sub(t) < rejectLogEvery {
		l.skip[key]++
		return false, 0
	}
	held := l.skip[key]
	l.last[key], l.skip[key] = now, 0
	return true, held
}
