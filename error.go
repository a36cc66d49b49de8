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
)
