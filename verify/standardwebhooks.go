package verify

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// maxSignatures bounds how many signatures of one header are considered.
// Providers send one, or two or three while a secret rolls; further entries
// are ignored.
const maxSignatures = 16

// maxV1a bounds the v1a (ed25519) entries considered, more tightly: an
// HMAC is made once per key and compared with every entry, but an ed25519
// check hashes the whole body once per entry and key, so 16 forged entries
// would cost 16 passes over the body per key before anything is known of
// the sender. Three cover a sender signing with an old and a new key.
const maxV1a = 3

// Standard Webhooks key prefixes: whsec_ marks a symmetric secret whose
// HMAC key is the base64 text after it; whpk_ an ed25519 public key (v1a
// signatures) and whsk_ its private key, both base64 after the prefix.
const (
	whsecPrefix = "whsec_"
	whpkPrefix  = "whpk_"
	whskPrefix  = "whsk_"
)

// b64Strict decodes standard base64 and rejects non-zero padding bits, so
// every accepted signature has exactly one textual form.
var b64Strict = base64.StdEncoding.Strict()

// swHeaders names one family of Standard Webhooks headers (webhook-* or the
// older svix-*), with the errors that name them.
type swHeaders struct {
	id, timestamp, signature   string // canonical keys
	errMissingID, errMissingTS error
	errBadTS                   error
	errNoSignature             [3]error // by swVersions
}

func newSWHeaders(prefix string) *swHeaders {
	return &swHeaders{
		id:           http.CanonicalHeaderKey(prefix + "-id"),
		timestamp:    http.CanonicalHeaderKey(prefix + "-timestamp"),
		signature:    http.CanonicalHeaderKey(prefix + "-signature"),
		errMissingID: unauthorized("standard-webhooks: missing " + prefix + "-id header"),
		errMissingTS: unauthorized("standard-webhooks: missing " + prefix + "-timestamp header"),
		errBadTS:     unauthorized("standard-webhooks: malformed " + prefix + "-timestamp header"),
		errNoSignature: [3]error{
			unauthorized("standard-webhooks: no valid v1 signature in " + prefix + "-signature header"),
			unauthorized("standard-webhooks: no valid v1a signature in " + prefix + "-signature header"),
			unauthorized("standard-webhooks: no valid v1 or v1a signature in " + prefix + "-signature header"),
		},
	}
}

// swVersions says which signature versions a verifier's keys can check:
// v1 (HMAC secrets), v1a (whpk_ public keys) or both; it indexes the
// errors that name them.
type swVersions int

const (
	swV1 swVersions = iota
	swV1a
	swBoth
)

var (
	swWebhook = newSWHeaders("webhook")
	swSvix    = newSWHeaders("svix")

	errSWMissingSignature = unauthorized("standard-webhooks: missing webhook-signature header")
	errSWTolerance        = unauthorized("standard-webhooks: timestamp outside tolerance")
	errSWNoMatch          = [3]error{
		unauthorized("standard-webhooks: no v1 signature matches"),
		unauthorized("standard-webhooks: no v1a signature matches"),
		unauthorized("standard-webhooks: no v1 or v1a signature matches"),
	}
)

// standardWebhooks verifies the Standard Webhooks scheme: a space-separated
// list of "v1,<base64>", HMAC-SHA256 over "{id}.{timestamp}.{body}" under a
// whsec_ secret, and "v1a,<base64>", ed25519 signatures over the same bytes
// under a whpk_ public key. Secrets of both kinds may be configured at once.
type standardWebhooks struct {
	keys       []*macKey
	pub        []ed25519.PublicKey
	versions   swVersions
	tol        time.Duration
	signingKey string
}

func newStandardWebhooks(cfg Config) (*standardWebhooks, error) {
	v := &standardWebhooks{tol: cfg.Tolerance, signingKey: cfg.SigningKey}
	for i, s := range cfg.Secrets {
		if strings.HasPrefix(s, whskPrefix) {
			return nil, fmt.Errorf("secrets[%d]: a whsk_ key is the sender's private key: configure its whpk_ public key, and keep whsk_ secret", i)
		}
		if rest, ok := strings.CutPrefix(s, whpkPrefix); ok {
			pub, ok := decodeKey(rest, ed25519.PublicKeySize)
			if !ok || strings.TrimSpace(rest) != rest {
				return nil, fmt.Errorf("secrets[%d]: whpk_ key is not base64 of a 32-byte ed25519 public key", i)
			}
			v.pub = append(v.pub, ed25519.PublicKey(pub))
			continue
		}
		key, err := standardWebhooksKey(s)
		if err != nil {
			return nil, fmt.Errorf("secrets[%d]: %w", i, err)
		}
		v.keys = append(v.keys, newMACKey(sha256.New, key))
	}
	switch {
	case len(v.pub) == 0:
		v.versions = swV1
	case len(v.keys) == 0:
		v.versions = swV1a
	default:
		v.versions = swBoth
	}
	return v, nil
}

// standardWebhooksKey derives the HMAC key from a secret: the base64-decoded
// text after "whsec_", or else the UTF-8 bytes of the whole secret (older
// Polar secrets). The error never quotes the secret.
func standardWebhooksKey(secret string) ([]byte, error) {
	rest, ok := strings.CutPrefix(secret, whsecPrefix)
	if !ok {
		return []byte(secret), nil
	}
	key, err := base64.StdEncoding.DecodeString(rest)
	if err != nil {
		key, err = base64.RawStdEncoding.DecodeString(rest)
	}
	if err != nil {
		return nil, errors.New("whsec_ secret is not valid base64")
	}
	if len(key) == 0 {
		return nil, errors.New("whsec_ secret holds an empty key")
	}
	return key, nil
}

// swSigned is what the headers of a Standard Webhooks delivery carry.
type swSigned struct {
	id   string
	ts   int64
	sigs [maxSignatures][sha256.Size]byte
	n    int
	v1a  [maxV1a][ed25519.SignatureSize]byte
	na   int
}

// parseHeader reads and checks everything the headers of r can show: the
// id, a well-formed timestamp within the tolerance, and at least one
// well-formed v1 signature.
func (v *standardWebhooks) parseHeader(r Request, s *swSigned) error {
	hs := swWebhook
	sigHeader, ok := headerValue(r.Header, hs.signature)
	if !ok {
		hs = swSvix
		if sigHeader, ok = headerValue(r.Header, hs.signature); !ok {
			return absent(r.Header, errSWMissingSignature, swWebhook.signature, swSvix.signature)
		}
	}
	s.id, _ = headerValue(r.Header, hs.id)
	if s.id == "" {
		return absent(r.Header, hs.errMissingID, hs.id)
	}
	tsText, _ := headerValue(r.Header, hs.timestamp)
	if tsText == "" {
		return absent(r.Header, hs.errMissingTS, hs.timestamp)
	}
	if s.ts, ok = parseUnix(tsText); !ok {
		return hs.errBadTS
	}
	if v.versions != swV1a {
		s.n = parseStandardSignatures(sigHeader, &s.sigs)
	}
	if v.versions != swV1 {
		s.na = parseStandardV1a(sigHeader, &s.v1a)
	}
	if s.n+s.na == 0 {
		return hs.errNoSignature[v.versions]
	}
	if !withinTolerance(s.ts, nowOr(r.Now), v.tol) {
		return errSWTolerance
	}
	return nil
}

// CheckHeader implements Verifier.
func (v *standardWebhooks) CheckHeader(r Request) error {
	var s swSigned
	return v.parseHeader(r, &s)
}

// Verify implements Verifier.
func (v *standardWebhooks) Verify(r Request) (Result, error) {
	var s swSigned
	if err := v.parseHeader(r, &s); err != nil {
		return Result{}, err
	}
	if !v.matches(s.id, s.ts, r.Body, s.sigs[:s.n]) && !v.matchesV1a(s.id, s.ts, r.Body, s.v1a[:s.na]) {
		return Result{}, errSWNoMatch[v.versions]
	}
	res := Result{DeliveryID: s.id}
	if raw, _, ok := jsonFields(r.Body, "type", ""); ok {
		res.EventType, _ = jsonString(raw)
	}
	return res, nil
}

func (v *standardWebhooks) matches(id string, ts int64, body []byte, sigs [][sha256.Size]byte) bool {
	for _, k := range v.keys {
		st := k.get()
		st.buf = signedPrefix(st.buf, id, ts)
		mac := st.mac(st.buf, body)
		found := false
		for i := range sigs {
			if hmac.Equal(mac, sigs[i][:]) {
				found = true
				break
			}
		}
		k.put(st)
		if found {
			return true
		}
	}
	return false
}

// matchesV1a reports whether any v1a signature verifies under any public
// key.
func (v *standardWebhooks) matchesV1a(id string, ts int64, body []byte, sigs [][ed25519.SignatureSize]byte) bool {
	if len(sigs) == 0 || len(v.pub) == 0 {
		return false
	}
	msg := append(signedPrefix(make([]byte, 0, len(id)+32+len(body)), id, ts), body...)
	for _, k := range v.pub {
		for i := range sigs {
			if ed25519.Verify(k, msg, sigs[i][:]) {
				return true
			}
		}
	}
	return false
}

// signedPrefix appends "{id}.{ts}." to buf.
func signedPrefix(buf []byte, id string, ts int64) []byte {
	buf = append(buf, id...)
	buf = append(buf, '.')
	buf = strconv.AppendInt(buf, ts, 10)
	return append(buf, '.')
}

// parseStandardSignatures decodes the v1 entries of a webhook-signature
// header into dst and returns how many it found. Entries are separated by
// whitespace; entries of other versions (v1a, …) and v1 entries that are not
// canonical base64 of 32 bytes are ignored.
func parseStandardSignatures(h string, dst *[maxSignatures][sha256.Size]byte) int {
	n := 0
	for tok := range signatureEntries(h) {
		if n == len(dst) {
			break
		}
		if decodeEntry(tok, "v1,", dst[n][:]) {
			n++
		}
	}
	return n
}

// parseStandardV1a decodes the v1a entries (ed25519, 64 bytes) of a
// webhook-signature header into dst, as parseStandardSignatures does v1;
// past maxV1a of them, the rest are ignored.
// (The two stay apart: a shared loop would need a callback, and the
// callback an allocation per request.)
func parseStandardV1a(h string, dst *[maxV1a][ed25519.SignatureSize]byte) int {
	n := 0
	for tok := range signatureEntries(h) {
		if n == len(dst) {
			break
		}
		if decodeEntry(tok, "v1a,", dst[n][:]) {
			n++
		}
	}
	return n
}

// signatureEntries yields the whitespace-separated entries of h.
func signatureEntries(h string) func(yield func(string) bool) {
	return func(yield func(string) bool) {
		for len(h) > 0 {
			i := 0
			for i < len(h) && isSpace(h[i]) {
				i++
			}
			h = h[i:]
			j := 0
			for j < len(h) && !isSpace(h[j]) {
				j++
			}
			tok := h[:j]
			h = h[j:]
			if tok != "" && !yield(tok) {
				return
			}
		}
	}
}

// decodeEntry decodes tok, "<version>,<base64>", into dst when its version
// is the wanted one and its signature is canonical padded base64 of exactly
// len(dst) bytes.
func decodeEntry(tok, version string, dst []byte) bool {
	b64, ok := strings.CutPrefix(tok, version)
	if !ok || len(b64) != base64.StdEncoding.EncodedLen(len(dst)) {
		return false
	}
	var src [88]byte // EncodedLen(ed25519.SignatureSize), the longest
	var out [ed25519.SignatureSize + 2]byte
	n := copy(src[:], b64)
	m, err := b64Strict.Decode(out[:], src[:n])
	if err != nil || m != len(dst) {
		return false
	}
	copy(dst, out[:m])
	return true
}

func (v *standardWebhooks) sign(body []byte, deliveryID string, now time.Time) (http.Header, error) {
	if err := checkSignID("standard-webhooks", deliveryID); err != nil {
		return nil, err
	}
	ts := now.Unix()
	var sig string
	switch {
	case v.signingKey != "":
		rest, ok := strings.CutPrefix(v.signingKey, whskPrefix)
		var priv ed25519.PrivateKey
		if ok {
			priv, _ = parseEd25519Private(rest)
		}
		if priv == nil {
			return nil, errors.New("standard-webhooks: signing key: want whsk_ and the base64 of an ed25519 seed or private key")
		}
		msg := append(signedPrefix(nil, deliveryID, ts), body...)
		sig = "v1a," + base64.StdEncoding.EncodeToString(ed25519.Sign(priv, msg))
	case len(v.keys) == 0:
		return nil, errors.New("standard-webhooks: a whpk_ public key cannot sign: give its whsk_ private key (hookbox send --signing-key)")
	default:
		st := v.keys[0].get()
		mac := st.mac(signedPrefix(st.buf, deliveryID, ts), body)
		sig = "v1," + base64.StdEncoding.EncodeToString(mac)
		v.keys[0].put(st)
	}
	h := make(http.Header, 3)
	h.Set("webhook-id", deliveryID)
	h.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	h.Set("webhook-signature", sig)
	return h, nil
}
