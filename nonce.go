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
// until then refuses that; the same request sent again (the same body) is
// let through, to be answered as the duplicate it is.
type Nonce struct {
	Source string // the configured source name
	Value  string // the nonce as the sender signed it
	// BodySHA256 is the SHA-256 of the body the nonce came with.
	BodySHA256 []byte
	// Expires is when the sender's signature stops being accepted; the
	// nonce is remembered until then.
	Expires time.Time
	// Now is the time to judge Expires against, its own and those of the
	// nonces already remembered.
	Now time.Time
}

// NonceStore remembers the nonces of verified deliveries, in the database
// every process of a deployment shares, so that a nonce used at one
// process is refused with another body at all of them, and after a
// restart.
type NonceStore interface {
	// UseNonce remembers n and reports true when n.Value is new for
	// n.Source, or was remembered with the same body, or with any body
	// until an expiry before n.Now (it is then remembered anew). It
	// reports false when n.Value is remembered, unexpired, with another
	// body: the delivery is a replay and must be refused. Concurrent calls
	// with one value agree: at most one body is accepted. Each call also
	// forgets a few expired nonces, so the store holds about those of one
	// tolerance window.
	UseNonce(ctx context.Context, n Nonce) (bool, error)
}

// ReplayReason is the reason given for a delivery refused because its
// nonce was used with another body, in the reply and in the log of
// rejected deliveries. A re-check of the log never admits such a
// delivery: it cannot tell which of the two bodies was the sender's.
const ReplayReason = "the signature's one-time token was already used with another body: a replay"
