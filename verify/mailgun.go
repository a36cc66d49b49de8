package verify

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"
)

// maxMailgunToken bounds the token Mailgun signs (it sends 50 characters).
const maxMailgunToken = 256

var (
	errMailgunNoSignature = unauthorized(`mailgun: body has no "signature" object with timestamp, token and signature`)
	errMailgunBadTS       = unauthorized("mailgun: malformed signature.timestamp")
	errMailgunBadSig      = unauthorized("mailgun: malformed signature.signature (want 64 hex digits)")
	errMailgunTolerance   = unauthorized("mailgun: timestamp outside tolerance")
	errMailgunNoMatch     = unauthorized("mailgun: signature does not match")
)

// mailgunVerifier verifies Mailgun's webhooks, which sign inside the JSON
// body: "signature": {"timestamp", "token", "signature"}, the signature
// being the hex HMAC-SHA256 of timestamp followed by token, keyed with the
// HTTP webhook signing key. An event of a subaccount also carries
// "parent-signature", the same HMAC under the parent account's key: either
// may match. The signature does not cover "event-data": within the
// tolerance, whoever captured a delivery could send its signature with
// other event data. So the token is returned as the Result's Nonce, for
// the receiver to refuse it with another body; keep the tolerance short,
// and use allow_ips where you can. The delivery id is event-data.id by
// default.
type mailgunVerifier struct {
	keys []*macKey
	tol  time.Duration
	ids  idSpec
}

func newMailgun(cfg Config) (*mailgunVerifier, error) {
	d := bodyDefaults[SchemeMailgun]
	ids, err := newIDSpec(SchemeMailgun, withIDDefaults(cfg, "", d.id, "", d.typ))
	if err != nil {
		return nil, err
	}
	if cfg.Tolerance > MaxNonceTolerance {
		return nil, fmt.Errorf("mailgun: tolerance %v is more than %v: a token is remembered that long, to refuse it with another body", cfg.Tolerance, MaxNonceTolerance)
	}
	v := &mailgunVerifier{tol: cfg.Tolerance, ids: ids}
	for _, s := range cfg.Secrets {
		v.keys = append(v.keys, newMACKey(sha256.New, []byte(s)))
	}
	return v, nil
}

// signsNonces marks a scheme whose Results carry a Nonce (SignsNonces).
func (v *mailgunVerifier) signsNonces() {}

// CheckHeader implements Verifier: the signature is in the body.
func (v *mailgunVerifier) CheckHeader(Request) error { return nil }

// mailgunSigned is the "signature" object of a body.
type mailgunSigned struct {
	ts    int64
	token string
	sigs  [2][sha256.Size]byte // signature, and parent-signature if sent
	n     int                  // how many of sigs were sent
}

// parseMailgunSignature reads the "signature" object of body.
func parseMailgunSignature(body []byte, s *mailgunSigned) error {
	obj, _, ok := jsonFields(body, "signature", "")
	if !ok || obj == nil {
		return errMailgunNoSignature
	}
	// One pass over the object, which whoever sends the body chooses.
	names := [4]string{"timestamp", "token", "signature", "parent-signature"}
	var vals [4][]byte
	if !jsonMembers(obj, names[:], vals[:]) {
		return errMailgunNoSignature
	}
	tsRaw, tokenRaw, sigRaw, parentRaw := vals[0], vals[1], vals[2], vals[3]
	tsText, okTS := jsonScalarText(tsRaw)
	token, okToken := jsonString(tokenRaw)
	sigText, okSig := jsonString(sigRaw)
	if !okTS || !okToken || !okSig || token == "" || len(token) > maxMailgunToken {
		return errMailgunNoSignature
	}
	if s.ts, ok = parseUnix(tsText); !ok {
		return errMailgunBadTS
	}
	texts := []string{sigText}
	if parentRaw != nil {
		parent, ok := jsonString(parentRaw)
		if !ok {
			return errMailgunBadSig
		}
		texts = append(texts, parent)
	}
	for i, t := range texts {
		if len(t) != 2*sha256.Size {
			return errMailgunBadSig
		}
		if _, err := hex.Decode(s.sigs[i][:], []byte(t)); err != nil {
			return errMailgunBadSig
		}
	}
	s.n = len(texts)
	s.token = token
	return nil
}

// Verify implements Verifier.
func (v *mailgunVerifier) Verify(r Request) (Result, error) {
	var s mailgunSigned
	if err := parseMailgunSignature(r.Body, &s); err != nil {
		return Result{}, err
	}
	if !withinTolerance(s.ts, nowOr(r.Now), v.tol) {
		return Result{}, errMailgunTolerance
	}
	for _, k := range v.keys {
		st := k.get()
		st.buf = strconv.AppendInt(st.buf, s.ts, 10)
		want := st.mac(st.buf, []byte(s.token))
		ok := false
		for i := range s.n {
			ok = hmac.Equal(want, s.sigs[i][:]) || ok
		}
		k.put(st)
		if ok {
			res, err := v.ids.extract(r)
			if err != nil {
				return Result{}, err
			}
			res.Nonce, res.NonceSigned = s.token, time.Unix(s.ts, 0)
			res.NonceExpires = res.NonceSigned.Add(v.tol)
			return res, nil
		}
	}
	return Result{}, errMailgunNoMatch
}

func (v *mailgunVerifier) sign([]byte, string, time.Time) (http.Header, error) {
	return nil, errors.New("mailgun: the signature goes inside the body: use SignRequest")
}

// signBody implements bodySigner: it sets the "signature" object of body,
// a JSON object, with a fresh token.
func (v *mailgunVerifier) signBody(body []byte, deliveryID string, now time.Time) (http.Header, []byte, error) {
	h := http.Header{}
	if err := v.ids.sign(h, deliveryID); err != nil {
		return nil, nil, err
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(body, &doc); err != nil || doc == nil {
		return nil, nil, errors.New("mailgun: to sign, the body must be a JSON object")
	}
	var tok [25]byte
	rand.Read(tok[:])
	token := hex.EncodeToString(tok[:])
	ts := strconv.FormatInt(now.Unix(), 10)
	st := v.keys[0].get()
	sig := hex.EncodeToString(st.mac([]byte(ts), []byte(token)))
	v.keys[0].put(st)
	signature, _ := json.Marshal(map[string]string{"timestamp": ts, "token": token, "signature": sig})
	doc["signature"] = signature
	out, err := json.Marshal(doc)
	if err != nil {
		return nil, nil, err
	}
	return h, out, nil
}
