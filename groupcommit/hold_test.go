package groupcommit_test

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookbox/hookbox/groupcommit"
)

// blockedTxn is a transaction whose Commit says it has begun on entered,
// then waits for unblock.
type blockedTxn struct {
	entered chan<- struct{}
	unblock <-chan struct{}
}

func (t *blockedTxn) Add(ctx context.Context, in []int) ([]int, error) { return in, nil }
func (t *blockedTxn) Rollback() error                                  { return nil }
func (t *blockedTxn) Commit(ctx context.Context) error {
	t.entered <- struct{}{}
	<-t.unblock
	return nil
}

// awaitCount polls n until it reaches want or a generous deadline passes.
func awaitCount(t *testing.T, what string, n *atomic.Int32, want int32) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for n.Load() != want {
		if time.Now().After(deadline) {
			t.Fatalf("%s: released %d times, want %d", what, n.Load(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestHoldLastsAsLongAsTheBatch: an item whose Submit returns early (its
// ctx ended) while the batch holding it is blocked keeps its Hold until
// that batch has finished, whether the batch commits, fails or the
// transaction cannot begin; the release then runs exactly once. On the
// normal path it runs exactly once, at its maker's Release, and so it
// does for an item Submit could not queue (the committer closed).
func TestHoldLastsAsLongAsTheBatch(t *testing.T) {
	for _, mode := range []struct {
		name string
		make func(entered chan<- struct{}, unblock <-chan struct{}) *groupcommit.Committer[int, int]
	}{
		{"batches", func(entered chan<- struct{}, unblock <-chan struct{}) *groupcommit.Committer[int, int] {
			return groupcommit.New(func(ctx context.Context, in []int) ([]int, error) {
				entered <- struct{}{}
				<-unblock
				return in, nil
			}, groupcommit.Options{})
		}},
		{"failing batches", func(entered chan<- struct{}, unblock <-chan struct{}) *groupcommit.Committer[int, int] {
			return groupcommit.New(func(ctx context.Context, in []int) ([]int, error) {
				entered <- struct{}{}
				<-unblock
				return nil, errors.New("store down")
			}, groupcommit.Options{})
		}},
		{"pipelined", func(entered chan<- struct{}, unblock <-chan struct{}) *groupcommit.Committer[int, int] {
			return groupcommit.NewPipelined(func(ctx context.Context) (groupcommit.Txn[int, int], error) {
				return &blockedTxn{entered: entered, unblock: unblock}, nil
			}, groupcommit.Options{})
		}},
		{"pipelined, begin fails", func(entered chan<- struct{}, unblock <-chan struct{}) *groupcommit.Committer[int, int] {
			return groupcommit.NewPipelined(func(ctx context.Context) (groupcommit.Txn[int, int], error) {
				entered <- struct{}{}
				<-unblock
				return nil, errors.New("store down")
			}, groupcommit.Options{})
		}},
	} {
		t.Run(mode.name, func(t *testing.T) {
			entered, unblock := make(chan struct{}, 8), make(chan struct{})
			c := mode.make(entered, unblock)
			defer c.Close()
			letGo := sync.OnceFunc(func() { close(unblock) })
			defer letGo() // before Close, also when the test fails early

			// The caller leaves while its batch is blocked.
			var left atomic.Int32
			h := groupcommit.NewHold(func() { left.Add(1) })
			ctx, cancel := context.WithCancel(groupcommit.WithHold(context.Background(), h))
			errc := make(chan error, 1)
			go func() {
				_, err := c.Submit(ctx, 1)
				errc <- err
			}()
			<-entered
			cancel()
			if err := <-errc; !errors.Is(err, context.Canceled) {
				t.Fatalf("Submit whose ctx ended: %v, want context.Canceled", err)
			}
			h.Release()
			h.Release() // a second call does nothing
			if n := left.Load(); n != 0 {
				t.Fatalf("released %d times while the batch holding the item is blocked, want 0", n)
			}
			letGo()
			awaitCount(t, "once the batch finished", &left, 1)

			// The normal path: the release runs at the maker's Release,
			// and only once.
			var normal atomic.Int32
			h = groupcommit.NewHold(func() { normal.Add(1) })
			c.Submit(groupcommit.WithHold(context.Background(), h), 2)
			if n := normal.Load(); n != 0 {
				t.Fatalf("released %d times before the maker let go, want 0", n)
			}
			h.Release()
			h.Release()
			if n := normal.Load(); n != 1 {
				t.Fatalf("normal path: released %d times once Submit returned and the maker let go, want 1", n)
			}

			// Closed: the item is never queued.
			c.Close()
			var closed atomic.Int32
			h = groupcommit.NewHold(func() { closed.Add(1) })
			if _, err := c.Submit(groupcommit.WithHold(context.Background(), h), 3); !errors.Is(err, groupcommit.ErrClosed) {
				t.Fatalf("Submit after Close: %v, want ErrClosed", err)
			}
			h.Release()
			if n := closed.Load(); n != 1 {
				t.Fatalf("closed: released %d times, want 1", n)
			}
			if n := left.Load(); n != 1 {
				t.Fatalf("the left item was released %d times, want 1", n)
			}
		})
	}
}

// BenchmarkSubmit is one Submit of many at once, with and without a Hold
// in its ctx (the server's deliveries carry one).
func BenchmarkSubmit(b *testing.B) {
	for _, withHold := range []bool{false, true} {
		b.Run(map[bool]string{false: "plain", true: "hold"}[withHold], func(b *testing.B) {
			c := groupcommit.New(func(ctx context.Context, in []int) ([]int, error) { return in, nil }, groupcommit.Options{})
			defer c.Close()
			b.SetParallelism(32)
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					ctx := context.Background()
					var h *groupcommit.Hold
					if withHold {
						h = groupcommit.NewHold(func() {})
						ctx = groupcommit.WithHold(ctx, h)
					}
					c.Submit(ctx, 1)
					h.Release()
				}
			})
		})
	}
}
