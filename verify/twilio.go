package verify

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"
)

// twilioSignatureHeader carries Twilio's signature.
var twilioSignatureHeader = http.CanonicalHeaderKey("X-Twilio-Signature")

// maxTwilioParams bounds the form parameters of a Twilio body; Twilio's
// callbacks carry a few dozen.
const maxTwilioParams = 1000

var (
	errTwilioMissing   = unauthorized("twilio: missing X-Twilio-Signature header")
	errTwilioMalformed = unauthorized("twilio: malformed X-Twilio-Signature header (want base64 of 20 bytes)")
	errTwilioForm      = unauthorized("twilio: body is not a form (application/x-www-form-urlencoded) of at most " + strconv.Itoa(maxTwilioParams) + " parameters")
	errTwilioNoMatch   = unauthorized("twilio: signature does not match")
)

// twilioVerifier verifies Twilio's scheme: X-Twilio-Signature is the base64
// HMAC-SHA1, keyed with the auth token, of the URL Twilio posted to
// followed by each form parameter of the body, sorted by name, as name and
// value with nothing between. The URL is configured (PublicURL), since
// hookbox cannot know how a proxy in front of it rewrote it; like Twilio's
// own validators it is tried with and without the scheme's default port.
// Bodies that are JSON (signed through a bodySHA256 query parameter) are
// not supported.
type twilioVerifier struct {
	keys []*macKey
	urls []string // PublicURL as configured, then with the default port added or removed
	ids  idSpec
}

func newTwilio(cfg Config) (*twilioVerifier, error) {
	if err := checkPublicURL(cfg.PublicURL); err != nil {
		return nil, err
	}
	v := &twilioVerifier{urls: []string{cfg.PublicURL}}
	if alt := togglePort(cfg.PublicURL); alt != "" && alt != cfg.PublicURL {
		v.urls = append(v.urls, alt)
	}
	ids, err := newIDSpec(SchemeTwilio, cfg)
	if err != nil {
		return nil, err
	}
	v.ids = ids
	for _, s := range cfg.Secrets {
		v.keys = append(v.keys, newMACKey(sha1.New, []byte(s)))
	}
	return v, nil
}

// togglePort returns u with its scheme's default port removed when it has
// it, or added when it has no port ("" when u has another port).
func togglePort(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return ""
	}
	def := "80"
	if u.Scheme == "https" {
		def = "443"
	}
	switch u.Port() {
	case "":
		u.Host += ":" + def
	case def:
		u.Host = u.Hostname()
		if bytes.IndexByte([]byte(u.Host), ':') >= 0 { // IPv6 literal
			u.Host = "[" + u.Host + "]"
		}
	default:
		return ""
	}
	return u.String()
}

func (v *twilioVerifier) parseHeader(r Request, sig *[sha1.Size]byte) error {
	h, ok := headerValue(r.Header, twilioSignatureHeader)
	if !ok || h == "" {
		return absent(r.Header, errTwilioMissing, twilioSignatureHeader)
	}
	var buf [sha1.Size + 3]byte
	n, ok := decodeSignature(h, true, buf[:])
	if !ok || n != sha1.Size {
		return errTwilioMalformed
	}
	copy(sig[:], buf[:n])
	return nil
}

// CheckHeader implements Verifier.
func (v *twilioVerifier) CheckHeader(r Request) error {
	var sig [sha1.Size]byte
	return v.parseHeader(r, &sig)
}

// Verify implements Verifier.
func (v *twilioVerifier) Verify(r Request) (Result, error) {
	var sig [sha1.Size]byte
	if err := v.parseHeader(r, &sig); err != nil {
		return Result{}, err
	}
	params, ok := twilioParams(r.Body)
	if !ok {
		return Result{}, errTwilioForm
	}
	for _, k := range v.keys {
		for _, u := range v.urls {
			st := k.get()
			mac := st.mac(twilioSigned(st.buf, u, params), nil)
			ok := hmac.Equal(mac, sig[:])
			k.put(st)
			if ok {
				return v.result(r, params)
			}
		}
	}
	return Result{}, errTwilioNoMatch
}

// result is the Result of a verified request. Without an id_header the id
// is the hash of what Twilio signed (the parameters, sorted, as signed),
// not of the body's bytes: Twilio signs the decoded parameters, so a
// captured callback sent again with its parameters in another order, an
// encoding changed or a "&" added passes the signature with other bytes,
// and would have been stored as a new event each time (Twilio signs no
// timestamp to bound that). Bodies that sign alike are one delivery. The
// same hash is the body key (BodyKey), which keeps them one delivery when
// the id comes from a header the signature does not cover (id_header).
func (v *twilioVerifier) result(r Request, params url.Values) (Result, error) {
	res, err := v.ids.extract(r)
	if err == nil && res.IDIsHash {
		key := twilioKey(params)
		res.DeliveryID = hex.EncodeToString(key[:])
	}
	return res, err
}

// bodyKey implements bodyKeyer.
func (v *twilioVerifier) bodyKey(body []byte) ([sha256.Size]byte, bool) {
	params, ok := twilioParams(body)
	if !ok {
		return [sha256.Size]byte{}, false
	}
	return twilioKey(params), true
}

// twilioKey is the SHA-256 of what Twilio signs of params, the URL left
// out (it is the source's own).
func twilioKey(params url.Values) [sha256.Size]byte {
	return sha256.Sum256(twilioSigned(nil, "", params))
}

// twilioParams parses a form body into its parameters, bounded in number.
func twilioParams(body []byte) (url.Values, bool) {
	if bytes.Count(body, []byte("&")) >= maxTwilioParams {
		return nil, false
	}
	params, err := url.ParseQuery(string(body))
	if err != nil {
		return nil, false
	}
	return params, true
}

// twilioSigned appends what Twilio signs to buf: the URL, then each
// parameter's name and value, names sorted, and a name's several values
// sorted too.
func twilioSigned(buf []byte, u string, params url.Values) []byte {
	buf = append(buf, u...)
	names := make([]string, 0, len(params))
	for name := range params {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		vals := slices.Clone(params[name])
		slices.Sort(vals)
		for _, val := range vals {
			buf = append(buf, name...)
			buf = append(buf, val...)
		}
	}
	return buf
}

func (v *twilioVerifier) sign(body []byte, deliveryID string, _ time.Time) (http.Header, error) {
	params, ok := twilioParams(body)
	if !ok {
		return nil, errTwilioForm
	}
	h := make(http.Header, 2)
	if err := v.ids.sign(h, deliveryID); err != nil {
		return nil, err
	}
	st := v.keys[0].get()
	mac := st.mac(twilioSigned(st.buf, v.urls[0], params), nil)
	h.Set(twilioSignatureHeader, base64.StdEncoding.EncodeToString(mac))
	v.keys[0].put(st)
	return h, nil
}
