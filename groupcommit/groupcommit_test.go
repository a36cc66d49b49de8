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

// TestOutputsReachTheirCallers: each caller gets the output computed from its
// own input, and concurrent callers share calls.
func TestOutputsReachTheirCallers(t *testing.T) {
	var calls, maxSize atomic.Int64
	gate := make(chan struct{})
	c := groupcommit.New(func(ctx context.Context, in []int) ([]int, error) {
		if calls.Add(1) == 1 {
			<-gate // hold the first batch so the others pile up behind it
		}
		if n := int64(len(in)); n > maxSize.Load() {
			maxSize.Store(n)
		}
		out := make([]int, len(in))
		for i, v := range in {
			out[i] = v * 2
		}
		return out, nil
	}, groupcommit.Options{})
	defer c.Close()

	const n = 200
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := c.Submit(context.Background(), i)
			if err != nil || got != 2*i {
				errs <- errors.New("wrong output")
			}
		}()
	}
	// Release the first batch once the rest are queued behind it.
	deadline := time.Now().Add(10 * time.Second)
	for calls.Load() == 0 && time.Now().Before(deadline) {
		time.Sleep(time.Millisecond)
	}
	close(gate)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if calls.Load() >= n {
		t.Errorf("%d calls for %d items: no batching", calls.Load(), n)
	}
	if maxSize.Load() < 2 {
		t.Errorf("largest batch %d, want batches to form", maxSize.Load())
	}
}

func TestErrorFailsWholeBatch(t *testing.T) {
	boom := errors.New("commit failed")
	c := groupcommit.New(func(ctx context.Context, in []string) ([]bool, error) {
		return nil, boom
	}, groupcommit.Options{})
	defer c.Close()
	var wg sync.WaitGroup
	for range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Submit(context.Background(), "x"); !errors.Is(err, boom) {
				t.Errorf("Submit error = %v, want %v", err, boom)
			}
		}()
	}
	wg.Wait()
}

func TestPanicBecomesError(t *testing.T) {
	c := groupcommit.New(func(ctx context.Context, in []int) ([]int, error) {
		panic("bad batch")
	}, groupcommit.Options{})
	defer c.Close()
	if _, err := c.Submit(context.Background(), 1); err == nil {
		t.Fatal("Submit after a panicking batch returned no error")
	}
}

func TestShortResultIsError(t *testing.T) {
	c := groupcommit.New(func(ctx context.Context, in []int) ([]int, error) {
		return nil, nil
	}, groupcommit.Options{})
	defer c.Close()
	if _, err := c.Submit(context.Background(), 1); err == nil {
		t.Fatal("a batch function that returned no outputs was taken as success")
	}
}

func TestCloseFlushesAndRefuses(t *testing.T) {
	var processed atomic.Int64
	c := groupcommit.New(func(ctx context.Context, in []int) ([]int, error) {
		time.Sleep(time.Millisecond)
		processed.Add(int64(len(in)))
		return in, nil
	}, groupcommit.Options{MaxBatch: 4, MaxWait: time.Millisecond})
	var wg sync.WaitGroup
	var ok atomic.Int64
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Submit(context.Background(), i); err == nil {
				ok.Add(1)
			}
		}()
	}
	wg.Wait()
	c.Close()
	if processed.Load() != ok.Load() || ok.Load() != 50 {
		t.Errorf("processed %d, acknowledged %d, want 50 and 50", processed.Load(), ok.Load())
	}
	if _, err := c.Submit(context.Background(), 1); !errors.Is(err, groupcommit.ErrClosed) {
		t.Errorf("Submit after Close = %v, want ErrClosed", err)
	}
}

func TestMaxBatchIsHonoured(t *testing.T) {
	var over atomic.Bool
	c := groupcommit.New(func(ctx context.Context, in []int) ([]int, error) {
		if len(in) > 3 {
			over.Store(true)
		}
		time.Sleep(100 * time.Microsecond)
		return in, nil
	}, groupcommit.Options{MaxBatch: 3, Flushers: 2})
	defer c.Close()
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Add(1)
		go func() { defer wg.Done(); c.Submit(context.Background(), i) }()
	}
	wg.Wait()
	if over.Load() {
		t.Error("a batch exceeded MaxBatch")
	}
}

// TestMaxWaitWhileMoreComing: with MaxWait, the flusher waits for more
// items while MoreComing reports true, so an item submitted after the
// first shares its call; once MoreComing reports false, the flusher goes
// with what it has without waiting out MaxWait (an hour here: the test
// would hang if it did).
func TestMaxWaitWhileMoreComing(t *testing.T) {
	var more atomic.Bool
	asked := make(chan struct{}, 1) // the flusher waits with items in hand
	moreComing := func() bool {
		if !more.Load() {
			return false
		}
		select {
		case asked <- struct{}{}:
		default:
		}
		return true
	}
	sizes := make(chan int, 10)
	c := groupcommit.New(func(ctx context.Context, in []int) ([]int, error) {
		sizes <- len(in)
		return in, nil
	}, groupcommit.Options{MaxWait: time.Hour, MoreComing: moreComing})
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()

	// Nothing more coming: the lone item goes at once.
	if _, err := c.Submit(ctx, 1); err != nil {
		t.Fatalf("a lone item waited for more that was not coming: %v", err)
	}
	if n := <-sizes; n != 1 {
		t.Fatalf("first call had %d items, want 1", n)
	}

	// More coming: the first item waits for the second, and goes with
	// it; the flusher stops waiting once MoreComing turns false.
	more.Store(true)
	first := make(chan error, 1)
	go func() { _, err := c.Submit(ctx, 2); first <- err }()
	select {
	case <-asked:
	case <-ctx.Done():
		t.Fatal("the flusher never asked whether more was coming")
	}
	select {
	case n := <-sizes:
		t.Fatalf("a call of %d items ran while more was coming", n)
	default:
	}
	more.Store(false)
	if _, err := c.Submit(ctx, 3); err != nil {
		t.Fatal(err)
	}
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	if n := <-sizes; n != 2 {
		t.Fatalf("the waiting item and the next went in a call of %d, want 2", n)
	}
}
