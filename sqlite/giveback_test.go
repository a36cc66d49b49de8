package sqlite

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
)

// bigEvent stores one event of source "big" whose payload a claim reads
// after its commit (more than inTxPayload bytes), and returns its id.
func bigEvent(t *testing.T, s *Store) int64 {
	t.Helper()
	d := hookbox.Delivery{Source: "big", DeliveryID: "1", Header: map[string][]string{}, Payload: make([]byte, 100<<10)}
	res, err := s.Ingest(context.Background(), []hookbox.Delivery{d})
	if err != nil {
		t.Fatal(err)
	}
	return res[0].ID
}

// claimUnread claims source "big" while every reader is held: the claim's
// read of the large payload gives up at once (its lease is 2 ms, the
// read's bound half of it) and the event is given back. It returns what
// the claim returned.
func claimUnread(t *testing.T, s *Store, owner string) []hookbox.Event {
	t.Helper()
	evs, err := s.Claim(context.Background(), hookbox.ClaimParams{Owner: owner, Limit: 10, Lease: 2 * time.Millisecond, Sources: []string{"big"}})
	if len(evs) > 0 || (err != nil && !strings.Contains(err.Error(), "payloads")) {
		t.Fatalf("a claim with every reader held returned %d events, %v; want none, and the payload read's error", len(evs), err)
	}
	return evs
}

// givenBackRow is an event's row as giveBack leaves it, read on the
// writer (the readers are held).
type givenBackRow struct {
	status          string
	attempts, base  int
	next, updated   int64
	lastErr         string
	attemptsRecords int
}

func readGivenBack(t *testing.T, s *Store, id int64) givenBackRow {
	t.Helper()
	var r givenBackRow
	err := s.writer.QueryRow(`SELECT status, attempts, attempt_base, next_attempt_at, updated_at, coalesce(last_error, ''),
            (SELECT count(*) FROM attempts WHERE event_id = events.id) FROM events WHERE id = ?`, id).
		Scan(&r.status, &r.attempts, &r.base, &r.next, &r.updated, &r.lastErr, &r.attemptsRecords)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// makeDue makes event id due now, as waiting out its give-back's delay
// would, without the wait.
func makeDue(t *testing.T, s *Store, id int64) {
	t.Helper()
	if _, err := s.writer.Exec(`UPDATE events SET next_attempt_at = ? WHERE id = ?`, millis(time.Now()), id); err != nil {
		t.Fatal(err)
	}
}

// TestGiveBackBounded: an event whose large payload cannot be read after
// its claim, claim after claim, is given back with a delay that grows,
// its attempt refunded each time, and after a bounded run of give-backs
// it ends dead, saying why; its attempts rows stop there, and a replay
// starts a new run. It was given back due in a second, every time,
// forever: one attempts row per claim, never worked, never dead.
func TestGiveBackBounded(t *testing.T) {
	s := openTemp(t)
	id := bigEvent(t, s)
	// The death is handed to OnDead, which serve counts with the
	// workers' deaths: once, with the dead outcome.
	var died []hookbox.Outcome
	s.OnDead(func(ev *hookbox.Event, o hookbox.Outcome) {
		if ev.ID == id {
			died = append(died, o)
		}
	})
	release := holdReaders(t, s)
	const most = 100 // claims the test makes at most; the bound is far below
	var delays []time.Duration
	claims := 0
	var r givenBackRow
	for claims < most {
		claimUnread(t, s, fmt.Sprint("o", claims))
		claims++
		r = readGivenBack(t, s, id)
		if r.attemptsRecords != claims {
			t.Fatalf("after %d claims given back: %d attempts rows; want one per claim", claims, r.attemptsRecords)
		}
		if r.status == string(hookbox.StatusDead) {
			break
		}
		if r.status != string(hookbox.StatusPending) || r.attempts-r.base != 0 {
			t.Fatalf("after give-back %d: %s, %d attempts, base %d; want pending, the attempt given back", claims, r.status, r.attempts, r.base)
		}
		delays = append(delays, time.Duration(r.next-r.updated)*time.Millisecond)
		makeDue(t, s, id)
	}
	if r.status != string(hookbox.StatusDead) {
		t.Fatalf("after %d claims that could not read its payload the event is %s with %d attempts rows, its delays %v: "+
			"given back without end; want it dead after a bounded run", claims, r.status, r.attemptsRecords, delays[len(delays)-3:])
	}
	if claims > 30 {
		t.Errorf("dead after %d give-backs; want at most 30 attempts rows for one event", claims)
	}
	if !strings.Contains(r.lastErr, "could not be read after its claim") || !strings.Contains(r.lastErr, fmt.Sprint(claims, " times in a row")) {
		t.Errorf("dead with error %q; want it to say its payload could not be read %d times in a row", r.lastErr, claims)
	}
	if r.attempts-r.base != 1 {
		t.Errorf("dead with %d attempts, base %d; want the last claim counted, the others given back", r.attempts, r.base)
	}
	if len(died) != 1 || died[0].Status != hookbox.StatusDead {
		t.Errorf("OnDead got %+v; want the one dead outcome", died)
	}
	// The delay backs off from a second, never shrinking.
	if delays[0] != time.Second {
		t.Errorf("first give-back due again in %v; want 1s", delays[0])
	}
	for i := 1; i < len(delays); i++ {
		if delays[i] < delays[i-1] {
			t.Errorf("give-back %d due again in %v, after %v before it; want the delay never to shrink", i+1, delays[i], delays[i-1])
		}
	}
	if last := delays[len(delays)-1]; last < time.Minute {
		t.Errorf("last give-back due again in %v; want the delay backed off to a minute or more", last)
	}
	// Dead: no claim takes it, and its rows stop growing.
	if evs, err := s.Claim(context.Background(), hookbox.ClaimParams{Owner: "after", Limit: 10, Lease: time.Minute,
		Sources: []string{"big"}, Now: time.Now().Add(24 * time.Hour)}); len(evs) != 0 || err != nil {
		t.Fatalf("a claim after the event died: %d events, %v; want none", len(evs), err)
	}
	if again := readGivenBack(t, s, id); again.attemptsRecords != claims || again.status != r.status {
		t.Errorf("after another claim: %s, %d attempts rows; want it left %s with %d", again.status, again.attemptsRecords, r.status, claims)
	}

	// A replay (on a reader) starts a new run: the next give-back is due
	// in a second again, its attempt refunded.
	release()
	res, err := s.Replay(context.Background(), hookbox.ReplayParams{IDs: []int64{id}})
	if err != nil || len(res.Replayed) != 1 {
		t.Fatalf("replay: %v, %v", res, err)
	}
	holdReaders(t, s)
	claimUnread(t, s, "replayed")
	after := readGivenBack(t, s, id)
	if after.status != string(hookbox.StatusPending) || after.attempts-after.base != 0 || after.next-after.updated != 1000 {
		t.Errorf("given back after a replay: %s, %d attempts, base %d, due in %d ms; want pending, its attempt given back, due in 1000 ms",
			after.status, after.attempts, after.base, after.next-after.updated)
	}
}

// TestGiveBackThenRead: an event given back a few times while long reads
// held every reader is worked once a reader is free, with its payload
// and every give-back's attempt refunded: readers busy for a while do not
// use up a healthy event's retry budget.
func TestGiveBackThenRead(t *testing.T) {
	s := openTemp(t)
	id := bigEvent(t, s)
	release := holdReaders(t, s)
	for i := range 5 {
		claimUnread(t, s, fmt.Sprint("o", i))
		makeDue(t, s, id)
	}
	release()
	evs, err := s.Claim(context.Background(), hookbox.ClaimParams{Owner: "free", Limit: 10, Lease: time.Minute, Sources: []string{"big"}})
	if err != nil || len(evs) != 1 {
		t.Fatalf("claim with a reader free: %d events, %v; want the event", len(evs), err)
	}
	if e := evs[0]; len(e.Payload) != 100<<10 || e.Attempts-e.AttemptBase != 1 || e.Attempts != 6 {
		t.Errorf("claimed: %d bytes, %d attempts, base %d; want 102400 bytes, attempt 6 counted as the first", len(e.Payload), e.Attempts, e.AttemptBase)
	}
}
