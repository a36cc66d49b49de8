package verify

import (
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

// whsecPrefix marks a Standard Webhooks secret whose key is the base64 text
// after it.
const whsecPrefix = "whsec_"

// b64Strict decodes standard base64 and rejects non-zero padding bits, so
// every accepted signature has exactly one textual form.
var b64Strict = base64.StdEncoding.Strict()

// swHeaders names one family of Standard Webhooks headers (webhook-* or the
// older svix-*), with the errors that name them.
type swHeaders struct {
	id, timestamp, signature   string // canonical keys
	errMissingID, errMissingTS error
	errBadTS, errNoSignature   error
}

func newSWHeaders(prefix string) *swHeaders {
	return &swHeaders{
		id:             http.CanonicalHeaderKey(prefix + "-id"),
		timestamp:      http.CanonicalHeaderKey(prefix + "-timestamp"),
		signature:      http.CanonicalHeaderKey(prefix + "-signature"),
		errMissingID:   unauthorized("standard-webhooks: missing " + prefix + "-id header"),
		errMissingTS:   unauthorized("standard-webhooks: missing " + prefix + "-timestamp header"),
		errBadTS:       unauthorized("standard-webhooks: malformed " + prefix + "-timestamp header"),
		errNoSignature: unauthorized("standard-webhooks: no valid v1 signature in " + prefix + "-signature header"),
	}
}

var (
	swWebhook = newSWHeaders("webhook")
	swSvix    = newSWHeaders("svix")

	errSWMissingSignature = unauthorized("standard-webhooks: missing webhook-signature header")
	errSWTolerance        = unauthorized("standard-webhooks: timestamp outside tolerance")
	errSWNoMatch          = unauthorized("standard-webhooks: no v1 signature matches")
)

// standardWebhooks verifies the Standard Webhooks v1 scheme: an HMAC-SHA256
// over "{id}.{timestamp}.{body}" in a space-separated list of "v1,<base64>".
type standardWebhooks struct {
	keys []*macKey
	tol  time.Duration
}

func newStandardWebhooks(cfg Config) (*standardWebhooks, error) {
	v := &standardWebhooks{tol: cfg.Tolerance}
	for i, s := range cfg.Secrets {
		key, err := standardWebhooksKey(s)
		if err != nil {
			return nil, fmt.Errorf("secrets[%d]: %w", i, err)
		}
		v.keys = append(v.keys, newMACKey(sha256.New, key))
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
			return errSWMissingSignature
		}
	}
	s.id, _ = headerValue(r.Header, hs.id)
	if s.id == "" {
		return hs.errMissingID
	}
	tsText, _ := headerValue(r.Header, hs.timestamp)
	if tsText == "" {
		return hs.errMissingTS
	}
	if s.ts, ok = parseUnix(tsText); !ok {
		return hs.errBadTS
	}
	if s.n = parseStandardSignatures(sigHeader, &s.sigs); s.n == 0 {
		return hs.errNoSignature
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
	if !v.matches(s.id, s.ts, r.Body, s.sigs[:s.n]) {
		return Result{}, errSWNoMatch
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
	for len(h) > 0 && n < len(dst) {
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
		b64, ok := strings.CutPrefix(tok, "v1,")
		if !ok || len(b64) != base64.StdEncoding.EncodedLen(sha256.Size) {
			continue
		}
		var src [44]byte
		var out [48]byte
		copy(src[:], b64)
		m, err := b64Strict.Decode(out[:], src[:])
		if err != nil || m != sha256.Size {
			continue
		}
		copy(dst[n][:], out[:sha256.Size])
		n++
	}
	return n
}

func (v *standardWebhooks) sign(body []byte, deliveryID string, now time.Time) (http.Header, error) {
	if err := checkSignID("standard-webhooks", deliveryID); err != nil {
		return nil, err
	}
	ts := now.Unix()
	st := v.keys[0].get()
	mac := st.mac(signedPrefix(st.buf, deliveryID, ts), body)
	sig := "v1," + base64.StdEncoding.EncodeToString(mac)
	v.keys[0].put(st)
	h := make(http.Header, 3)
	h.Set("webhook-id", deliveryID)
	h.Set("webhook-timestamp", strconv.FormatInt(ts, 10))
	h.Set("webhook-signature", sig)
	return h, nil
}
