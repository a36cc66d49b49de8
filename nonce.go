package hookbox

import (
	"bytes"
	"context"
	"crypto/sha256"
	"slices"
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
	// so any bytes will do; one value is one nonce at every source (a
	// sender's signing key may serve several).
	Value string
	// BodySHA256 is the SHA-256 of the body the nonce came with.
	BodySHA256 []byte
	// Signed is the timestamp the signature covers.
	Signed time.Time
	// Now is when the signature was judged: nonces signed more than
	// NonceKeep before it are forgotten.
	Now time.Time
}

// NonceKeep is how long after its signed timestamp a nonce is remembered:
// longer than the largest tolerance a scheme with nonces accepts
// (verify.MaxNonceTolerance, an hour), so that no tolerance, raised later
// or set otherwise at another process, makes valid again a signature
// whose nonce is forgotten; and 5 minutes more, as a signature judged in
// time may reach the store later (its body may take a minute to arrive)
// and the processes sharing a store may not agree on the time to the
// second.
const NonceKeep = time.Hour + 5*time.Minute

// NonceStore remembers the nonces of verified deliveries, in the database
// every process of a deployment shares, so that a nonce used at one
// process is refused with another body at all of them, and after a
// restart.
type NonceStore interface {
	// UseNonces judges ns in one transaction and reports, for each,
	// whether its delivery may be stored: true when its value is new (it
	// is then remembered with its body) or remembered with the same body,
	// false when remembered with another body (the delivery is a replay
	// and must be refused). Entries of ns with one value are all judged
	// against the body it is remembered with, the first entry's if it is
	// new. Concurrent calls agree: one body per nonce is accepted. Each
	// call also forgets, for every entry, a few nonces signed more than
	// NonceKeep before the earliest Now of ns, so the store holds about
	// those of NonceKeep. On error nothing is promised.
	UseNonces(ctx context.Context, ns []Nonce) ([]bool, error)
}

// NonceKey is what stores index a nonce by: the SHA-256 of its value.
type NonceKey [32]byte

// Key returns n's NonceKey.
func (n *Nonce) Key() NonceKey { return sha256.Sum256([]byte(n.Value)) }

// JudgeNonces is the part of UseNonces every store shares: it calls use
// with the entries of ns whose keys come first, in the order of their
// keys (the order rows are written in, so that concurrent transactions
// lock them in one order); use stores them and reports the body each key
// is remembered with, from which JudgeNonces answers every entry of ns.
func JudgeNonces(ns []Nonce, use func(first []int, keys []NonceKey) (kept [][]byte, err error)) ([]bool, error) {
	keys := make([]NonceKey, len(ns))
	seen := map[NonceKey]bool{}
	var first []int
	for i := range ns {
		keys[i] = ns[i].Key()
		if !seen[keys[i]] {
			seen[keys[i]] = true
			first = append(first, i)
		}
	}
	slices.SortFunc(first, func(a, b int) int { return bytes.Compare(keys[a][:], keys[b][:]) })
	firstKeys := make([]NonceKey, len(first))
	for j, i := range first {
		firstKeys[j] = keys[i]
	}
	kept, err := use(first, firstKeys)
	if err != nil {
		return nil, err
	}
	body := make(map[NonceKey][]byte, len(first))
	for j, i := range first {
		body[keys[i]] = kept[j]
	}
	ok := make([]bool, len(ns))
	for i := range ns {
		ok[i] = bytes.Equal(body[keys[i]], ns[i].BodySHA256)
	}
	return ok, nil
}

// NonceSweep is the signed time before which a UseNonces of ns forgets
// nonces, and how many it forgets at most: two for each entry and two
// more, so that forgetting keeps ahead of remembering.
func NonceSweep(ns []Nonce) (before time.Time, most int) {
	for i, n := range ns {
		if i == 0 || n.Now.Before(before) {
			before = n.Now
		}
	}
	return before.Add(-NonceKeep), 2*len(ns) + 2
}

// ReplayReason is the reason given for a delivery refused because its
// nonce was used with another body, in the reply and in the log of
// rejected deliveries. A re-check of the log never admits such a
// delivery: it cannot tell which of the two bodies was the sender's.
const ReplayReason = "the signature's one-time token was already used with another body: a replay"
