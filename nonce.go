package hookbox

import (
	"context"
	"time"
)

// Nonce is a value a sender's signature covers and uses for one request
// only, where the signature does not cover the body (Mailgun's token,
// verify.Result.Nonce): whoever captured a signed request could send its
// signature again with a body of their own until the signed timestamp
// leaves the tolerance. Remembering the nonce with the body it came with
// refuses that; the same request sent again (the same body) is let
// through, to be answered as the duplicate it is.
type Nonce struct {
	Source string // the configured source name
	// Value is the nonce as the sender signed it. Stores keep its SHA-256,
	// so any bytes will do.
	Value string
	// BodySHA256 is the SHA-256 of the body the nonce came with.
	BodySHA256 []byte
	// Expires is when the sender's signature stops being accepted.
	Expires time.Time
	// Now is when the signature was judged: nonces that expired more than
	// NonceKeep before it are forgotten.
	Now time.Time
}

// NonceKeep is how long a nonce is remembered after it expires. A
// signature judged in time may reach the store later (its body may take
// a minute to arrive), and the processes sharing a store may not agree on
// the time to the second: forgetting a nonce at its expiry by one clock
// could let another process, judging the same signature a little earlier
// by its own, find no trace of it.
const NonceKeep = 5 * time.Minute

// NonceStore remembers the nonces of verified deliveries, in the database
// every process of a deployment shares, so that a nonce used at one
// process is refused with another body at all of them, and after a
// restart.
type NonceStore interface {
	// UseNonce remembers n and reports true when n.Value is new for
	// n.Source or was remembered with the same body (it is then kept
	// until the later of the two expiries). It reports false when n.Value
	// is remembered with another body: the delivery is a replay and must
	// be refused. Concurrent calls with one value agree: one body is
	// accepted. Each call also forgets a few nonces that expired more than
	// NonceKeep before n.Now, so the store holds about those of one
	// tolerance window.
	UseNonce(ctx context.Context, n Nonce) (bool, error)
}

// ReplayReason is the reason given for a delivery refused because its
// nonce was used with another body, in the reply and in the log of
// rejected deliveries. A re-check of the log never admits such a
// delivery: it cannot tell which of the two bodies was the sender's.
const ReplayReason = "the signature's one-time token was already used with another body: a replay"
