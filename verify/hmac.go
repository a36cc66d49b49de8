package verify

import (
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"hash"
	"net/http"
	"strings"
	"time"
)

// hmacVerifier verifies the generic scheme: the configured header holds
// Prefix + encode(HMAC-alg(secret, body)), with hex or base64 encoding. It
// covers Shopify, Lemon Squeezy, Linear, Bitbucket, Meta and the like.
type hmacVerifier struct {
	keys     []*macKey
	header   string // canonical signature header key
	prefix   string
	base64   bool
	size     int // digest size in bytes
	ids      idSpec
	errMiss  error
	errBad   error
	errMatch error
}

func newHMAC(cfg Config) (*hmacVerifier, error) {
	if cfg.Header == "" {
		return nil, errors.New("hmac: header is required")
	}
	if !validHeaderName(cfg.Header) {
		return nil, errors.New("header: not a valid header name")
	}
	var newHash func() hash.Hash
	switch cfg.Algorithm {
	case "", "sha256":
		newHash = sha256.New
	case "sha1":
		newHash = sha1.New
	case "sha512":
		newHash = sha512.New
	default:
		return nil, errors.New("algorithm: must be sha256, sha1 or sha512")
	}
	v := &hmacVerifier{
		header: http.CanonicalHeaderKey(cfg.Header),
		prefix: cfg.Prefix,
		size:   newHash().Size(),
	}
	switch cfg.Encoding {
	case "", "hex":
	case "base64":
		v.base64 = true
	default:
		return nil, errors.New("encoding: must be hex or base64")
	}
	if strings.TrimSpace(cfg.Prefix) != cfg.Prefix {
		return nil, errors.New("prefix: must not start or end with whitespace")
	}
	ids, err := newIDSpec(SchemeHMAC, cfg)
	if err != nil {
		return nil, err
	}
	v.ids = ids
	for _, s := range cfg.Secrets {
		v.keys = append(v.keys, newMACKey(newHash, []byte(s)))
	}
	v.errMiss = unauthorized("hmac: missing " + cfg.Header + " header")
	v.errBad = unauthorized("hmac: malformed " + cfg.Header + " header")
	v.errMatch = unauthorized("hmac: signature in " + cfg.Header + " header does not match")
	return v, nil
}

// parseHeader decodes the signature header of r into sig[:v.size].
func (v *hmacVerifier) parseHeader(r Request, sig *[sha512.Size]byte) error {
	h, ok := headerValue(r.Header, v.header)
	if !ok || h == "" {
		return v.errMiss
	}
	if !v.parseSignature(h, sig) {
		return v.errBad
	}
	return nil
}

// CheckHeader implements Verifier.
func (v *hmacVerifier) CheckHeader(r Request) error {
	var sig [sha512.Size]byte
	return v.parseHeader(r, &sig)
}

// Verify implements Verifier.
func (v *hmacVerifier) Verify(r Request) (Result, error) {
	var sig [sha512.Size]byte
	if err := v.parseHeader(r, &sig); err != nil {
		return Result{}, err
	}
	if !matchBody(v.keys, r.Body, sig[:v.size]) {
		return Result{}, v.errMatch
	}
	return v.ids.extract(r)
}

// parseSignature decodes a signature header value (already trimmed) into
// dst[:v.size]: the prefix, then exactly one digest in hex (either case) or
// canonical standard base64 (padded or not).
func (v *hmacVerifier) parseSignature(h string, dst *[sha512.Size]byte) bool {
	enc, ok := strings.CutPrefix(h, v.prefix)
	if !ok {
		return false
	}
	enc = strings.TrimSpace(enc)
	var src [2 * sha512.Size]byte
	if !v.base64 {
		if len(enc) != 2*v.size {
			return false
		}
		copy(src[:], enc)
		_, err := hex.Decode(dst[:v.size], src[:len(enc)])
		return err == nil
	}
	var e *base64.Encoding
	switch len(enc) {
	case base64.StdEncoding.EncodedLen(v.size):
		e = b64Strict
	case base64.RawStdEncoding.EncodedLen(v.size):
		e = b64RawStrict
	default:
		return false
	}
	var out [sha512.Size + 3]byte
	copy(src[:], enc)
	n, err := e.Decode(out[:], src[:len(enc)])
	if err != nil || n != v.size {
		return false
	}
	copy(dst[:], out[:n])
	return true
}

var b64RawStrict = base64.RawStdEncoding.Strict()

func (v *hmacVerifier) encode(mac []byte) string {
	if v.base64 {
		return v.prefix + base64.StdEncoding.EncodeToString(mac)
	}
	return v.prefix + hex.EncodeToString(mac)
}

func (v *hmacVerifier) sign(body []byte, deliveryID string, _ time.Time) (http.Header, error) {
	h := make(http.Header, 2)
	if err := v.ids.sign(h, deliveryID); err != nil {
		return nil, err
	}
	st := v.keys[0].get()
	h.Set(v.header, v.encode(st.mac(nil, body)))
	v.keys[0].put(st)
	return h, nil
}
