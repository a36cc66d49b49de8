package hookbox

import "errors"

// Errors shared by every Store implementation. Implementations map their
// driver's error codes to these, never by matching message text.
var (
	// ErrNotFound means the requested row does not exist.
	ErrNotFound = errors.New("not found")
	// ErrUnavailable means the database could not be reached or could not
	// commit; the caller should answer 503 and let the sender retry.
	ErrUnavailable = errors.New("store unavailable")
	// ErrReadOnly means the database answers but refuses writes (a
	// PostgreSQL standby after a failover, or default_transaction_read_only
	// set); errors that match it match ErrUnavailable too.
	ErrReadOnly = errors.New("the database is read-only")
	// ErrTooManyConnections means the database server refused a new
	// connection because it has none free for it: max_connections, or a
	// role's or database's connection limit, is reached (PostgreSQL's
	// SQLSTATE 53300); errors that match it match ErrUnavailable too.
	ErrTooManyConnections = errors.New("the database refuses more connections")
)
