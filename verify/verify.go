// Package verify checks the signature of an incoming webhook delivery and
// extracts the sender's stable delivery id and event type.
//
// One Verifier serves one configured source and one signature scheme:
// "standard-webhooks" (v1 HMAC and v1a ed25519; also Svix, Clerk, Resend,
// Polar, GitLab signing tokens), "stripe", "paddle", "github", the
// configurable "hmac" scheme (an HMAC, ed25519 or ECDSA P-256 signature over
// a template of timestamp, URL and body: Slack, Zoom, Square, Discord,
// SendGrid, Shopify, Linear, …), "twilio", "mailgun" (signature fields in the
// body), "token" (a shared token in a header), "basic" (HTTP basic auth) and
// "none". New validates a Config once; Verify then runs per request and is
// safe for concurrent use.
//
// The guarantees the rest of hookbox relies on:
//
//   - Signatures are verified over the raw body bytes exactly as received;
//     the body is never re-encoded.
//   - BodyKey keys a verified body by what its signature covers, so that
//     bodies one signature covers (twilio's parameters reordered or
//     re-encoded) share one key and cannot be stored as new events.
//   - Every signature comparison is constant-time (crypto/hmac.Equal) on the
//     decoded signature bytes; tokens and passwords are compared as
//     SHA-256 digests, so neither their bytes nor their length leak.
//   - Any of the configured secrets may match (rotation), and any of the
//     signatures a header carries may match.
//   - Where a scheme signs a timestamp (standard-webhooks, stripe, paddle,
//     mailgun, hmac with a timestamp_header), it must lie
//     within the configured tolerance of the current time in both directions:
//     deliveries that are too old and deliveries from too far in the future
//     are both rejected.
//   - Errors never contain a secret, a key derived from one, or the expected
//     or computed signature. Every error returned by Verify wraps exactly one
//     of ErrUnauthorized (answer 401) or ErrMalformed (answer 400).
//   - The signature is checked before anything else about the delivery is
//     judged, so an unauthenticated request always gets ErrUnauthorized.
//   - CheckHeader refuses, from the headers alone, what Verify would refuse
//     for a missing or malformed signature header or a signed timestamp
//     outside the tolerance, with the same error, so that a server need not
//     read the body of such a request; it never refuses a request that
//     Verify would accept.
//   - A handshake (Config.Handshake: Slack's url_verification, Zoom's
//     endpoint.url_validation, Discord's PING) is answered only after its
//     signature has been verified, and comes back as Result.Reply: the
//     caller writes that reply and stores nothing. A reply never echoes more
//     than a bounded, printable challenge the verified sender chose.
package verify

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Scheme names accepted in Config.Scheme.
const (
	SchemeStandardWebhooks = "standard-webhooks"
	SchemeStripe           = "stripe"
	SchemeGitHub           = "github"
	SchemeHMAC             = "hmac"
	SchemeNone             = "none"
	SchemePaddle           = "paddle"
	SchemeTwilio           = "twilio"
	SchemeMailgun          = "mailgun"
	SchemeToken            = "token"
	SchemeBasic            = "basic"
)

// Schemes lists every scheme name New accepts, for messages and docs.
var Schemes = []string{
	SchemeStandardWebhooks, SchemeStripe, SchemePaddle, SchemeGitHub, SchemeHMAC,
	SchemeTwilio, SchemeMailgun, SchemeToken, SchemeBasic, SchemeNone,
}

// Units of the hmac scheme's signed timestamp (Config.TimestampUnit).
const (
	TimestampSeconds = "s"  // unix seconds, 10 digits today (the default)
	TimestampMillis  = "ms" // unix milliseconds, 13 digits today (Webflow)
)

// unitBound is where a signed timestamp read in one unit is taken for
// the other in a refusal's reason: 10^11 seconds is after the year 5138,
// and 10^11 milliseconds is before March 1973, so a value past it read as
// seconds, or short of it read as milliseconds, is in the other unit.
// It only names the reason: such a timestamp is outside any tolerance.
const unitBound = 100_000_000_000

// DefaultTolerance is the signed-timestamp window used when
// Config.Tolerance is zero.
const DefaultTolerance = 5 * time.Minute

// Request is what a verifier sees of one delivery.
type Request struct {
	Header http.Header // the request headers as received
	Body   []byte      // the raw body, exactly as received
	Now    time.Time   // the time to check signed timestamps against; zero means time.Now()
}

// Result is what a verified delivery yields.
type Result struct {
	DeliveryID string // stable id across retries; hex SHA-256 of Body when the source has none
	IDIsHash   bool   // DeliveryID is the body hash
	EventType  string // "" when unknown; always UTF-8 (see textType)
	// Reply, when not nil, is a handshake the sender expects answered
	// (Config.Handshake): write it as the whole reply and store nothing.
	Reply *Reply
	// Nonce, when not empty, is a value the signature covers that the
	// sender uses for one request only (Mailgun's token), where the
	// signature does not cover the body. Whoever captured a signed request
	// could send its signature with another body until NonceExpires, so
	// the receiver must remember it at least until then and refuse it with
	// any other body (hookbox.NonceStore).
	Nonce string
	// NonceSigned is the timestamp the signature covers, and NonceExpires
	// when it leaves the tolerance, after which Verify refuses the
	// signature. The tolerance of a scheme with nonces is at most
	// MaxNonceTolerance.
	NonceSigned, NonceExpires time.Time
}

// SignsNonces reports whether v's Results carry a Nonce (mailgun's), so
// that whoever judges nonces can skip the sources that never have one.
func SignsNonces(v Verifier) bool {
	for {
		if _, ok := v.(interface{ signsNonces() }); ok {
			return true
		}
		w, ok := v.(wrapper)
		if !ok {
			return false
		}
		v = w.inner()
	}
}

// BodyKey returns the SHA-256 of what v's signature covers of body, the
// key under which a source that dedupes by body too stores a delivery v
// verified (hookbox.Delivery.BodySHA256). For most schemes that is the
// body's bytes. Twilio's signature covers the body's form parameters,
// decoded and sorted, so that bodies differing only in the parameters'
// order, their encoding or a trailing "&" pass with one signature: its key
// is the hash of that signed form, so that they are one delivery, and a
// captured callback cannot be stored again by reshuffling its body. A
// scheme whose signature covers no part of the body (mailgun, token,
// basic, none) keys the body's bytes. body must be one that v verified.
func BodyKey(v Verifier, body []byte) [sha256.Size]byte {
	for {
		if k, ok := v.(bodyKeyer); ok {
			if key, ok := k.bodyKey(body); ok {
				return key
			}
			break
		}
		w, ok := v.(wrapper)
		if !ok {
			break
		}
		v = w.inner()
	}
	return sha256.Sum256(body)
}

// bodyKeyer is implemented by the verifiers whose signature covers a form
// of the body other than its bytes (BodyKey). ok is false for a body that
// cannot have been verified, which is then keyed by its bytes.
type bodyKeyer interface {
	bodyKey(body []byte) (key [sha256.Size]byte, ok bool)
}

// MaxNonceTolerance bounds the tolerance of the schemes whose signatures
// carry a nonce (mailgun): a receiver remembers nonces for this long (and
// a margin), so that a tolerance raised later cannot make valid again a
// signature whose nonce it has forgotten.
const MaxNonceTolerance = time.Hour

// Reply is the answer to a verified handshake request.
type Reply struct {
	Status      int    // HTTP status, 200 or 204
	ContentType string // "" when Body is empty
	Body        []byte
}

// Verifier checks one scheme's signature and extracts the delivery id.
// Implementations returned by New are safe for concurrent use.
type Verifier interface {
	// Verify authenticates r and returns its delivery id and event type.
	// A non-nil error wraps ErrUnauthorized or ErrMalformed.
	Verify(r Request) (Result, error)
	// CheckHeader judges what r's headers alone can show, before the body
	// is read: a missing or malformed signature header, and a signed
	// timestamp outside the tolerance. r.Body is ignored. A nil error does
	// not authenticate anything; Verify must still run on the whole body.
	// A non-nil error wraps ErrUnauthorized and is the error Verify would
	// return for the same headers.
	CheckHeader(r Request) error
}

// Config configures one source's verifier (fields mirror the YAML source
// keys). Tolerance applies to the schemes that sign a timestamp and is
// ignored by the others. New rejects keys that the chosen scheme does not
// use, and secrets for the none scheme.
type Config struct {
	Scheme    string        // one of Schemes
	Secrets   []string      // one or more, any may match (rotation); public keys for ed25519 and ecdsa-p256
	Tolerance time.Duration // signed-timestamp window, both directions; 0 => 5m

	// hmac scheme (Header also names the token scheme's header):
	Header    string // signature header name (required for hmac and token)
	Prefix    string // e.g. "sha256=", default ""
	Encoding  string // "hex" (default) | "base64"
	Algorithm string // "sha256" (default) | "sha1" | "sha512" | "ed25519" | "ecdsa-p256"
	// Signed is what the signature covers: literal text with {timestamp}
	// and {url}, ending in {body} (default "{body}").
	Signed string
	// TimestampHeader holds the signed unix timestamp ({timestamp}).
	TimestampHeader string
	// TimestampUnit is the unit of TimestampHeader's value:
	// TimestampSeconds ("s", the default) or TimestampMillis ("ms", as
	// Webflow sends). {timestamp} is the header's number in that unit,
	// unconverted.
	TimestampUnit string

	// PublicURL is the URL the sender posts to, as the sender sees it: the
	// hmac scheme's {url}, and what the twilio scheme signs.
	PublicURL string

	// Where the delivery id and the event type are, for the schemes whose
	// id is not fixed (hmac, none, paddle, twilio, mailgun, token, basic);
	// TypeHeader and TypeField also replace the event type of the others.
	// A field is a JSON field of the body, a dotted path for a nested one
	// ("event.type").
	IDHeader   string // header holding the delivery id
	IDField    string // JSON field holding the delivery id
	TypeHeader string // optional header holding the event type
	TypeField  string // optional JSON field holding the event type
	// IDOptional keys a delivery whose IDHeader or IDField is missing or
	// empty by the body hash (Result.IDIsHash), as a source with neither
	// does, instead of refusing it: for senders that leave the id out of
	// some kinds of delivery (Slack's app_rate_limited). It needs IDHeader
	// or IDField.
	IDOptional bool

	// Handshake names the URL check the sender makes and expects answered:
	// "slack", "zoom" or "discord" ("" for none).
	Handshake string

	// SigningKey is the private key Sign uses for public-key signatures
	// (whsk_… for standard-webhooks v1a; an ed25519 or ECDSA P-256 key for
	// hmac). Verification never uses it; it is not a config file key.
	SigningKey string
}

// ErrUnauthorized means the delivery is not authenticated: the signature is
// missing, unparseable or matches no secret, or the signed timestamp lies
// outside the tolerance. Answer HTTP 401.
var ErrUnauthorized = errors.New("verify: unauthorized")

// ErrMalformed means the delivery is authenticated (or needs no signature)
// but its delivery id cannot be found: a stripe body that is not JSON or has
// no "id", or a configured id header or field that is missing. Answer HTTP 400.
var ErrMalformed = errors.New("verify: malformed delivery")

// verifyError carries a short human reason and wraps one of the sentinels.
// The reason is fixed when the verifier is built and never holds secrets or
// signatures; the common ones are preallocated so that rejecting a forged
// request costs no allocation.
type verifyError struct {
	kind   error
	reason string
}

func (e *verifyError) Error() string { return e.reason }
func (e *verifyError) Unwrap() error { return e.kind }

func unauthorized(reason string) error { return &verifyError{ErrUnauthorized, reason} }
func malformed(reason string) error    { return &verifyError{ErrMalformed, reason} }

// New validates cfg and returns the Verifier for its scheme. Errors name the
// offending key (for example `hmac: header is required` or
// `encoding: must be hex or base64`) and never include secret values.
func New(cfg Config) (Verifier, error) {
	return build(cfg)
}

// signer is implemented by every verifier New builds; Sign uses it.
type signer interface {
	Verifier
	sign(body []byte, deliveryID string, now time.Time) (http.Header, error)
}

func build(cfg Config) (signer, error) {
	if cfg.Tolerance < 0 {
		return nil, errors.New("tolerance: must not be negative")
	}
	if cfg.Tolerance == 0 {
		cfg.Tolerance = DefaultTolerance
	}
	switch cfg.Scheme {
	case SchemeNone:
		if len(cfg.Secrets) > 0 {
			return nil, errors.New("secrets: not used by the none scheme (no signature is checked)")
		}
	case "":
		return nil, errors.New("scheme: is required (" + schemeList() + ")")
	default:
		if !slices.Contains(Schemes, cfg.Scheme) {
			return nil, fmt.Errorf("scheme: unknown scheme %q (want %s)", cfg.Scheme, schemeList())
		}
		if err := checkSecrets(cfg.Secrets); err != nil {
			return nil, err
		}
	}
	if err := checkKeysUsed(cfg); err != nil {
		return nil, err
	}

	var (
		v   signer
		err error
	)
	switch cfg.Scheme {
	case SchemeStandardWebhooks:
		v, err = asSigner(newStandardWebhooks(cfg))
	case SchemeStripe, SchemePaddle:
		v, err = asSigner(newTimestamped(cfg))
	case SchemeGitHub:
		v = newGitHub(cfg)
	case SchemeHMAC:
		v, err = asSigner(newHMAC(cfg))
	case SchemeTwilio:
		v, err = asSigner(newTwilio(cfg))
	case SchemeMailgun:
		v, err = asSigner(newMailgun(cfg))
	case SchemeToken, SchemeBasic:
		v, err = asSigner(newToken(cfg))
	default:
		v, err = asSigner(newNone(cfg))
	}
	if err != nil {
		return nil, err
	}
	if fixedID(cfg.Scheme) && (cfg.TypeHeader != "" || cfg.TypeField != "") {
		var tv *typeOverride
		if tv, err = newTypeOverride(v, cfg); err != nil {
			return nil, err
		}
		v = tv
	}
	if cfg.Handshake != "" {
		var hs *handshaker
		if hs, err = newHandshaker(v, cfg); err != nil {
			return nil, err
		}
		v = hs
	}
	return textType{v}, nil
}

// textType makes every Result's EventType UTF-8 text, each run of bytes
// that are not replaced by U+FFFD. The event type is a label to route
// and show, not the dedupe key: a verified delivery is not refused, and
// so lost, over a Latin-1 byte in it, as it would be over one in its id.
type textType struct{ signer }

func (t textType) inner() signer { return t.signer }

// Verify implements Verifier.
func (t textType) Verify(r Request) (Result, error) {
	res, err := t.signer.Verify(r)
	if !utf8.ValidString(res.EventType) {
		res.EventType = strings.ToValidUTF8(res.EventType, "\uFFFD")
	}
	return res, err
}

// asSigner returns a constructor's result as a signer. Constructors return
// concrete pointers; this never lets a nil one become a non-nil interface
// next to an error.
func asSigner[T signer](v T, err error) (signer, error) {
	if err != nil {
		return nil, err
	}
	return v, nil
}

// schemeList is Schemes for messages: "a, b or c".
func schemeList() string {
	return strings.Join(Schemes[:len(Schemes)-1], ", ") + " or " + Schemes[len(Schemes)-1]
}

// fixedID reports whether the scheme finds the delivery id itself, in a
// place the provider fixes (for standard-webhooks the id is signed).
func fixedID(scheme string) bool {
	return scheme == SchemeStandardWebhooks || scheme == SchemeStripe || scheme == SchemeGitHub
}

// ChecksTimestamp reports whether a source of scheme checks a signed
// timestamp against its tolerance: standard-webhooks, stripe, paddle and
// mailgun always, hmac when it names a timestamp_header.
func ChecksTimestamp(scheme, timestampHeader string) bool {
	switch scheme {
	case SchemeStandardWebhooks, SchemeStripe, SchemePaddle, SchemeMailgun:
		return true
	case SchemeHMAC:
		return timestampHeader != ""
	}
	return false
}

// checkKeysUsed refuses keys the chosen scheme does not use, so that a
// mistyped scheme or a key meant for another one is caught at start.
func checkKeysUsed(cfg Config) error {
	only := func(key, val, users string, ok bool) error {
		if val != "" && !ok {
			return fmt.Errorf("%s: only used by the %s", key, users)
		}
		return nil
	}
	hmacOnly := cfg.Scheme == SchemeHMAC
	for _, c := range []struct {
		key, val, users string
		ok              bool
	}{
		{"header", cfg.Header, "hmac and token schemes", hmacOnly || cfg.Scheme == SchemeToken},
		{"prefix", cfg.Prefix, "hmac scheme", hmacOnly},
		{"encoding", cfg.Encoding, "hmac scheme", hmacOnly},
		{"algorithm", cfg.Algorithm, "hmac scheme", hmacOnly},
		{"signed", cfg.Signed, "hmac scheme", hmacOnly},
		{"timestamp_header", cfg.TimestampHeader, "hmac scheme", hmacOnly},
		{"timestamp_unit", cfg.TimestampUnit, "hmac scheme", hmacOnly},
		{"public_url", cfg.PublicURL, "hmac and twilio schemes", hmacOnly || cfg.Scheme == SchemeTwilio},
		{"id_header", cfg.IDHeader, "schemes whose id is not fixed (not standard-webhooks, stripe or github)", !fixedID(cfg.Scheme)},
		{"id_field", cfg.IDField, "schemes whose id is not fixed (not standard-webhooks, stripe or github)", !fixedID(cfg.Scheme)},
		{"handshake", cfg.Handshake, "schemes that check a signature (not none)", cfg.Scheme != SchemeNone},
	} {
		if err := only(c.key, c.val, c.users, c.ok); err != nil {
			return err
		}
	}
	if cfg.IDOptional && fixedID(cfg.Scheme) {
		return errors.New("id_optional: only used by the schemes whose id is not fixed (not standard-webhooks, stripe or github)")
	}
	return nil
}

func checkSecrets(secrets []string) error {
	if len(secrets) == 0 {
		return errors.New("secrets: at least one secret is required")
	}
	for i, s := range secrets {
		if s == "" {
			return fmt.Errorf("secrets[%d]: must not be empty", i)
		}
	}
	return nil
}

// Sign produces the headers a provider would send for body (used by
// `hookbox send`, benchmarks and tests). deliveryID is used where the scheme
// carries it in a header (standard-webhooks webhook-id, github
// X-GitHub-Delivery, IDHeader); for stripe, and for an id taken from a JSON
// field, the id lives in the body and deliveryID is ignored. Sign uses
// Secrets[0], or SigningKey for a public-key signature; a zero now means
// time.Now(). Only signature, timestamp and id headers are set, never
// Content-Type. A scheme that signs inside the body (mailgun) needs
// SignRequest.
func Sign(cfg Config, body []byte, deliveryID string, now time.Time) (http.Header, error) {
	h, signed, err := SignRequest(cfg, body, deliveryID, now)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(signed, body) {
		return nil, fmt.Errorf("%s: the signature goes inside the body: use SignRequest", cfg.Scheme)
	}
	return h, nil
}

// SignRequest is Sign for every scheme: it returns the headers and the
// body to send, which differs from body only where the scheme puts its
// signature in the body (mailgun).
func SignRequest(cfg Config, body []byte, deliveryID string, now time.Time) (http.Header, []byte, error) {
	v, err := build(cfg)
	if err != nil {
		return nil, nil, err
	}
	if now.IsZero() {
		now = time.Now()
	}
	for {
		w, ok := v.(wrapper)
		if !ok {
			break
		}
		v = w.inner() // wrappers change results, never what is signed
	}
	if bs, ok := v.(bodySigner); ok {
		return bs.signBody(body, deliveryID, now)
	}
	h, err := v.sign(body, deliveryID, now)
	return h, body, err
}

// wrapper is implemented by the verifiers that wrap another one
// (typeOverride, handshaker).
type wrapper interface{ inner() signer }

// bodySigner is implemented by the verifiers whose signature lives in the
// body.
type bodySigner interface {
	signBody(body []byte, deliveryID string, now time.Time) (http.Header, []byte, error)
}

// macKey computes HMACs under one key. The keyed hash states are pooled so
// that a verification allocates nothing: hmac.New does several allocations
// and derives the inner and outer pads, whereas Reset on a used state only
// restores them.
type macKey struct {
	pool sync.Pool
}

type macState struct {
	h   hash.Hash
	sum [64]byte // room for the largest digest (SHA-512)
	buf []byte   // scratch for the signed prefix (id, timestamp, separators)
}

func newMACKey(newHash func() hash.Hash, key []byte) *macKey {
	key = append([]byte(nil), key...)
	k := &macKey{}
	k.pool.New = func() any {
		return &macState{h: hmac.New(newHash, key), buf: make([]byte, 0, 128)}
	}
	return k
}

func (k *macKey) get() *macState {
	s := k.pool.Get().(*macState)
	s.h.Reset()
	s.buf = s.buf[:0]
	return s
}

func (k *macKey) put(s *macState) {
	if cap(s.buf) > 4096 { // do not keep a huge scratch buffer alive
		s.buf = make([]byte, 0, 128)
	}
	k.pool.Put(s)
}

// mac writes prefix then body and returns the MAC, which aliases s.sum.
func (s *macState) mac(prefix, body []byte) []byte {
	if len(prefix) > 0 {
		s.h.Write(prefix)
	}
	s.h.Write(body)
	return s.h.Sum(s.sum[:0])
}

// Header helpers. Keys are canonicalised once, when the verifier is built;
// the request's header map is then indexed directly.

// headerValue returns the header sent under canonicalKey, trimmed. A
// header sent on more than one line counts as absent: which line the
// sender meant is ambiguous, and trusting the first (or the last) would
// make the answer depend on the lines' order. See absent.
func headerValue(h http.Header, canonicalKey string) (string, bool) {
	vs := h[canonicalKey]
	if len(vs) != 1 {
		return "", false
	}
	return strings.TrimSpace(vs[0]), true
}

// absent is the error for a header that headerValue did not give:
// missing, the error prepared for a missing header, or, when one of keys
// was sent on more than one line, an error of the same kind that says so.
func absent(h http.Header, missing error, keys ...string) error {
	var ve *verifyError
	if !errors.As(missing, &ve) {
		return missing
	}
	for _, k := range keys {
		if len(h[k]) > 1 {
			scheme, _, _ := strings.Cut(ve.reason, ": ")
			return &verifyError{ve.kind, scheme + ": " + k + " header sent more than once"}
		}
	}
	return missing
}

// bodyHash returns the hex SHA-256 of body.
func bodyHash(body []byte) string {
	sum := sha256.Sum256(body)
	var buf [2 * sha256.Size]byte
	hex.Encode(buf[:], sum[:])
	return string(buf[:])
}

func nowOr(t time.Time) time.Time {
	if t.IsZero() {
		return time.Now()
	}
	return t
}

// parseUnix parses a unix timestamp in seconds: ASCII digits only, no sign,
// at most 18 digits so that it fits an int64 with room to spare.
func parseUnix(s string) (int64, bool) {
	if len(s) == 0 || len(s) > 18 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}

// withinTolerance reports whether the unix time ts (seconds) lies within
// tol of now, in either direction.
func withinTolerance(ts int64, now time.Time, tol time.Duration) bool {
	return timeWithin(time.Unix(ts, 0), now, tol)
}

// timeWithin reports whether t lies within tol of now, in either
// direction. time.Time.Sub saturates, so distant timestamps cannot
// overflow into the window.
func timeWithin(t, now time.Time, tol time.Duration) bool {
	d := now.Sub(t)
	return d <= tol && d >= -tol
}

// isSpace reports whether c is optional whitespace in a header value.
func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\r' || c == '\n' }

// checkSignID checks a delivery id that Sign is to put in a header: it must
// be non-empty and survive the trip through HTTP unchanged.
func checkSignID(scheme, id string) error {
	if id == "" {
		return fmt.Errorf("%s: a delivery id is required to sign", scheme)
	}
	if strings.TrimSpace(id) != id {
		return fmt.Errorf("%s: delivery id must not start or end with whitespace", scheme)
	}
	for i := 0; i < len(id); i++ {
		if c := id[i]; c < 0x20 || c == 0x7f {
			return fmt.Errorf("%s: delivery id must not contain control characters", scheme)
		}
	}
	return nil
}
