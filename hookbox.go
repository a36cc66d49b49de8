// Package hookbox holds the domain of the hookbox webhook receiver: the event
// and its states, the Store that keeps events, and the error codes shared by
// every implementation.
//
// The guarantees that the rest of the tree builds on:
//
//   - An event is stored at most once per (source, delivery id): the store's
//     unique constraint decides, never a prior read.
//   - Store.Ingest returns only after the rows it reports are durably
//     committed; a Receipt is therefore a promise the caller may acknowledge.
//   - The raw body is kept byte for byte.
//
// Implementations live in packages named for their technology (sqlite,
// postgres); storetest is the conformance suite both pass.
package hookbox

import (
	"context"
	"net/http"
	"regexp"
	"strings"
	"time"
)

// Status is the state of an event in the queue.
type Status string

// The states an event moves through. pending → processing → done, or back to
// pending for a retry, or dead after the last attempt.
const (
	StatusPending    Status = "pending"
	StatusProcessing Status = "processing"
	StatusDone       Status = "done"
	StatusDead       Status = "dead"
	// StatusStored is how an event nothing works reads: one of a
	// store_only source, or one no named target wanted. It is never a
	// queue row's state, only what Event, Events and filters show.
	StatusStored Status = "stored"
)

// Valid reports whether s is one of the known states.
func (s Status) Valid() bool {
	switch s {
	case StatusPending, StatusProcessing, StatusDone, StatusDead, StatusStored:
		return true
	}
	return false
}

// Delivery is one verified request as it arrives, before it is stored.
type Delivery struct {
	Source     string      // configured source name
	DeliveryID string      // the sender's stable id, or the body hash
	IDIsHash   bool        // DeliveryID is the SHA-256 of Payload
	EventType  string      // "" when the sender gives none
	Header     http.Header // request headers kept for forwarding
	Payload    []byte      // the raw body, exactly as received
	ReceivedAt time.Time
	// BodySHA256 is set when the source dedupes by body too: the SHA-256
	// of what the signature covers of Payload (verify.BodyKey), which is
	// Payload itself for every scheme but twilio.
	BodySHA256 []byte

	// FanOut says the event is not worked as itself: it is stored as the
	// record of what arrived (never claimed), with one delivery row per
	// entry of Routes, each worked on its own. A source with named
	// targets, and a store_only one (no Routes), store their events so.
	FanOut bool
	// Routes are the targets whose filters matched, for a FanOut source.
	Routes []Route
}

// Route is one target a FanOut delivery goes to.
type Route struct {
	Target string // the target's name within its source
	// OrderKey is the value of the target's order_by in this delivery
	// ("" when the target has none, or the delivery lacks it: such a
	// delivery is not ordered).
	OrderKey string
}

// QueueName is the source column of a delivery row: the source for an
// event worked as itself, "source/target" for a target's delivery.
func QueueName(source, target string) string {
	if target == "" {
		return source
	}
	return source + "/" + target
}

// queueName is a source name, or a source and a target name.
var queueName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]*(/[A-Za-z0-9][A-Za-z0-9_.-]*)?$`)

// ValidQueueName reports whether name can be a queue name: a source or
// target name is letters, digits, '_', '-' and '.', starting with a letter
// or digit.
func ValidQueueName(name string) bool { return queueName.MatchString(name) }

// SplitQueueName undoes QueueName. Source names never hold a "/".
func SplitQueueName(name string) (source, target string) {
	source, target, _ = strings.Cut(name, "/")
	return source, target
}

// Receipt is the outcome of storing one Delivery.
type Receipt struct {
	ID        int64 // the event's row id (the existing row for a duplicate)
	Duplicate bool  // an event with the same (source, delivery id) was already stored
}

// Event is a stored delivery with its queue state.
type Event struct {
	ID         int64  `json:"id"`
	Source     string `json:"source"`
	DeliveryID string `json:"delivery_id"`
	IDIsHash   bool   `json:"id_is_hash"`
	EventType  string `json:"event_type"`
	Status     Status `json:"status"`
	Attempts   int    `json:"attempts"`
	// AttemptBase is Attempts as it was when the event was last replayed:
	// attempt numbers go on across replays, and the retry budget counts
	// from here.
	AttemptBase   int         `json:"attempt_base,omitempty"`
	NextAttemptAt time.Time   `json:"next_attempt_at"`
	LeaseOwner    string      `json:"lease_owner,omitempty"`
	LastError     string      `json:"last_error,omitempty"`
	CreatedAt     time.Time   `json:"created_at"`
	UpdatedAt     time.Time   `json:"updated_at"`
	Header        http.Header `json:"headers,omitempty"`
	Payload       []byte      `json:"-"`
	// PayloadCleared says payload retention dropped the payload; the id
	// and status (the dedupe memory) are kept. An empty body is not a
	// cleared one: its Payload is zero bytes, not nil.
	PayloadCleared bool `json:"payload_cleared,omitempty"`

	// FanOut marks an event that is never worked itself: one of a source
	// with named targets, or of a store_only source. Its Status summarises
	// its deliveries (see SummaryStatus): stored when it has none.
	FanOut bool `json:"fanout,omitempty"`
	// Parent is, for a target's delivery, the id of its event; Source is
	// then "source/target" (QueueName) and Target the target's name.
	Parent   int64  `json:"parent,omitempty"`
	Target   string `json:"target,omitempty"`
	OrderKey string `json:"order_key,omitempty"`
}

// SourceName is the configured source of e, without its target.
func (e *Event) SourceName() string {
	src, _ := SplitQueueName(e.Source)
	return src
}

// EventID is the id of the event e belongs to: Parent for a target's
// delivery, else e's own ID. It is the id the sender's 202 carried and
// the one forwards and exec commands are given (Hookbox-Event-Id,
// HOOKBOX_EVENT_ID) and attempt spans carry (hookbox.event_id). A
// delivery's own row is named by that id with its target's name, as its
// Idempotency-Key does.
func (e *Event) EventID() int64 {
	if e.Parent != 0 {
		return e.Parent
	}
	return e.ID
}

// SummaryStatus is the status of a FanOut event whose deliveries have the
// given states: processing or pending while any is, else dead if any is,
// else done; stored when it has none. The stores compute the same in SQL.
func SummaryStatus(states []Status) Status {
	if len(states) == 0 {
		return StatusStored
	}
	have := map[Status]bool{}
	for _, s := range states {
		have[s] = true
	}
	for _, s := range []Status{StatusProcessing, StatusPending, StatusDead} {
		if have[s] {
			return s
		}
	}
	return StatusDone
}

// Store is everything a hookbox store does: it keeps events (EventStore),
// ingests in open transactions (IngestBeginner), drains them as a queue
// (Queue), serves the operator (Ops), keeps the log of rejected deliveries
// (RejectionStore), remembers one-time signature values (NonceStore) and
// the console's live sessions (SessionStore), and runs application
// transactions (Transactor). Both implementations, sqlite and postgres,
// are all of it, checked by the one conformance suite in storetest; a
// consumer that needs less takes the narrower interface as its parameter.
type Store interface {
	EventStore
	IngestBeginner
	Queue
	Ops
	RejectionStore
	NonceStore
	SessionStore
	Overviewer
	Transactor

	// Listen calls wake each time another process commits new events to
	// the store, until ctx ends. A store that only one process writes
	// returns at once.
	Listen(ctx context.Context, wake func()) error
}

// EventStore keeps events. Every method is safe for concurrent use.
type EventStore interface {
	// Ingest stores deliveries in one transaction and returns one Receipt per
	// delivery, in order, only after that transaction committed. The rows
	// stored and the receipts are those of storing the entries one at a
	// time in order, however they are batched: an entry that repeats the
	// (Source, DeliveryID) of one stored new earlier in ds is a duplicate
	// of its row. On error nothing is promised about any entry and the
	// caller must not acknowledge them.
	Ingest(ctx context.Context, ds []Delivery) ([]Receipt, error)

	// Event returns one event with its headers and payload, or an error
	// that matches ErrNotFound.
	Event(ctx context.Context, id int64) (Event, error)

	// Events lists events matching f, newest first, without payloads.
	Events(ctx context.Context, f Filter) ([]Event, error)

	// Ping reports whether the database answers and takes writes (an
	// error matching ErrReadOnly when it answers but is read-only).
	Ping(ctx context.Context) error

	// Close releases the store's connections.
	Close() error
}

// IngestBeginner is implemented by stores that can keep one ingest
// transaction open while batches are added to it, so that a receiver can
// gather deliveries into the next transaction while the previous one
// commits, and commit it the moment the disk is free.
type IngestBeginner interface {
	BeginIngest(ctx context.Context) (IngestTx, error)
}

// IngestTx is an open ingest transaction. Add has Ingest's semantics for
// the rows it reports, including deliveries that repeat one added earlier
// in the same transaction, except that nothing is promised until Commit
// returns nil: only then is every Receipt of every Add durable. After an
// error from Add the caller must Rollback. Methods are not safe for
// concurrent use.
type IngestTx interface {
	Add(ctx context.Context, ds []Delivery) ([]Receipt, error)
	Commit(ctx context.Context) error
	Rollback() error
}

// Filter selects events for listing, replay and purge. Zero fields match all.
// Its text fields match byte for byte on every store, whatever the
// database's collation: case counts, and '%' and '_' are themselves.
type Filter struct {
	Source    string
	Status    Status
	EventType string
	// DeliveryID matches the sender's id exactly; with Source it is one
	// lookup in the unique index.
	DeliveryID string
	// OrderKey matches a delivery's order key exactly (Event.OrderKey):
	// the deliveries of one key of an ordered target.
	OrderKey string
	// Since and Until bound the created time as the store keeps it: to
	// the millisecond on SQLite, the microsecond on PostgreSQL (the one
	// difference of precision between them, in every time a store
	// keeps). A time read back from the store bounds as it reads:
	// Since an event's CreatedAt lists it, Until it does not.
	Since    time.Time // created at or after
	Until    time.Time // created before
	BeforeID int64     // only ids below this (paging newest first)
	Parent   int64     // only the deliveries of this FanOut event
	// Limit bounds a listing (0 means DefaultListLimit); a replay or a
	// purge takes every match.
	Limit int
}

// DefaultListLimit is the number of events a listing returns when the
// filter sets no limit.
const DefaultListLimit = 100
