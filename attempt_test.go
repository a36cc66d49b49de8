package hookbox_test

import (
	"testing"
	"time"

	"github.com/hookbox/hookbox"
)

// TestAttemptTook: a duration only for an attempt that finished after it
// started; a first attempt that succeeded, read from its event, has the
// same start and finish (hookbox.AttemptStored) and no duration.
func TestAttemptTook(t *testing.T) {
	at := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		name     string
		a        hookbox.Attempt
		took     time.Duration
		hasTaken bool
	}{
		{"ran", hookbox.Attempt{StartedAt: at, FinishedAt: at.Add(1500 * time.Millisecond)}, 1500 * time.Millisecond, true},
		{"read from its event", hookbox.Attempt{StartedAt: at, FinishedAt: at}, 0, false},
		{"not finished", hookbox.Attempt{StartedAt: at}, 0, false},
		{"clock stepped back", hookbox.Attempt{StartedAt: at, FinishedAt: at.Add(-time.Second)}, 0, false},
	} {
		if took, ok := c.a.Took(); took != c.took || ok != c.hasTaken {
			t.Errorf("%s: Took() = %v, %v; want %v, %v", c.name, took, ok, c.took, c.hasTaken)
		}
	}
}

// TestWithUnknown: each attempt number without a row is listed as
// unknown, before the first row of a later attempt and before a mark that
// followed it (a replay, an end without running, a skip, a retire: any
// row by the operator), which bears the
// number of the attempt before it and is no attempt of its own; the
// running attempt of a processing event is not; a row written late (a
// lost finish) still counts.
func TestWithUnknown(t *testing.T) {
	a := func(n int, outcome string) hookbox.Attempt { return hookbox.Attempt{Attempt: n, Outcome: outcome} }
	// retired is the row of a retire (Ops.RetireTarget): dead, by the operator.
	retired := func(n int) hookbox.Attempt {
		return hookbox.Attempt{Attempt: n, Owner: hookbox.OperatorOwner, Outcome: hookbox.AttemptDead}
	}
	const (
		u    = hookbox.AttemptUnknown
		done = hookbox.AttemptDone
		rt   = hookbox.AttemptRetry
		rp   = hookbox.AttemptReplay
		lost = hookbox.AttemptLost
		nr   = hookbox.AttemptNotRun
		sk   = hookbox.AttemptSkip
	)
	for _, c := range []struct {
		name     string
		rows     []hookbox.Attempt
		attempts int
		status   hookbox.Status
		want     []hookbox.Attempt
	}{
		{"none", nil, 0, hookbox.StatusPending, nil},
		{"every attempt has a row", []hookbox.Attempt{a(1, rt), a(2, done)}, 2, hookbox.StatusDone, []hookbox.Attempt{a(1, rt), a(2, done)}},
		{"first died", []hookbox.Attempt{a(2, done)}, 2, hookbox.StatusDone, []hookbox.Attempt{a(1, u), a(2, done)}},
		{"running attempt left out", nil, 2, hookbox.StatusProcessing, []hookbox.Attempt{a(1, u)}},
		{"last died, then dead", []hookbox.Attempt{a(1, rt), a(3, hookbox.AttemptDead)}, 3, hookbox.StatusDead,
			[]hookbox.Attempt{a(1, rt), a(2, u), a(3, hookbox.AttemptDead)}},
		{"died before a replay", []hookbox.Attempt{a(1, rt), a(2, rp), a(3, done)}, 3, hookbox.StatusDone,
			[]hookbox.Attempt{a(1, rt), a(2, u), a(2, rp), a(3, done)}},
		{"died after a replay", []hookbox.Attempt{a(1, rt), a(1, rp), a(3, done)}, 3, hookbox.StatusDone,
			[]hookbox.Attempt{a(1, rt), a(1, rp), a(2, u), a(3, done)}},
		{"lost finish written late", []hookbox.Attempt{a(2, done), a(1, lost)}, 2, hookbox.StatusDone,
			[]hookbox.Attempt{a(2, done), a(1, lost)}},
		{"last died, then ended without running", []hookbox.Attempt{a(1, rt), a(3, nr)}, 3, hookbox.StatusDead,
			[]hookbox.Attempt{a(1, rt), a(2, u), a(3, u), a(3, nr)}},
		{"last ran, then ended without running", []hookbox.Attempt{a(1, rt), a(2, rt), a(2, nr)}, 2, hookbox.StatusDead,
			[]hookbox.Attempt{a(1, rt), a(2, rt), a(2, nr)}},
		{"ended without running, then skipped", []hookbox.Attempt{a(2, nr), a(2, sk)}, 2, hookbox.StatusDead,
			[]hookbox.Attempt{a(1, u), a(2, u), a(2, nr), a(2, sk)}},
		{"ended without running, replayed, done", []hookbox.Attempt{a(1, nr), a(1, rp), a(2, done)}, 2, hookbox.StatusDone,
			[]hookbox.Attempt{a(1, u), a(1, nr), a(1, rp), a(2, done)}},
		{"last died, then retired", []hookbox.Attempt{a(1, rt), retired(2)}, 2, hookbox.StatusDead,
			[]hookbox.Attempt{a(1, rt), a(2, u), retired(2)}},
		{"last ran, then retired", []hookbox.Attempt{a(1, rt), retired(1)}, 1, hookbox.StatusDead,
			[]hookbox.Attempt{a(1, rt), retired(1)}},
		{"pending after one that died", []hookbox.Attempt{a(2, rt)}, 2, hookbox.StatusPending, []hookbox.Attempt{a(1, u), a(2, rt)}},
	} {
		got := hookbox.WithUnknown(c.rows, c.attempts, c.status)
		if len(got) != len(c.want) {
			t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
			continue
		}
		for i := range got {
			if got[i].Attempt != c.want[i].Attempt || got[i].Outcome != c.want[i].Outcome || got[i].Owner != c.want[i].Owner {
				t.Errorf("%s: %+v, want %+v", c.name, got, c.want)
				break
			}
			if got[i].Outcome == u && got[i].Error != hookbox.UnknownAttemptError {
				t.Errorf("%s: unknown attempt's error %q", c.name, got[i].Error)
			}
		}
	}
}
