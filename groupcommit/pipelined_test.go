package groupcommit_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hookbox/hookbox/groupcommit"
)

// fakeTxn doubles its inputs and reports to its store what it committed.
type fakeTxn struct {
	st    *fakeStore
	items []int
}

func (t *fakeTxn) Add(ctx context.Context, in []int) ([]int, error) {
	if t.st.failAdd != nil && t.st.failAdd(in) {
		return nil, errors.New("add refused")
	}
	out := make([]int, len(in))
	for i, v := range in {
		if v < 0 {
			panic("negative item")
		}
		out[i] = 2 * v
	}
	t.items = append(t.items, in...)
	t.st.added.Add(int64(len(in)))
	return out, nil
}

func (t *fakeTxn) Commit(ctx context.Context) error {
	if t.st.holdCommit != nil {
		<-t.st.holdCommit
	}
	t.st.mu.Lock()
	defer t.st.mu.Unlock()
	if t.st.failCommit {
		return errors.New("commit refused")
	}
	t.st.commits = append(t.st.commits, t.items)
	return nil
}

func (t *fakeTxn) Rollback() error {
	t.st.rollbacks.Add(1)
	return nil
}

type fakeStore struct {
	mu         sync.Mutex
	commits    [][]int
	failCommit bool
	failAdd    func([]int) bool
	holdCommit chan struct{}
	rollbacks  atomic.Int64
	added      atomic.Int64
}

func (s *fakeStore) begin(ctx context.Context) (groupcommit.Txn[int, int], error) {
	return &fakeTxn{st: s}, nil
}

func (s *fakeStore) committed() [][]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]int(nil), s.commits...)
}

// submitAll submits 0..n-1 at once and returns the error of each.
func submitAll(c *groupcommit.Committer[int, int], n int) []error {
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got, err := c.Submit(context.Background(), i)
			if err == nil && got != 2*i {
				err = errors.New("wrong output")
			}
			errs[i] = err
		}()
	}
	wg.Wait()
	return errs
}

// TestPipelinedFillsWhileCommitting: while one commit is held, everything
// submitted meanwhile goes into the next transaction, which commits once
// the first returns; every caller gets its own output.
func TestPipelinedFillsWhileCommitting(t *testing.T) {
	st := &fakeStore{holdCommit: make(chan struct{})}
	c := groupcommit.NewPipelined(st.begin, groupcommit.Options{})
	defer c.Close()

	first := make(chan error, 1)
	go func() { _, err := c.Submit(context.Background(), 1000); first <- err }()
	// The first commit is now held; the rest pile into the open transaction.
	var errs []error
	done := make(chan struct{})
	go func() { errs = submitAll(c, 100); close(done) }()
	// Wait until most of the 100 are in the open transaction (it adds in
	// slices of at least 16 while a commit runs, so up to 15 may wait).
	for deadline := time.Now().Add(10 * time.Second); st.added.Load() < 1+100-15; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			close(st.holdCommit) // let Close finish
			t.Fatalf("only %d items added while the first commit was held", st.added.Load())
		}
	}
	close(st.holdCommit)
	if err := <-first; err != nil {
		t.Fatal(err)
	}
	<-done
	for i, err := range errs {
		if err != nil {
			t.Fatalf("item %d: %v", i, err)
		}
	}
	commits := st.committed()
	total := 0
	for _, cm := range commits {
		total += len(cm)
	}
	if total != 101 {
		t.Fatalf("committed %d items, want 101", total)
	}
	// What was added until the held commit ended went in it and in the
	// one transaction filling behind it (how the few submitted later are
	// grouped is up to the scheduler).
	if n := len(slices.Concat(commits[:min(2, len(commits))]...)); n < 1+100-15 {
		t.Errorf("the items added during the held commit were not committed together: %v", commits)
	}
}

// TestPipelinedAddErrorFailsOnlyItsTransaction: a refused Add answers its
// transaction's callers with the error and rolls back; the next
// transaction works (the committer is not left waiting).
func TestPipelinedAddErrorFailsOnlyItsTransaction(t *testing.T) {
	st := &fakeStore{failAdd: func(in []int) bool { return len(in) > 0 && in[0] == 7 }}
	c := groupcommit.NewPipelined(st.begin, groupcommit.Options{})
	defer c.Close()
	if _, err := c.Submit(context.Background(), 7); err == nil {
		t.Fatal("a refused Add was acknowledged")
	}
	// The callers are answered before the rollback runs.
	for deadline := time.Now().Add(10 * time.Second); st.rollbacks.Load() != 1; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("rollbacks = %d, want 1", st.rollbacks.Load())
		}
	}
	for i := range 3 {
		if got, err := c.Submit(context.Background(), i); err != nil || got != 2*i {
			t.Fatalf("after a failed transaction: Submit(%d) = %d, %v", i, got, err)
		}
	}
}

// TestPipelinedCommitErrorFailsAll: a failed commit answers every caller
// of that transaction with its error.
func TestPipelinedCommitErrorFailsAll(t *testing.T) {
	st := &fakeStore{failCommit: true}
	c := groupcommit.NewPipelined(st.begin, groupcommit.Options{})
	defer c.Close()
	for i, err := range submitAll(c, 30) {
		if err == nil {
			t.Fatalf("item %d acknowledged although its commit failed", i)
		}
	}
}

// TestPipelinedPanicBecomesError: a panic in Add fails the transaction,
// not the process, and the committer goes on.
func TestPipelinedPanicBecomesError(t *testing.T) {
	st := &fakeStore{}
	c := groupcommit.NewPipelined(st.begin, groupcommit.Options{})
	defer c.Close()
	if _, err := c.Submit(context.Background(), -1); err == nil {
		t.Fatal("a panicking Add was acknowledged")
	}
	if got, err := c.Submit(context.Background(), 2); err != nil || got != 4 {
		t.Fatalf("after a panic: %d, %v", got, err)
	}
}

// TestPipelinedCloseFlushes: Close commits what was submitted and then
// refuses more; MaxBatch caps a transaction.
func TestPipelinedCloseFlushes(t *testing.T) {
	st := &fakeStore{}
	c := groupcommit.NewPipelined(st.begin, groupcommit.Options{MaxBatch: 5})
	errs := submitAll(c, 60)
	c.Close()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("item %d: %v", i, err)
		}
	}
	total := 0
	for _, cm := range st.committed() {
		if len(cm) > 5 {
			t.Errorf("a transaction held %d items, MaxBatch is 5", len(cm))
		}
		total += len(cm)
	}
	if total != 60 {
		t.Errorf("committed %d, want 60", total)
	}
	if _, err := c.Submit(context.Background(), 1); !errors.Is(err, groupcommit.ErrClosed) {
		t.Errorf("Submit after Close = %v, want ErrClosed", err)
	}
}
