package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// timestampFormat describes a signature header that is a list of key=value
// pairs holding one timestamp and one or more hex HMAC-SHA256 signatures
// over "{timestamp}{separator}{body}", keyed with the whole secret string.
// Stripe ("t=…,v1=…") and Paddle ("ts=…;h1=…") differ only in names.
type timestampFormat struct {
	scheme    string
	header    string // canonical key
	pairSep   byte   // between key=value pairs
	tsKey     string
	sigKey    string
	signedSep byte // between the timestamp and the body in the signed bytes

	errMissing, errMalformed, errNoTS, errNoSig, errTolerance, errNoMatch error
}

func newTimestampFormat(scheme, header string, pairSep byte, tsKey, sigKey string, signedSep byte) *timestampFormat {
	return &timestampFormat{
		scheme: scheme, header: http.CanonicalHeaderKey(header), pairSep: pairSep,
		tsKey: tsKey, sigKey: sigKey, signedSep: signedSep,
		errMissing:   unauthorized(scheme + ": missing " + header + " header"),
		errMalformed: unauthorized(scheme + ": malformed " + header + " header"),
		errNoTS:      unauthorized(scheme + ": no timestamp in " + header + " header"),
		errNoSig:     unauthorized(scheme + ": no valid " + sigKey + " signature in " + header + " header"),
		errTolerance: unauthorized(scheme + ": timestamp outside tolerance"),
		errNoMatch:   unauthorized(scheme + ": no " + sigKey + " signature matches"),
	}
}

var (
	stripeFormat = newTimestampFormat(SchemeStripe, "Stripe-Signature", ',', "t", "v1", '.')
	paddleFormat = newTimestampFormat(SchemePaddle, "Paddle-Signature", ';', "ts", "h1", ':')

	errStripeNotJSON = malformed("stripe: body is not a JSON object")
	errStripeNoID    = malformed(`stripe: body has no "id" string`)
)

// timestampedVerifier verifies Stripe's and Paddle's schemes. Stripe's
// delivery id is the event's "id" in the body; Paddle's is found by an
// idSpec (by default the body's event_id and event_type).
type timestampedVerifier struct {
	f    *timestampFormat
	keys []*macKey
	tol  time.Duration
	ids  *idSpec // nil for stripe
}

func newTimestamped(cfg Config) (*timestampedVerifier, error) {
	v := &timestampedVerifier{f: stripeFormat, tol: cfg.Tolerance}
	if cfg.Scheme == SchemePaddle {
		v.f = paddleFormat
		d := bodyDefaults[SchemePaddle]
		ids, err := newIDSpec(SchemePaddle, withIDDefaults(cfg, "", d.id, "", d.typ))
		if err != nil {
			return nil, err
		}
		v.ids = &ids
	}
	for _, s := range cfg.Secrets {
		v.keys = append(v.keys, newMACKey(sha256.New, []byte(s)))
	}
	return v, nil
}

// parseHeader parses the signature header of r into sigs and checks its
// timestamp against the tolerance.
func (v *timestampedVerifier) parseHeader(r Request, sigs *[maxSignatures][sha256.Size]byte) (ts int64, n int, err error) {
	h, ok := headerValue(r.Header, v.f.header)
	if !ok || h == "" {
		return 0, 0, absent(r.Header, v.f.errMissing, v.f.header)
	}
	if ts, n, err = v.f.parse(h, sigs); err != nil {
		return 0, 0, err
	}
	if !withinTolerance(ts, nowOr(r.Now), v.tol) {
		return 0, 0, v.f.errTolerance
	}
	return ts, n, nil
}

// CheckHeader implements Verifier.
func (v *timestampedVerifier) CheckHeader(r Request) error {
	var sigs [maxSignatures][sha256.Size]byte
	_, _, err := v.parseHeader(r, &sigs)
	return err
}

// Verify implements Verifier.
func (v *timestampedVerifier) Verify(r Request) (Result, error) {
	var sigs [maxSignatures][sha256.Size]byte
	ts, n, err := v.parseHeader(r, &sigs)
	if err != nil {
		return Result{}, err
	}
	if !v.matches(ts, r.Body, sigs[:n]) {
		return Result{}, v.f.errNoMatch
	}
	if v.ids != nil {
		return v.ids.extract(r)
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

func (v *timestampedVerifier) matches(ts int64, body []byte, sigs [][sha256.Size]byte) bool {
	for _, k := range v.keys {
		st := k.get()
		st.buf = strconv.AppendInt(st.buf, ts, 10)
		st.buf = append(st.buf, v.f.signedSep)
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

// parse parses a signature header of the format. It needs exactly one
// timestamp and at least one signature entry that is 64 hex digits; other
// keys (Stripe's v0, …) and undecodable signature entries are ignored, as
// stripe-go does. Whitespace around entries, keys and values is tolerated;
// empty entries are skipped.
func (f *timestampFormat) parse(h string, dst *[maxSignatures][sha256.Size]byte) (ts int64, n int, err error) {
	seenT := false
	for h != "" {
		var part string
		if i := strings.IndexByte(h, f.pairSep); i >= 0 {
			part, h = h[:i], h[i+1:]
		} else {
			part, h = h, ""
		}
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		key, val, ok := strings.Cut(part, "=")
		if !ok {
			return 0, 0, f.errMalformed
		}
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		switch key {
		case f.tsKey:
			if seenT {
				return 0, 0, f.errMalformed
			}
			if ts, ok = parseUnix(val); !ok {
				return 0, 0, f.errMalformed
			}
			seenT = true
		case f.sigKey:
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
		return 0, 0, f.errNoTS
	}
	if n == 0 {
		return 0, 0, f.errNoSig
	}
	return ts, n, nil
}

func (v *timestampedVerifier) sign(body []byte, deliveryID string, now time.Time) (http.Header, error) {
	ts := now.Unix()
	st := v.keys[0].get()
	st.buf = strconv.AppendInt(st.buf, ts, 10)
	st.buf = append(st.buf, v.f.signedSep)
	sig := hex.EncodeToString(st.mac(st.buf, body))
	v.keys[0].put(st)
	h := make(http.Header, 2)
	if v.ids != nil {
		if err := v.ids.sign(h, deliveryID); err != nil {
			return nil, err
		}
	}
	h.Set(v.f.header, fmt.Sprintf("%s=%d%c%s=%s", v.f.tsKey, ts, v.f.pairSep, v.f.sigKey, sig))
	return h, nil
}
