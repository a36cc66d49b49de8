package hookbox

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"
)

// ErrNoSchema means a store opened for an existing database only found no
// hookbox schema there (a mistyped SQLite path, a PostgreSQL schema hookbox
// never migrated), or one older than this hookbox needs. Such an open
// creates and migrates nothing; `hookbox migrate` does.
var ErrNoSchema = errors.New("no hookbox schema")

// MaxDays is the largest day count a retention window, a purge or a
// replay filter accepts: 100 years, far below the 106,751 days at which
// time.Duration wraps around and a cut-off "that many days ago" lands in
// the future.
const MaxDays = 36500

// DaysAgo returns the cut-off days whole days before now. A count below 0
// or above MaxDays is an error, so a large count meant as "forever" can
// never turn into a cut-off in the future that purges every finished
// event. Callers prefix the error with the name of their parameter.
func DaysAgo(now time.Time, days int) (time.Time, error) {
	if days < 0 || days > MaxDays {
		return time.Time{}, fmt.Errorf("want a whole number of days from 0 to %d, not %d", MaxDays, days)
	}
	cut := now.Add(-time.Duration(days) * 24 * time.Hour)
	if err := CheckCutoff(cut, now); err != nil {
		return time.Time{}, err
	}
	return cut, nil
}

// CheckCutoff refuses a retention cut-off later than now. The stores' Purge
// and ClearPayloads call it as a last guard: no window ends in the future,
// and one that seems to was computed wrongly.
func CheckCutoff(before, now time.Time) error {
	if before.After(now) {
		return fmt.Errorf("cut-off %s is later than now (%s); a retention window ends in the past",
			before.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339))
	}
	return nil
}

// ReplayParams select events to put back in the queue.
type ReplayParams struct {
	// IDs names events one by one; when empty, Filter selects them.
	IDs    []int64
	Filter Filter
	// IncludeDone allows replaying events that already succeeded. Without
	// it only dead and pending events are replayed.
	IncludeDone bool
	// DryRun reports what would be replayed and changes nothing.
	DryRun bool
	// AfterID, when above 0, leaves out every event whose id is not
	// above it: the same replay with the ResumeAfter of one that stopped
	// part-way goes on where that one stopped, without judging again the
	// events it replayed (a replay that takes pending events, or done
	// ones, would replay them again).
	AfterID int64
	// Now is when the first events become due (zero: time.Now(), or on
	// PostgreSQL the server's now()); Rate paces the others after it.
	Now time.Time
	// Rate paces a large replay, so that deliveries stored while its
	// events drain are claimed among them, not behind them all: claims
	// take events in due order, and a replay that made 100,000 events
	// due at once left every new delivery waiting for the whole backlog.
	// The first Rate events of the replay (in id order) are due at Now,
	// and the rest Rate a second after them (ReplayWait): a token bucket
	// with a burst of one second, as a target's rate. A replay of up to
	// Rate events is therefore due at once. Zero means DefaultReplayRate;
	// ReplayAtOnce (any value below zero) makes every event due at Now.
	Rate int
	// PaceAfter, for a replay that goes on from one that stopped
	// part-way (AfterID), is how many events that one's pace counted
	// (its ReplayResult.PacedCount): this one's are paced after them, as
	// if one replay, so that none it makes due is due before one the
	// first paced. Started again from its own first Rate, it made its
	// first events due at once, before the other's last ones: a strict
	// source then worked them out of id order, and a new delivery waited
	// behind the two paces at once.
	PaceAfter int
	// Progress, if set, is called with the number of events replayed so
	// far each time a batch of them has committed (a store that replays in
	// one statement calls it once, at the end).
	Progress func(replayed int)
	// Expect makes the replay of a named event (a key of IDs) conditional
	// on what the operator saw: the event is replayed only while its
	// attempts are still the number given (ReplayAttempts: a FanOut
	// event's is the sum over its deliveries). Every attempt started
	// since, such as the run of an earlier replay, changes the number, so
	// two replays that expect the same number run the event once between
	// them, not twice (a double click, a stale page, two operators). The
	// store checks it in the statement that replays, with the state. An
	// event left alone for it is in Skipped, with its new number
	// (ChangedSince says so). Ids of Expect not in IDs are ignored.
	Expect map[int64]int
}

// Expected lists what Expect asks of the named events, for a store's
// condition: each id of IDs that Expect names, once, in IDs' order, and
// in the same order the attempts expected of it. Ids of Expect not in
// IDs are left out.
func (p ReplayParams) Expected() (ids, attempts []int64) {
	seen := map[int64]bool{}
	for _, id := range p.IDs {
		if n, ok := p.Expect[id]; ok && !seen[id] {
			seen[id] = true
			ids, attempts = append(ids, id), append(attempts, int64(n))
		}
	}
	return ids, attempts
}

// DefaultReplayRate is a replay's pace when ReplayParams.Rate is zero:
// events made due per second after the first second's worth. It is
// meant to stay below what a target works, so that a delivery stored
// while a replay drains waits behind at most about one second's worth
// of it; a target that works faster finishes a replay later than it
// could (100,000 events take about 17 minutes), and an operator who
// knows its pace passes a higher Rate.
const DefaultReplayRate = 100

// MaxPaceAfter is the largest ReplayParams.PaceAfter: far more events
// than a store holds, and far from the overflow of the count of a replay
// that goes on from it.
const MaxPaceAfter = 1 << 40

// ReplayAtOnce, as ReplayParams.Rate, makes every replayed event due at
// Now, however many there are: new deliveries then wait behind all of
// them.
const ReplayAtOnce = -1

// ReplayWait is how long after p.Now the i-th event a replay picks (from
// 0, in id order over the whole replay) becomes due: 0 for the first
// Rate, then 1/Rate s more for each (see ReplayParams.Rate). Both stores
// set due times from it, i counting from p.PaceAfter.
func (p ReplayParams) ReplayWait(i int) time.Duration {
	rate := p.Rate
	switch {
	case rate < 0:
		return 0
	case rate == 0:
		rate = DefaultReplayRate
	}
	if i < rate {
		return 0
	}
	// k/rate seconds, in whole seconds and the rest, so that no product
	// overflows: a replay that goes on from another (PaceAfter) or a slow
	// pace reaches an i·1s past time.Duration's range. Past it, the wait
	// stays at its largest (292 years).
	k, r := int64(i-rate)+1, int64(rate)
	secs, rest := k/r, k%r
	if secs >= math.MaxInt64/int64(time.Second)-1 {
		return math.MaxInt64
	}
	frac := time.Duration(float64(rest) * float64(time.Second) / float64(r))
	if r <= math.MaxInt64/int64(time.Second) {
		frac = time.Duration(rest) * time.Second / time.Duration(r)
	}
	return time.Duration(secs)*time.Second + frac
}

// ReplayAttempts is the number ReplayParams.Expect compares for e: its
// attempts, or for a FanOut event the sum of its deliveries' (the row of a
// FanOut event is never worked itself, so its own count never moves).
func ReplayAttempts(e Event, deliveries []Event) int {
	if !e.FanOut {
		return e.Attempts
	}
	n := 0
	for _, d := range deliveries {
		n += d.Attempts
	}
	return n
}

// ChangedSince reports whether a replay with Expect left e alone because
// its attempts moved on: have (ReplayAttempts of e and its deliveries) is
// not the number Expect held for it. False when Expect says nothing of e.
func ChangedSince(expect map[int64]int, e Event, deliveries []Event) (have int, changed bool) {
	want, ok := expect[e.ID]
	if !ok {
		return 0, false
	}
	have = ReplayAttempts(e, deliveries)
	return have, have != want
}

// ReplayResult says what a replay did (or, dry, would do).
type ReplayResult struct {
	Replayed []int64 `json:"replayed"` // back to pending with a fresh attempt budget
	// Skipped are named events left alone: in flight, or done without
	// IncludeDone, or changed since the operator looked (Expect), or
	// missing. A named FanOut event is replayed as its deliveries: each of
	// them left alone (and not in NoPayload) is listed here too, by its own
	// id, after the named ids, even when others were replayed; the event
	// itself is listed only when none was. Always in the JSON
	// (server.NewReplayReply makes a nil list []), so a script can rely on
	// the key.
	Skipped []int64 `json:"skipped"`
	// NoPayload are events left alone because payload retention cleared
	// their payload: replaying one would send an empty body under the
	// original signature headers. Named events and, in a replay by
	// filter, every match in a replayable state are reported here.
	NoPayload []int64 `json:"no_payload,omitempty"`
	// ResumeAfter is set, beside an error, when the replay stopped before
	// it had judged every match: a slice failed (the database went away,
	// a timeout, the context was cancelled) after the slices before it
	// had committed. Each match with an id up to *ResumeAfter was
	// replayed (and is in Replayed) or left alone for cause; none above
	// it was replayed, save that a slice whose commit was under way when
	// the connection was lost may have committed unseen. The same replay
	// with AfterID = *ResumeAfter goes on where this one stopped. Nil
	// without an error, on a dry run, and when the error came after every
	// match was judged (while reading what was left alone).
	ResumeAfter *int64 `json:"-"`
	// PacedCount is, with ResumeAfter, how many events the pace of the
	// slices committed counted (ReplayParams.PaceAfter included): the
	// PaceAfter of the replay that goes on from this one.
	PacedCount int `json:"-"`
}

// PurgeParams say which finished events to delete.
type PurgeParams struct {
	// Before deletes finished events whose last change is older than it.
	// It must not be later than now (see CheckCutoff); DaysAgo computes it.
	Before time.Time
	// IncludeDead deletes dead events too; by default they are kept, since
	// their work never succeeded.
	IncludeDead bool
	// DryRun counts and deletes nothing.
	DryRun bool
	// BatchSize bounds the rows deleted per transaction (default 250 on
	// SQLite, 1000 on PostgreSQL), so a purge never holds a long lock.
	// Between batches a purge pauses as long as the last batch took (see
	// Yield), so it takes at most about half of the store's write path
	// from ingest.
	BatchSize int
	// Progress, if set, is called with the totals deleted so far each time
	// a batch has committed.
	Progress func(PurgeResult)
}

// PurgeResult counts what a purge deleted (or, dry, would delete), by the
// status an operator reads (Event.Status), each event in one count.
type PurgeResult struct {
	Done int `json:"done"`
	Dead int `json:"dead"`
	// Stored counts events nothing works (StatusStored: a store_only
	// source's, or one no named target wanted). They are finished on
	// arrival, so a purge of done events deletes them too; they are
	// counted apart, not as done, since none of them was ever worked.
	Stored int `json:"stored"`
}

// Total is how many events the purge deleted (or, dry, would delete).
func (r PurgeResult) Total() int { return r.Done + r.Dead + r.Stored }

// Stats summarise the queue for metrics.
type Stats struct {
	// ByStatus counts the events in each state a queue row has:
	// pending, processing, done and dead, each there (0 for a state no
	// event is in), and no other (see NewStats). On PostgreSQL, the done
	// count may be up to a minute old once it is large (see
	// postgres.Store.Stats): the other counts are read at each call.
	ByStatus map[Status]int `json:"by_status"`
	// OldestDue is when the longest-waiting due pending event became due;
	// zero when none is due. It is on the clock the store judges due
	// times by: the database server's, on PostgreSQL, which may differ
	// from the caller's.
	OldestDue time.Time `json:"oldest_due"`
	// OldestDueAge is how long that event has been due at the now Stats
	// was given, both read on the store's clock (DueAge); zero when none
	// is due. It is what hookbox_oldest_due_seconds reports: now minus
	// OldestDue would mix the caller's clock with the store's. In JSON,
	// nanoseconds.
	OldestDueAge time.Duration `json:"oldest_due_age"`
}

// CheckPause refuses what Ops.PauseTarget cannot keep alike in every
// store: a name that is not a queue name (ValidQueueName), or a reason
// that is not StorableText (PostgreSQL refuses NUL bytes and text that
// is not UTF-8, which SQLite would keep) or is longer than MaxPauseReason
// characters. Both stores call it first.
func CheckPause(name, reason string) error {
	if !ValidQueueName(name) {
		return fmt.Errorf("pause: %s is not a queue name (source or source/target)", ShortQuote(name))
	}
	if !StorableText(reason) {
		return fmt.Errorf("pause %s: the reason must be UTF-8 text without NUL bytes", name)
	}
	if n := utf8.RuneCountInString(reason); n > MaxPauseReason {
		return fmt.Errorf("pause %s: the reason must be at most %d characters, not %d", name, MaxPauseReason, n)
	}
	return nil
}

// MaxPauseReason bounds the reason of a pause, in characters, as
// MaxSkipReason bounds a skip's: it is kept with the pause and shown in
// every listing of the targets.
const MaxPauseReason = MaxSkipReason

// NewStats returns Stats that count 0 events in each state a queue row
// has, for a store to add its counts to: the stores' ByStatus hold the
// same keys whatever the table holds.
func NewStats() Stats {
	return Stats{ByStatus: map[Status]int{StatusPending: 0, StatusProcessing: 0, StatusDone: 0, StatusDead: 0}}
}

// DueAge is how long an event due since oldest has waited at now, both
// on one clock: zero for a zero oldest (none is due) and for one later
// than now. Stores give it for the OldestDueAge fields: SQLite at the
// caller's time, PostgreSQL at the server's.
func DueAge(oldest, now time.Time) time.Duration {
	if oldest.IsZero() {
		return 0
	}
	return max(0, now.Sub(oldest))
}

// Ops is the operator side of a store: replay, retention and statistics.
// Each operation touches only rows in the states it names, guarded in the
// statement itself, so it cannot race a worker into a wrong state.
type Ops interface {
	// Replay sends events back to pending, due from p.Now at p.Rate's pace
	// (a small replay is due at once), with attempts reset; the row (the
	// dedupe memory) stays the same row. Events in flight are never
	// touched.
	Replay(ctx context.Context, p ReplayParams) (ReplayResult, error)

	// Purge deletes finished events (done and stored, and dead if asked)
	// older than p.Before, in batches. A store on a server with a clock of
	// its own (PostgreSQL) judges the window on that clock: p.Before is
	// taken as how long before the caller's now the window starts, so a
	// caller whose clock is ahead deletes nothing younger than the window
	// by the server's. Pending and processing events are never
	// deleted. A redelivery of a purged id is stored and worked again.
	// A p.Before later than now is refused with an error (CheckCutoff).
	// A store may keep the newest event (the one holding the largest id,
	// or whose delivery holds it) whatever its age, where that row is what
	// keeps ids from being handed out twice (SQLite); event ids are never
	// handed out again, purged or not.
	Purge(ctx context.Context, p PurgeParams) (PurgeResult, error)

	// ClearPayloads drops the sender's data from done events finished
	// before before: the payload, the headers, the order key (taken from
	// the payload), the last error and the error texts of the attempts
	// (a target's reply or a command's output may quote the payload). It
	// keeps the dedupe memory and the history: id, source, delivery id,
	// event type, body hash, status, times, and each attempt's number and
	// outcome. Dead and unfinished events keep everything, and so does a
	// FanOut event while one of its deliveries is unfinished. An event
	// cleared only in part (by an older hookbox, which dropped the payload
	// alone) is cleared again. It returns how many events it cleared. A
	// before later than now is refused, and the window judged, as in
	// Purge.
	ClearPayloads(ctx context.Context, before time.Time) (int, error)

	// Stats counts events by status and finds the oldest due event.
	// The event of a FanOut source is not counted: its deliveries are.
	// Deliveries nothing works any more count too (see RetireTarget):
	// they are work that was never done. An event is due when it is due
	// by now; a store on a server with a clock of its own (PostgreSQL)
	// takes now as a distance from the caller's clock and judges it on
	// the server's, the clock claims use, so a caller whose clock is off
	// reads the queue as claims see it.
	Stats(ctx context.Context, now time.Time) (Stats, error)

	// PauseTarget pauses the queue name (a source worked as itself, or
	// "source/target"): workers claim none of its events until
	// ResumeTarget (every claim checks it; see Queue.Claim), and those
	// claimed before it run to their end; ingest goes on. Pausing a paused name keeps its first
	// pause. A name that is no queue name, or a reason that is not
	// StorableText, is refused (CheckPause) and nothing is stored.
	PauseTarget(ctx context.Context, name, reason string) error

	// ResumeTarget lifts a pause and reports whether there was one.
	ResumeTarget(ctx context.Context, name string) (bool, error)

	// UnfinishedTargets lists, in byte order (Go's order of strings,
	// whatever the database's collation), the queue names that have
	// pending or processing deliveries. It reads about one index entry
	// per name, however many deliveries wait, so a process can compare
	// them with what it works (see Backlog) at every start.
	UnfinishedTargets(ctx context.Context) ([]string, error)

	// TargetBacklog counts the unfinished deliveries of one queue name;
	// what is due by now is judged as in Stats.
	TargetBacklog(ctx context.Context, name string, now time.Time) (Backlog, error)

	// KeyedUnfinished counts the unfinished (pending or processing)
	// deliveries of one queue name that have an order key. It reads the
	// name's entries of the order index (its keyed deliveries that are
	// unfinished or dead), not the queue, so a process can ask it at
	// start for each target it works unordered (see service's
	// warnUnordered).
	KeyedUnfinished(ctx context.Context, name string) (int, error)

	// KeyHead returns the first delivery of queue name that holds order
	// key key: the lowest id among its pending, processing and dead
	// deliveries with that key, the one a claim by key takes next (under
	// on_dead: hold). ErrNotFound when none holds it. It is one seek in
	// the order index, however many deliveries the key or the table has.
	KeyHead(ctx context.Context, name, key string) (id int64, status Status, err error)

	// HeldKeys counts, for each queue name of names, the order keys a
	// dead delivery holds: keys whose first delivery (KeyHead) is dead
	// while at least one pending or processing delivery of the key waits
	// behind it. A skipped delivery holds a key of its own, which nothing
	// waits behind, so it is not counted, nor is a dead delivery behind
	// which nothing waits. It says nothing of on_dead: the caller asks
	// only for the names whose dead deliveries hold their keys. Every
	// name of names is in the map, 0 when no key of it is held. It reads
	// the dead deliveries of each name with an order key not of their own
	// (one starting routing.NoKeyPrefix is left out: an index of their
	// own) and, for each, a seek in front of it in the order index and a
	// walk behind it to the first delivery that waits: not the keys, nor
	// the deliveries that wait.
	HeldKeys(ctx context.Context, names []string) (map[string]int, error)

	// RetireTarget ends the unfinished deliveries of a queue name that
	// nothing works any more (a target or source removed from the
	// config): each pending one, and each processing one whose lease
	// has ended, becomes dead with p.Reason as its last error and an
	// attempts row by the operator (OperatorOwner) saying so: a mark
	// numbered with its last attempt, which a history still lists as
	// unknown when that attempt left no row. A delivery leased to a
	// live worker is left alone and counted. The dead deliveries keep
	// their payload: a replay sends them again, and a purge with dead
	// events takes them (and so, at last, their FanOut event). Nothing
	// calls it on its own: during a rolling deploy a process of the
	// older config may still work the name.
	RetireTarget(ctx context.Context, p RetireParams) (RetireResult, error)

	// Skip ends one dead delivery for good, so that it no longer holds
	// its order key (see SkipParams): the deliveries of the key that wait
	// behind it go on. It stays dead, keeps its payload, and gets
	// SkipError(p.Via, p.Reason, key) as its last error and an attempts row by
	// the operator (AttemptSkip) saying so. Only a dead delivery is
	// skipped: any other state is refused with a *NotSkippableError, a
	// missing id with an error that matches ErrNotFound. With p.Expect,
	// a delivery whose attempts are no longer those expected is refused
	// too (a *NotSkippableError saying Changed), compared in the same
	// transaction. Skipping one already skipped changes nothing and
	// reports Already.
	Skip(ctx context.Context, p SkipParams) (SkipResult, error)

	// RaiseIDFloor makes every event stored from now on get an id above
	// max(p.After, known+p.Gap), known being the largest id the database
	// has handed out as far as it knows; it never moves ids back. A
	// database restored from a backup knows only the ids handed out up
	// to the backup, and would hand out the later ones again, to other
	// deliveries (hookbox restore-ids runs this after a restore).
	// PostgreSQL sets the events' id sequence. SQLite, which gives a new
	// row the largest id in the table plus one, stores a placeholder
	// event above the floor (IDFloorSource: a finished event of no
	// source, worked by nothing and counted by no Stats), deleted by the
	// first ingest that stores an event above it.
	RaiseIDFloor(ctx context.Context, p IDFloorParams) (IDFloor, error)
}

// IDFloorParams say how far RaiseIDFloor moves event ids forward.
type IDFloorParams struct {
	// After is an id known to have been handed out, as a log line or a
	// sender's reply shows it: the next ids are above it. 0 for none.
	After int64
	// Gap puts the next ids more than Gap past the largest id the
	// database knows of: room for those handed out between a backup and
	// its restore. DefaultIDGap is the usual one.
	Gap int64
}

// DefaultIDGap is the gap hookbox restore-ids leaves without --after: more
// ids than most deployments hand out between a backup and a restore.
const DefaultIDGap = 1_000_000

// IDFloorSource is the source of the placeholder event that holds the id
// floor on SQLite (see Ops.RaiseIDFloor). No configured source can have
// the name: it holds a space.
const IDFloorSource = "hookbox restore-ids"

// IDFloor says what RaiseIDFloor did.
type IDFloor struct {
	// Known is the largest id the database had handed out as far as it
	// knew (SQLite: its largest row; PostgreSQL: the id sequence, or a
	// larger stored id).
	Known int64 `json:"known"`
	// Floor is the id every event stored from now on is above.
	Floor int64 `json:"floor"`
	// Moved is false when Known already reached the floor asked for:
	// nothing changed, and Floor is Known.
	Moved bool `json:"moved"`
}

// MaxIDFloor bounds the floor RaiseIDFloor accepts, far below the
// largest id (2⁶³-1): SQLite picks ids at random once a table holds that
// one, and no deployment hands out 2⁶² ids.
const MaxIDFloor = 1 << 62

// Target is the floor p asks for over known, the largest id the database
// knows of; an error for a negative After or Gap, or a floor past
// MaxIDFloor.
func (p IDFloorParams) Target(known int64) (int64, error) {
	if p.After < 0 || p.Gap < 0 {
		return 0, fmt.Errorf("id floor: want an id and a gap of 0 or more, not %d and %d", p.After, p.Gap)
	}
	if p.After > MaxIDFloor || p.Gap > MaxIDFloor-known {
		return 0, fmt.Errorf("id floor: at most %d, far past any id handed out", int64(MaxIDFloor))
	}
	return max(p.After, known+p.Gap), nil
}

// Backlog is the unfinished deliveries of one queue name.
type Backlog struct {
	Name       string `json:"name"`
	Pending    int    `json:"pending"`
	Processing int    `json:"processing"`
	// OldestDue is when the longest-waiting due one became due; zero
	// when none is due. Stats.OldestDue counts it too.
	OldestDue time.Time `json:"oldest_due,omitzero"`
	// OldestDueAge is how long it has been due, as Stats.OldestDueAge
	// (in JSON, nanoseconds).
	OldestDueAge time.Duration `json:"oldest_due_age,omitzero"`
}

// Unfinished is how many deliveries the backlog holds.
func (b Backlog) Unfinished() int { return b.Pending + b.Processing }

// RetireParams say whose deliveries RetireTarget ends.
type RetireParams struct {
	// Name is the queue name: a source worked as itself, or
	// "source/target".
	Name string
	// Reason is the last error the ended deliveries get; RetireReason
	// says the usual one.
	Reason string
	// DryRun counts and changes nothing.
	DryRun bool
	// Progress, if set, is called with the number of deliveries ended so
	// far each time a batch of them has committed.
	Progress func(ended int)
}

// RetireResult says what RetireTarget did (or, dry, would do).
type RetireResult struct {
	// Ended counts the deliveries made dead.
	Ended int `json:"ended"`
	// InFlight counts those left alone: leased to a worker that is still
	// working them, in a process that still has the name.
	InFlight int `json:"in_flight"`
}

// RetireReason is the last error of a delivery RetireTarget ended, for
// the queue name name.
func RetireReason(name string) string {
	return "ended by an operator (hookbox targets retire " + name + "): no process works " + name +
		" (removed from the config); replay it if it comes back"
}

// Pause is a paused queue name (see Ops.PauseTarget).
type Pause struct {
	Name     string    `json:"name"`
	PausedAt time.Time `json:"paused_at"`
	Reason   string    `json:"reason,omitempty"`
}

// Add counts n purged rows of status st.
func (r *PurgeResult) Add(st Status, n int) {
	switch st {
	case StatusDone:
		r.Done += n
	case StatusDead:
		r.Dead += n
	case StatusStored:
		r.Stored += n
	}
}

// Merge adds the counts of o, a batch's, to r.
func (r *PurgeResult) Merge(o PurgeResult) {
	r.Done, r.Dead, r.Stored = r.Done+o.Done, r.Dead+o.Dead, r.Stored+o.Stored
}

// Missing returns the ids of want that are not in got, in want's order.
func Missing(want, got []int64) []int64 {
	seen := make(map[int64]bool, len(got))
	for _, id := range got {
		seen[id] = true
	}
	var out []int64
	for _, id := range want {
		if !seen[id] {
			out = append(out, id)
		}
	}
	return out
}

// ReplaySkipped is a replay's Skipped list (see ReplayResult): the named
// ids neither replayed, nor in noPayload, nor a FanOut event of which a
// delivery was replayed (parents); then, in id order, the deliveries of
// the named FanOut events (deliveries) neither replayed nor in noPayload,
// less those already listed.
func ReplaySkipped(named, replayed, noPayload, parents, deliveries []int64) []int64 {
	skipped := Missing(named, slices.Concat(replayed, noPayload, parents))
	handled := slices.Concat(replayed, noPayload, skipped)
	slices.Sort(deliveries)
	return append(skipped, Missing(slices.Compact(deliveries), handled)...)
}

// NoSchemaError returns an error that matches ErrNoSchema and reads msg
// (which should say what to do, such as run `hookbox migrate`).
func NoSchemaError(msg string) error { return &schemaError{msg: msg} }

type schemaError struct{ msg string }

func (e *schemaError) Error() string        { return e.msg }
func (e *schemaError) Is(target error) bool { return target == ErrNoSchema }

// Yield pauses a batched maintenance job (purge) for as long as its last
// batch took, so that the job holds at most about half of the store's
// write time and ingest waits behind at most one batch. It returns early
// with ctx's error when ctx ends.
func Yield(ctx context.Context, took time.Duration) error {
	t := time.NewTimer(took)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// SkipParams say which dead delivery Ops.Skip ends, and why.
type SkipParams struct {
	// ID is the delivery: a target's delivery, or the event of a source
	// worked as itself; never a FanOut event.
	ID int64
	// Reason is what the operator gave; it goes into the last error and
	// the attempts row.
	Reason string
	// Via names where the skip came from ("hookbox events skip", "admin
	// API"), for the record.
	Via string
	// Key is the order key the skipped delivery gets in place of the one
	// it held: one of its own (routing.NoValueKey of its delivery id),
	// which no other delivery has, so that it holds up nothing and a
	// replay of it waits for nothing. A delivery with no order key keeps
	// none.
	Key func(deliveryID string) string
	// Expect makes the skip conditional on what the operator saw, as
	// ReplayParams.Expect makes a replay: the delivery is skipped only
	// while its attempts are still the number given (ReplayAttempts; a
	// delivery's own count, as Skip refuses a FanOut event). A replay
	// that ran since, and died again, changes the number, so a skip
	// decided on one death does not end a later one the operator never
	// saw (a stale page, a second operator). The store reads the attempts
	// in the transaction that skips, under the row's lock, and Judge
	// compares them: a mismatch is refused with a *NotSkippableError
	// saying Changed, and nothing is written. Nil: no condition.
	Expect *int
}

// SkipResult says what Ops.Skip did.
type SkipResult struct {
	ID int64 `json:"id"`
	// Released is the order key the delivery held and no longer holds;
	// empty when it had none, or one of its own that held up nothing.
	Released string `json:"released_key,omitempty"`
	// Already is true when the delivery had been skipped before: nothing
	// changed.
	Already bool `json:"already,omitempty"`
}

// SkipCandidate is what Ops.Skip reads of the delivery it is asked to
// end, under the lock (or in the write transaction) in which it then
// changes it.
type SkipCandidate struct {
	Status     Status
	DeliveryID string
	OrderKey   *string // nil: none
	// Attempts is the delivery's attempt count, which SkipParams.Expect
	// is compared with.
	Attempts int
	// Skipped reports that Skip ended the delivery's current death (the
	// store finds the AttemptSkip row it wrote), so there is nothing to do.
	Skipped bool
	FanOut  bool
}

// SkipChange is what Ops.Skip writes of one delivery (SkipParams.Judge).
type SkipChange struct {
	// Result is what the skip reports. When it says Already, nothing is
	// written.
	Result SkipResult
	// OrderKey is the order key the delivery gets in place of its own;
	// nil when it had none.
	OrderKey *string
	// LastError is the delivery's new last error, and the error of the
	// attempts row (AttemptSkip) that records the skip.
	LastError string
}

// Judge decides what Ops.Skip does with the delivery d it read: it
// refuses a FanOut event, a delivery whose attempts are not those
// p.Expect holds (Changed, whatever its state: the operator looked at
// another death, or before a replay), or a delivery that is not dead,
// with a *NotSkippableError; it reports one skipped before as Already, with
// nothing to write; else it gives the delivery's new order key (p.Key
// of its delivery id, when it had one) and last error (SkipError), and
// the key released, unless the delivery already held a key of its own,
// which held up nothing. Each store keeps only the reading and the
// writing.
func (p SkipParams) Judge(d SkipCandidate) (SkipChange, error) {
	c := SkipChange{Result: SkipResult{ID: p.ID}}
	if d.FanOut {
		return c, &NotSkippableError{ID: p.ID, FanOut: true}
	}
	if p.Expect != nil && d.Attempts != *p.Expect {
		return c, &NotSkippableError{ID: p.ID, Status: d.Status, Changed: true, Attempts: d.Attempts, Expected: *p.Expect}
	}
	if d.Status != StatusDead {
		return c, &NotSkippableError{ID: p.ID, Status: d.Status}
	}
	if d.Skipped {
		c.Result.Already = true
		return c, nil
	}
	if d.OrderKey != nil {
		own := p.Key(d.DeliveryID)
		c.OrderKey = &own
		if *d.OrderKey != own {
			c.Result.Released = *d.OrderKey
		}
	}
	c.LastError = SkipError(p.Via, p.Reason, c.Result.Released)
	return c, nil
}

// AttemptSkip is the outcome of the attempts row Ops.Skip writes: an
// operator ended the dead delivery for good. Its number is that of the
// last attempt, and its error the delivery's new last error. A dead
// delivery was skipped (SkipResult.Already) when it has such a row with
// its current attempt count and last error: only Ops.Skip writes one,
// whatever a handler's error says, and a later death (another attempt,
// or a new last error) leaves it behind.
const AttemptSkip = "skip"

// SkipPrefix starts the last error of a delivery Ops.Skip ended. A
// handler's error may start so too: whether a delivery was skipped is read
// from its attempts (AttemptSkip), never from this text.
const SkipPrefix = "skipped by an operator"

// MaxSkipReason bounds the reason of a skip, in characters (so at most
// four times as many bytes): it is kept in the delivery's last error and
// its attempts row, and logged. Characters, not bytes, so that the
// console's field (whose maxlength a browser counts in characters) never
// takes a reason the server then refuses. Callers refuse a longer one;
// SkipError cuts it there whatever the caller did.
const MaxSkipReason = 500

// SkipError is the last error of a delivery Ops.Skip ended, via via, for
// reason (cut at MaxSkipReason characters), that held the order key key
// ("" for none).
func SkipError(via, reason, key string) string {
	if utf8.RuneCountInString(reason) > MaxSkipReason {
		reason = string([]rune(reason)[:MaxSkipReason]) + "…"
	}
	s := SkipPrefix
	if via != "" {
		s += " (" + via + ")"
	}
	if reason == "" {
		reason = "no reason given"
	}
	s += ": " + reason
	if key != "" {
		s += "; it no longer holds its order key " + strconv.Quote(key) +
			" (a replay sends it again without waiting for that key)"
	}
	return s
}

// NotSkippableError is Ops.Skip's refusal of a delivery that is not dead,
// of a FanOut event, or of a delivery that changed since the operator
// looked (SkipParams.Expect).
type NotSkippableError struct {
	ID     int64
	Status Status // the delivery's status when refused; empty for a FanOut event
	FanOut bool
	// Changed reports a refusal for SkipParams.Expect: the delivery's
	// attempts are Attempts, not the Expected the operator saw.
	Changed            bool
	Attempts, Expected int
}

func (e *NotSkippableError) Error() string {
	if e.Changed {
		return fmt.Sprintf("event %d changed since you looked (%d attempts now, %d when you looked: it was replayed or worked meanwhile, and is %s now); look again before skipping it",
			e.ID, e.Attempts, e.Expected, e.Status)
	}
	if e.FanOut {
		return fmt.Sprintf("event %d is an event of several targets: skip one of its dead deliveries (hookbox events show %d lists them)", e.ID, e.ID)
	}
	return fmt.Sprintf("event %d is %s: only a dead delivery can be skipped", e.ID, e.Status)
}
