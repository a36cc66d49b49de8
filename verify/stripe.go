package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"strconv"
	"strings"
	"time"
)

const stripeSignatureHeader = "Stripe-Signature"

var (
	errStripeMissing   = unauthorized("stripe: missing Stripe-Signature header")
	errStripeMalformed = unauthorized("stripe: malformed Stripe-Signature header")
	errStripeNoTS      = unauthorized("stripe: no timestamp in Stripe-Signature header")
	errStripeNoSig     = unauthorized("stripe: no valid v1 signature in Stripe-Signature header")
	errStripeTolerance = unauthorized("stripe: timestamp outside tolerance")
	errStripeNoMatch   = unauthorized("stripe: no v1 signature matches")
	errStripeNotJSON   = malformed("stripe: body is not a JSON object")
	errStripeNoID      = malformed(`stripe: body has no "id" string`)
)

// stripeVerifier verifies Stripe's scheme: "t=<unix>,v1=<hex>[,v1=<hex>…]",
// an HMAC-SHA256 over "{t}.{body}" keyed with the whole secret string. The
// delivery id is the event's "id" in the body.
type stripeVerifier struct {
	keys []*macKey
	tol  time.Duration
}

func newStripe(cfg Config) *stripeVerifier {
	v := &stripeVerifier{tol: cfg.Tolerance}
	for _, s := range cfg.Secrets {
		v.keys = append(v.keys, newMACKey(sha256.New, []byte(s)))
	}
	return v
}

// parseHeader parses the Stripe-Signature header of r into sigs and
// checks its timestamp against the tolerance.
func (v *stripeVerifier) parseHeader(r Request, sigs *[maxSignatures][sha256.Size]byte) (ts int64, n int, err error) {
	h, ok := headerValue(r.Header, stripeSignatureHeader)
	if !ok || h == "" {
		return 0, 0, errStripeMissing
	}
	if ts, n, err = parseStripeSignature(h, sigs); err != nil {
		return 0, 0, err
	}
	if !withinTolerance(ts, nowOr(r.Now), v.tol) {
		return 0, 0, errStripeTolerance
	}
	return ts, n, nil
}

// CheckHeader implements Verifier.
func (v *stripeVerifier) CheckHeader(r Request) error {
	var sigs [maxSignatures][sha256.Size]byte
	_, _, err := v.parseHeader(r, &sigs)
	return err
}

// Verify implements Verifier.
func (v *stripeVerifier) Verify(r Request) (Result, error) {
	var sigs [maxSignatures][sha256.Size]byte
	ts, n, err := v.parseHeader(r, &sigs)
	if err != nil {
		return Result{}, err
	}
	if !v.matches(ts, r.Body, sigs[:n]) {
		return Result{}, errStripeNoMatch
	}
	idRaw, typeRaw, ok := jsonFields(r.Body, "id", "type")
	if !ok {
		return Result{}, errStripeNotJSON
	}
	id, ok := jsonString(idRaw)
	if !ok || id == "" {
		return Result{}, errStripeNoID
	}
	res := Result{DeliveryID: id}
	res.EventType, _ = jsonString(typeRaw)
	return res, nil
}

func (v *stripeVerifier) matches(ts int64, body []byte, sigs [][sha256.Size]byte) bool {
	for _, k := range v.keys {
		st := k.get()
		st.buf = strconv.AppendInt(st.buf, ts, 10)
		st.buf = append(st.buf, '.')
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

// parseStripeSignature parses a Stripe-Signature header. It needs exactly
// one "t" and at least one v1 entry that is 64 hex digits; other keys (v0,
// …) and undecodable v1 entries are ignored, as stripe-go does. Whitespace
// around entries, keys and values is tolerated; empty entries are skipped.
func parseStripeSignature(h string, dst *[maxSignatures][sha256.Size]byte) (ts int64, n int, err error) {
	seenT := false
	for h != "" {
		var part string
		part, h, _ = strings.Cut(h, ",")
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		key, val, ok := strings.Cut(part, "=")
		if !ok {
			return 0, 0, errStripeMalformed
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		switch key {
		case "t":
			if seenT {
				return 0, 0, errStripeMalformed
			}
			if ts, ok = parseUnix(val); !ok {
				return 0, 0, errStripeMalformed
			}
			seenT = true
		case "v1":
			if n >= len(dst) || len(val) != 2*sha256.Size {
				continue
			}
			var src [2 * sha256.Size]byte
			copy(src[:], val)
			if _, err := hex.Decode(dst[n][:], src[:]); err != nil {
				continue
			}
			n++
		}
	}
	if !seenT {
		return 0, 0, errStripeNoTS
	}
	if n == 0 {
		return 0, 0, errStripeNoSig
	}
	return ts, n, nil
}

func (v *stripeVerifier) sign(body []byte, _ string, now time.Time) (http.Header, error) {
	ts := now.Unix()
	st := v.keys[0].get()
	st.buf = strconv.AppendInt(st.buf, ts, 10)
	st.buf = append(st.buf, '.')
	sig := hex.EncodeToString(st.mac(st.buf, body))
	v.keys[0].put(st)
	h := make(http.Header, 1)
	h.Set(stripeSignatureHeader, "t="+strconv.FormatInt(ts, 10)+",v1="+sig)
	return h, nil
}
