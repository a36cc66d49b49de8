package groupcommit_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookbox/hookbox/groupcommit"
)

// submitTimed submits 0..n-1 at once and returns each error and how long
// each Submit took. Each caller adds one to calling, if not nil, as it
// calls Submit.
func submitTimed(c *groupcommit.Committer[int, int], n int, calling *atomic.Int64) ([]error, []time.Duration) {
	errs := make([]error, n)
	took := make([]time.Duration, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if calling != nil {
				calling.Add(1)
			}
			start := time.Now()
			_, errs[i] = c.Submit(context.Background(), i)
			took[i] = time.Since(start)
		}()
	}
	wg.Wait()
	return errs, took
}

// TestPipelinedBeginFailureFailsEveryWaiter: when Begin fails, every
// delivery waiting behind it gets the error at once; none pays a Begin of
// its own (30 waiters with a 100 ms Begin used to take 3 s). Counted in
// Begins, not timed: each caller waits about as many Begins as it takes
// turns in, whatever the machine's speed.
func TestPipelinedBeginFailureFailsEveryWaiter(t *testing.T) {
	down := errors.New("store down")
	var begins atomic.Int64
	gate := make(chan struct{})
	begin := func(ctx context.Context) (groupcommit.Txn[int, int], error) {
		if begins.Add(1) == 1 {
			<-gate // hold the first Begin until every caller is queued
		}
		time.Sleep(100 * time.Millisecond)
		return nil, down
	}
	c := groupcommit.NewPipelined(begin, groupcommit.Options{})
	defer c.Close()
	const n = 30
	var errs []error
	var took []time.Duration
	var calling atomic.Int64
	done := make(chan struct{})
	go func() { errs, took = submitTimed(c, n, &calling); close(done) }()
	// Every caller is in Submit, whose queue has room: each is queued
	// well within the 100 ms the first Begin still takes once released.
	for deadline := time.Now().Add(10 * time.Second); begins.Load() == 0 || calling.Load() < n; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			close(gate)
			t.Fatalf("after 10 s, %d Begins and %d of %d callers in Submit", begins.Load(), calling.Load(), n)
		}
	}
	close(gate)
	<-done
	var slowest time.Duration
	for i := range n {
		if !errors.Is(errs[i], down) {
			t.Errorf("item %d: %v, want %v", i, errs[i], down)
		}
		slowest = max(slowest, took[i])
	}
	t.Logf("slowest caller waited %v", slowest)
	if b := begins.Load(); b > 3 {
		t.Errorf("%d Begins for %d callers queued behind one failure, want the one: callers paid Begins of their own", b, n)
	}
}

// TestPipelinedCommitFailureFailsTheNextTransaction: when a commit fails,
// the transaction filling behind it and the callers queued are answered
// with the error at once, not after a commit of their own, and not after
// that transaction's rollback either: against a server that stopped
// answering, a rollback takes as long as the store lets it.
func TestPipelinedCommitFailureFailsTheNextTransaction(t *testing.T) {
	for _, stuck := range []bool{false, true} {
		t.Run(fmt.Sprintf("rollback stuck=%v", stuck), func(t *testing.T) {
			var unstick chan struct{}
			if stuck {
				unstick = make(chan struct{})
			}
			commitFailureAnswersFast(t, unstick)
		})
	}
}

// commitFailureAnswersFast runs TestPipelinedCommitFailureFailsTheNextTransaction;
// a non-nil unstick holds every Rollback until the test ends.
func commitFailureAnswersFast(t *testing.T, unstick chan struct{}) {
	st := &fakeStore{holdCommit: make(chan struct{})}
	var commits atomic.Int64
	down := errors.New("commit refused")
	c := groupcommit.NewPipelined(func(ctx context.Context) (groupcommit.Txn[int, int], error) {
		return &failingCommitTxn{fakeTxn: fakeTxn{st: st}, commits: &commits, err: down, unstick: unstick}, nil
	}, groupcommit.Options{})
	defer c.Close()
	if unstick != nil {
		defer close(unstick) // before Close, which waits for the rollbacks
	}
	first := make(chan error, 1)
	go func() { _, err := c.Submit(context.Background(), 1000); first <- err }()
	for commits.Load() == 0 {
		time.Sleep(time.Millisecond)
	}
	// Three slices of 16 callers (the filler adds 16 at a time while a
	// commit runs), each sent once the one before is added: every caller
	// is then in the transaction behind the held commit before it fails,
	// and none arrives after.
	const slices, slice = 3, 16
	var errs []error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for k := range slices {
		wg.Add(1)
		go func() {
			defer wg.Done()
			e, _ := submitTimed(c, slice, nil)
			mu.Lock()
			errs = append(errs, e...)
			mu.Unlock()
		}()
		for st.added.Load() < int64(1+slice*(k+1)) {
			time.Sleep(time.Millisecond)
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	close(st.holdCommit) // the first commit now fails
	if err := <-first; !errors.Is(err, down) {
		t.Fatalf("first = %v", err)
	}
	// Not timed to the millisecond: a caller left for a commit of its own
	// shows in the count of commits below, and one left for the stuck
	// rollback is never answered while the test runs.
	select {
	case <-done:
	case <-time.After(20 * time.Second):
		t.Fatal("the callers behind a failed commit were not answered within 20 s")
	}
	for i, err := range errs {
		if err == nil {
			t.Errorf("item %d acknowledged", i)
		}
	}
	if n := commits.Load(); n != 1 {
		t.Errorf("%d commits; the transaction behind a failed commit should not be committed", n)
	}
}

// failingCommitTxn holds its commit like fakeTxn, counts it and then fails.
// With unstick set, its Rollback waits until unstick is closed.
type failingCommitTxn struct {
	fakeTxn
	commits *atomic.Int64
	err     error
	unstick chan struct{}
}

func (t *failingCommitTxn) Rollback() error {
	if t.unstick != nil {
		<-t.unstick
	}
	return t.fakeTxn.Rollback()
}

func (t *failingCommitTxn) Commit(ctx context.Context) error {
	t.commits.Add(1)
	<-t.st.holdCommit
	return t.err
}

// itemErrors fails the items at the given positions of one Add.
type itemErrors map[int]error

func (e itemErrors) Error() string         { return fmt.Sprintf("%d items refused", len(e)) }
func (e itemErrors) ItemError(i int) error { return e[i] }

// revisingTxn refuses odd items with an ItemErrors and, at Commit, revises
// the outputs it returned (as a store that redid its transaction would).
type revisingTxn struct {
	outs [][]int
}

func (t *revisingTxn) Add(ctx context.Context, in []int) ([]int, error) {
	out := make([]int, len(in))
	bad := itemErrors{}
	for i, v := range in {
		if v%2 == 1 {
			bad[i] = fmt.Errorf("odd %d", v)
			continue
		}
		out[i] = -1 // revised at Commit
	}
	t.outs = append(t.outs, out)
	if len(bad) > 0 {
		return out, bad
	}
	return out, nil
}

func (t *revisingTxn) Commit(ctx context.Context) error {
	for _, out := range t.outs {
		for i := range out {
			if out[i] == -1 {
				out[i] = 7
			}
		}
	}
	return nil
}

func (t *revisingTxn) Rollback() error { return nil }

// TestItemErrorsFailOnlyTheirItems: an Add error that names items fails
// those, the others are committed, and their outputs are read after Commit.
func TestItemErrorsFailOnlyTheirItems(t *testing.T) {
	c := groupcommit.NewPipelined(func(ctx context.Context) (groupcommit.Txn[int, int], error) {
		return &revisingTxn{}, nil
	}, groupcommit.Options{})
	defer c.Close()
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := c.Submit(context.Background(), i)
			switch {
			case i%2 == 1 && err == nil:
				t.Errorf("odd item %d acknowledged", i)
			case i%2 == 0 && (err != nil || got != 7):
				t.Errorf("even item %d = %d, %v; want 7 (the output as of Commit)", i, got, err)
			}
		}()
	}
	wg.Wait()

	f := groupcommit.New(func(ctx context.Context, in []int) ([]int, error) {
		out := make([]int, len(in))
		bad := itemErrors{}
		for i, v := range in {
			out[i] = v
			if v%2 == 1 {
				bad[i] = errors.New("odd")
			}
		}
		return out, bad
	}, groupcommit.Options{})
	defer f.Close()
	for i := range 4 {
		got, err := f.Submit(context.Background(), i)
		if (i%2 == 1) != (err != nil) || (err == nil && got != i) {
			t.Errorf("batch function: item %d = %d, %v", i, got, err)
		}
	}
}
