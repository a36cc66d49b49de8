package hookbox

import (
	"context"
	"net/http"
	"time"
)

// Rejection is one refused delivery (a 400, 401, 404, 408, 413 or 415) as kept for
// the operator: who sent what, and why it was refused. Nothing of it was
// ever stored as an event, unless a later re-check admitted it
// (AdmittedEventID).
type Rejection struct {
	ID int64 `json:"id"`
	// Source is the configured source the delivery was sent to, or, when
	// UnknownSource is set, the name asked for (cut to MaxIDLength bytes).
	Source        string    `json:"source"`
	UnknownSource bool      `json:"unknown_source,omitempty"`
	ReceivedAt    time.Time `json:"received_at"`
	RemoteAddr    string    `json:"remote_addr"`
	Status        int       `json:"status"`
	Reason        string    `json:"reason"`
	// Header is the request's headers as kept for events (no
	// Authorization, Cookie or hop-by-hop headers), a bounded number of
	// values each cut to a bound (rejected.HeaderAltered tells when they
	// are not as sent). The store keeps signature values so that a
	// re-check can verify them again, and a token source's header only
	// when the body was kept whole (else no re-check could use it),
	// listed under a name the log reserves (rejected.MarkCredentials);
	// whoever shows a Rejection masks them (rejected.DisplayHeader, then
	// the signature and credential headers known by name or from the
	// configuration).
	Header http.Header `json:"headers,omitempty"`
	// BodySize is the size of the whole body in bytes, as read or as
	// declared; -1 when neither is known (an unread body of undeclared
	// length).
	BodySize int64 `json:"body_size"`
	// Body holds the body's first bytes (up to the configured limit), nil
	// when it was not read.
	Body []byte `json:"-"`
	// BodyComplete says Body is the whole body: only such a delivery can
	// be verified again and admitted.
	BodyComplete bool `json:"body_complete"`
	// AdmittedEventID is the event a re-check stored (or found already
	// stored) for this delivery; 0 while it has not passed one.
	AdmittedEventID int64 `json:"admitted_event_id,omitempty"`
}

// RejectionFilter selects rejections for listing. Zero fields match all.
type RejectionFilter struct {
	Source   string
	Status   int
	Since    time.Time // received at or after
	BeforeID int64     // only ids below this (paging newest first)
	// Unadmitted leaves out rejections a re-check already admitted.
	Unadmitted bool
	// WithBody reads Body too (listings leave it out by default).
	WithBody bool
	Limit    int // 0 means DefaultListLimit
}

// RejectionBounds bound the rejected-deliveries log: every write trims it,
// in the same transaction, to the rows received at or after Since, and
// then to MaxCount rows by deleting the oldest rows of the largest group
// (each configured source's rows are a group, and the rows of every
// unknown source name together are one): one noisy sender gives up its own
// rows first, and a group smaller than the others keeps its rows. A store
// on a server with a clock of its own (PostgreSQL) takes Since as a
// distance before the caller's now and judges it on the server's clock,
// so a caller whose clock is ahead trims no younger rows than max_age.
type RejectionBounds struct {
	MaxCount int
	Since    time.Time // zero: no age bound
}

// RejectionStore keeps the log of rejected deliveries. It is bounded:
// AddRejections trims it in the transaction that adds, so no commit leaves
// more than the bound's rows.
type RejectionStore interface {
	// AddRejections stores rs (their ID fields are ignored) and trims the
	// log to b, in one transaction. It returns how many rows it trimmed.
	// With no rs it only trims.
	AddRejections(ctx context.Context, rs []Rejection, b RejectionBounds) (trimmed int, err error)

	// Rejection returns one rejection with its body, or an error that
	// matches ErrNotFound.
	Rejection(ctx context.Context, id int64) (Rejection, error)

	// Rejections lists rejections matching f, newest first.
	Rejections(ctx context.Context, f RejectionFilter) ([]Rejection, error)

	// SetRejectionAdmitted records that a re-check admitted rejection id
	// as event eventID. It is an error matching ErrNotFound when the row
	// is gone (trimmed meanwhile).
	SetRejectionAdmitted(ctx context.Context, id, eventID int64) error
}
