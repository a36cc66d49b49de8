package worker

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/storetest"
)

// fillLog is a queue that records the queues FillOrderKeys is asked to
// key.
type fillLog struct {
	hookbox.Queue
	mu    sync.Mutex
	fills []string
}

func (q *fillLog) FillOrderKeys(ctx context.Context, queue string, key func(string) string) (int, error) {
	q.mu.Lock()
	if !slices.Contains(q.fills, queue) {
		q.fills = append(q.fills, queue)
	}
	q.mu.Unlock()
	return q.Queue.FillOrderKeys(ctx, queue, key)
}

// TestIdleOrderedTargetsCostNoKeyReads: the rounds that give order keys
// to deliveries stored without one read only the ordered queues with
// something due, not every ordered queue: here 40 ordered targets, two
// of which get a delivery without a key (one before the pool starts,
// one while it runs); both reach the target, and no other queue is read.
// Each round read every ordered queue's unfinished deliveries, one
// statement per queue: an idle serve with 588 ordered targets sent 588
// reads to PostgreSQL at start and again every 10 to 30 s.
func TestIdleOrderedTargetsCostNoKeyReads(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		ctx := context.Background()
		s := dbtest.Open(t, dbURL)
		q := &fillLog{Queue: s}
		var mu sync.Mutex
		var got []string
		p := New(q, Options{PollInterval: 10 * time.Millisecond, fillKeysEvery: 20 * time.Millisecond})
		for i := range 40 {
			name := fmt.Sprintf("o/t%d", i)
			p.Route(name, TargetFunc(func(ctx context.Context, ev *hookbox.Event) error {
				mu.Lock()
				got = append(got, ev.DeliveryID)
				mu.Unlock()
				return nil
			}))
			p.SetControls(name, Controls{ByKey: true})
		}
		ingest := func(d hookbox.Delivery) {
			t.Helper()
			if _, err := s.Ingest(ctx, []hookbox.Delivery{d}); err != nil {
				t.Fatal(err)
			}
		}
		await := func(id string) {
			t.Helper()
			deadline := time.Now().Add(20 * time.Second)
			for {
				mu.Lock()
				ok := slices.Contains(got, id)
				mu.Unlock()
				if ok {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("after 20s the targets have not had %s", id)
				}
				time.Sleep(5 * time.Millisecond)
			}
		}
		ingest(storetest.Keyed("o", "t7", "before", ""))
		if err := p.Start(ctx); err != nil {
			t.Fatal(err)
		}
		defer func() {
			stopCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			p.Stop(stopCtx)
		}()
		await("before")
		ingest(storetest.Keyed("o", "t21", "while", ""))
		await("while")
		q.mu.Lock()
		defer q.mu.Unlock()
		idle := slices.DeleteFunc(slices.Clone(q.fills), func(n string) bool { return n == "o/t7" || n == "o/t21" })
		if len(idle) > 0 {
			slices.Sort(idle)
			t.Errorf("order keys were looked for in %d queues with nothing stored: %v", len(idle), idle)
		}
	})
}
