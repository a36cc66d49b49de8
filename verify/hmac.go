package verify

import (
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"hash"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
)

// Algorithms of the hmac scheme besides the HMAC hashes: public-key
// signatures, whose secrets are the sender's public keys.
const (
	AlgorithmEd25519   = "ed25519"    // Discord: 64-byte signature
	AlgorithmECDSAP256 = "ecdsa-p256" // SendGrid: ASN.1 DER signature over SHA-256
)

// maxDERSignature is the longest ASN.1 DER ECDSA P-256 signature.
const maxDERSignature = 72

// hmacVerifier verifies the generic scheme: the configured header holds
// Prefix + encode(signature), hex or base64, where the signature is an
// HMAC (sha256, sha1, sha512) or a public-key signature (ed25519,
// ecdsa-p256) over the Signed template: literal text, the timestamp from
// TimestampHeader (unix seconds, or milliseconds with TimestampMillis),
// the PublicURL, then the body. It covers Shopify, Linear,
// Lemon Squeezy, Slack and Zoom (v0), Square ({url}{body}), Discord
// (ed25519) and SendGrid (ECDSA), Webflow ({timestamp}:{body}, in
// milliseconds), Bitbucket, Meta and the like.
type hmacVerifier struct {
	header  string // canonical signature header key
	prefix  string
	base64  bool
	size    int // exact signature size in bytes; 0 for DER (ecdsa)
	macKeys []*macKey
	edKeys  []ed25519.PublicKey
	ecKeys  []*ecdsa.PublicKey
	signed  []templatePart // what precedes the body
	ts      string         // canonical timestamp header key, "" when none is signed
	ms      bool           // the timestamp is in milliseconds (TimestampMillis)
	tol     time.Duration
	url     string
	ids     idSpec

	signingKey string

	errMiss, errBad, errMatch  error
	errNoTS, errBadTS, errTolr error
	errUnit                    error // outside tolerance, and clearly in the other unit
}

// signatureHeaders implements SignatureHeaders: the hmac scheme's header
// is named by the configuration.
func (v *hmacVerifier) signatureHeaders() []string { return []string{v.header} }

func newHMAC(cfg Config) (*hmacVerifier, error) {
	if cfg.Header == "" {
		return nil, errors.New("hmac: header is required")
	}
	if !httpguts.ValidHeaderFieldName(cfg.Header) {
		return nil, errors.New("header: not a valid header name")
	}
	v := &hmacVerifier{
		header:     http.CanonicalHeaderKey(cfg.Header),
		prefix:     cfg.Prefix,
		tol:        cfg.Tolerance,
		signingKey: cfg.SigningKey,
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
	var newHash func() hash.Hash
	switch cfg.Algorithm {
	case "", "sha256":
		newHash = sha256.New
	case "sha1":
		newHash = sha1.New
	case "sha512":
		newHash = sha512.New
	case AlgorithmEd25519:
		v.size = ed25519.SignatureSize
		for i, s := range cfg.Secrets {
			k, err := parseEd25519Public(s)
			if err != nil {
				return nil, fmt.Errorf("secrets[%d]: %w", i, err)
			}
			v.edKeys = append(v.edKeys, k)
		}
	case AlgorithmECDSAP256:
		for i, s := range cfg.Secrets {
			k, err := parseECDSAPublic(s)
			if err != nil {
				return nil, fmt.Errorf("secrets[%d]: %w", i, err)
			}
			v.ecKeys = append(v.ecKeys, k)
		}
	default:
		return nil, errors.New("algorithm: must be sha256, sha1, sha512, ed25519 or ecdsa-p256")
	}
	if newHash != nil {
		v.size = newHash().Size()
		for _, s := range cfg.Secrets {
			v.macKeys = append(v.macKeys, newMACKey(newHash, []byte(s)))
		}
	}
	parts, err := parseSignedTemplate(cfg.Signed)
	if err != nil {
		return nil, err
	}
	v.signed = parts
	usesTS, usesURL := templateUses(parts)
	switch {
	case usesTS && cfg.TimestampHeader == "":
		return nil, errors.New("timestamp_header: is required when signed uses {timestamp}")
	case !usesTS && cfg.TimestampHeader != "":
		return nil, errors.New("signed: must use {timestamp} when timestamp_header is set")
	case cfg.TimestampHeader != "" && !httpguts.ValidHeaderFieldName(cfg.TimestampHeader):
		return nil, errors.New("timestamp_header: not a valid header name")
	}
	if usesTS {
		v.ts = http.CanonicalHeaderKey(cfg.TimestampHeader)
	}
	switch cfg.TimestampUnit {
	case "", TimestampSeconds:
	case TimestampMillis:
		v.ms = true
	default:
		return nil, errors.New("timestamp_unit: must be s (unix seconds, 10 digits today; the default) or ms (unix milliseconds, 13 digits today, as Webflow sends)")
	}
	if cfg.TimestampUnit != "" && !usesTS {
		return nil, errors.New("timestamp_unit: only used with timestamp_header and {timestamp} in signed; remove it, or set those")
	}
	switch {
	case usesURL:
		if err := checkPublicURL(cfg.PublicURL); err != nil {
			return nil, err
		}
		v.url = cfg.PublicURL
	case cfg.PublicURL != "":
		return nil, errors.New("signed: must use {url} when public_url is set")
	}
	if v.ids, err = newIDSpec(SchemeHMAC, cfg); err != nil {
		return nil, err
	}
	v.errMiss = unauthorized("hmac: missing " + cfg.Header + " header")
	v.errBad = unauthorized("hmac: malformed " + cfg.Header + " header")
	v.errMatch = unauthorized("hmac: signature in " + cfg.Header + " header does not match")
	v.errNoTS = unauthorized("hmac: missing " + cfg.TimestampHeader + " header")
	v.errBadTS = unauthorized("hmac: malformed " + cfg.TimestampHeader + " header")
	v.errTolr = unauthorized("hmac: timestamp outside tolerance")
	if v.ms {
		v.errUnit = unauthorized("hmac: timestamp is in seconds, not milliseconds; set timestamp_unit: s (or leave it out)")
	} else {
		v.errUnit = unauthorized("hmac: timestamp is in milliseconds; set timestamp_unit: ms")
	}
	return v, nil
}

// checkPublicURL checks the public_url the twilio scheme and {url} sign.
func checkPublicURL(s string) error {
	if s == "" {
		return errors.New("public_url: is required: the URL the sender posts to, as it sees it (https://…/webhooks/NAME)")
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return errors.New("public_url: must be an absolute http:// or https:// URL")
	}
	return nil
}

// hmacSigned is what the headers of a delivery carry.
type hmacSigned struct {
	sig [sha512.Size + 8]byte // room for the largest digest and a DER signature
	n   int
	ts  int64
}

// parseHeader decodes the signature header of r and checks the signed
// timestamp, if any.
func (v *hmacVerifier) parseHeader(r Request, s *hmacSigned) error {
	h, ok := headerValue(r.Header, v.header)
	if !ok || h == "" {
		return absent(r.Header, v.errMiss, v.header)
	}
	if s.n, ok = v.parseSignature(h, &s.sig); !ok {
		return v.errBad
	}
	if v.ts == "" {
		return nil
	}
	tsText, _ := headerValue(r.Header, v.ts)
	if tsText == "" {
		return absent(r.Header, v.errNoTS, v.ts)
	}
	if s.ts, ok = parseUnix(tsText); !ok {
		return v.errBadTS
	}
	if !timeWithin(v.signedAt(s.ts), nowOr(r.Now), v.tol) {
		// A timestamp in the other unit is decades or millennia off:
		// say which unit it is in, not only that it is out of time.
		if v.ms && s.ts < unitBound || !v.ms && s.ts > unitBound {
			return v.errUnit
		}
		return v.errTolr
	}
	return nil
}

// signedAt is the time a signed timestamp stands for, in the source's
// unit. {timestamp} signs the header's number unconverted, whatever its
// unit.
func (v *hmacVerifier) signedAt(ts int64) time.Time {
	if v.ms {
		return time.UnixMilli(ts)
	}
	return time.Unix(ts, 0)
}

// CheckHeader implements Verifier.
func (v *hmacVerifier) CheckHeader(r Request) error {
	var s hmacSigned
	return v.parseHeader(r, &s)
}

// Verify implements Verifier.
func (v *hmacVerifier) Verify(r Request) (Result, error) {
	var s hmacSigned
	if err := v.parseHeader(r, &s); err != nil {
		return Result{}, err
	}
	if !v.matches(s.ts, r.Body, s.sig[:s.n]) {
		return Result{}, v.errMatch
	}
	return v.ids.extract(r)
}

func (v *hmacVerifier) matches(ts int64, body, sig []byte) bool {
	if len(v.macKeys) > 0 {
		if len(v.signed) == 0 {
			return matchBody(v.macKeys, body, sig)
		}
		for _, k := range v.macKeys {
			st := k.get()
			st.buf = appendTemplate(st.buf, v.signed, ts, v.url)
			ok := hmac.Equal(st.mac(st.buf, body), sig)
			k.put(st)
			if ok {
				return true
			}
		}
		return false
	}
	// The public-key checks keep their arguments; a copy keeps sig (and
	// the caller's array) off the heap on the HMAC path.
	own := append([]byte(nil), sig...)
	msg := appendTemplate(nil, v.signed, ts, v.url)
	if len(v.edKeys) > 0 {
		msg = append(msg, body...)
		for _, k := range v.edKeys {
			if ed25519.Verify(k, msg, own) {
				return true
			}
		}
		return false
	}
	d := sha256.New()
	d.Write(msg)
	d.Write(body)
	digest := d.Sum(nil)
	for _, k := range v.ecKeys {
		if ecdsa.VerifyASN1(k, digest, own) {
			return true
		}
	}
	return false
}

// parseSignature decodes a signature header value (already trimmed) into
// dst and returns its length: the prefix, then exactly one signature in hex
// (either case) or canonical standard base64 (padded or not), of the
// algorithm's size (a DER signature: 8 to 72 bytes).
func (v *hmacVerifier) parseSignature(h string, dst *[sha512.Size + 8]byte) (int, bool) {
	enc, ok := strings.CutPrefix(h, v.prefix)
	if !ok {
		return 0, false
	}
	enc = strings.TrimSpace(enc)
	n, ok := decodeSignature(enc, v.base64, dst[:])
	if !ok {
		return 0, false
	}
	if v.size != 0 {
		return n, n == v.size
	}
	return n, n >= 8 && n <= maxDERSignature
}

var b64RawStrict = base64.RawStdEncoding.Strict()

// decodeSignature decodes hex or canonical standard base64 (padded or not)
// into dst, refusing anything that would not fit. It does not allocate.
// Line breaks are refused too: Go's base64 decoders skip them, even the
// strict ones, so a signature with a line break inside would otherwise
// pass for the one without.
func decodeSignature(enc string, b64 bool, dst []byte) (int, bool) {
	var src [2 * (sha512.Size + 8)]byte
	if len(enc) > len(src) || strings.ContainsAny(enc, "\r\n") {
		return 0, false
	}
	in := src[:copy(src[:], enc)]
	if !b64 {
		if len(in)%2 != 0 || len(in)/2 > len(dst) {
			return 0, false
		}
		n, err := hex.Decode(dst, in)
		return n, err == nil
	}
	e := b64Strict
	if len(in)%4 != 0 {
		e = b64RawStrict
	}
	if e.DecodedLen(len(in)) > len(dst) {
		return 0, false
	}
	n, err := e.Decode(dst, in)
	return n, err == nil
}

func (v *hmacVerifier) encode(sig []byte) string {
	if v.base64 {
		return v.prefix + base64.StdEncoding.EncodeToString(sig)
	}
	return v.prefix + hex.EncodeToString(sig)
}

func (v *hmacVerifier) sign(body []byte, deliveryID string, now time.Time) (http.Header, error) {
	h := make(http.Header, 3)
	if err := v.ids.sign(h, deliveryID); err != nil {
		return nil, err
	}
	ts := now.Unix()
	if v.ms {
		ts = now.UnixMilli()
	}
	if v.ts != "" {
		h.Set(v.ts, strconv.FormatInt(ts, 10))
	}
	var sig []byte
	switch {
	case len(v.macKeys) > 0:
		st := v.macKeys[0].get()
		st.buf = appendTemplate(st.buf, v.signed, ts, v.url)
		sig = append(sig, st.mac(st.buf, body)...)
		v.macKeys[0].put(st)
	case len(v.edKeys) > 0:
		k, err := parseEd25519Private(v.signingKey)
		if err != nil {
			return nil, err
		}
		sig = ed25519.Sign(k, append(appendTemplate(nil, v.signed, ts, v.url), body...))
	default:
		k, err := parseECDSAPrivate(v.signingKey)
		if err != nil {
			return nil, err
		}
		d := sha256.New()
		d.Write(appendTemplate(nil, v.signed, ts, v.url))
		d.Write(body)
		if sig, err = ecdsa.SignASN1(rand.Reader, k, d.Sum(nil)); err != nil {
			return nil, fmt.Errorf("hmac: sign: %w", err)
		}
	}
	h.Set(v.header, v.encode(sig))
	return h, nil
}

// Public and private keys. Errors never quote the key.

// parseEd25519Public reads an ed25519 public key: 64 hex digits (Discord's
// form) or the standard base64 of its 32 bytes.
func parseEd25519Public(s string) (ed25519.PublicKey, error) {
	b, ok := decodeKey(s, ed25519.PublicKeySize)
	if !ok {
		return nil, errors.New("not an ed25519 public key (64 hex digits, or base64 of 32 bytes)")
	}
	return ed25519.PublicKey(b), nil
}

// parseEd25519Private reads the key Sign uses: a 32-byte seed or a 64-byte
// private key, in hex or base64.
func parseEd25519Private(s string) (ed25519.PrivateKey, error) {
	if s == "" {
		return nil, errors.New("a public key cannot sign: give the private key (hookbox send --signing-key)")
	}
	if b, ok := decodeKey(s, ed25519.SeedSize); ok {
		return ed25519.NewKeyFromSeed(b), nil
	}
	if b, ok := decodeKey(s, ed25519.PrivateKeySize); ok {
		return ed25519.PrivateKey(b), nil
	}
	return nil, errors.New("signing key: not an ed25519 private key (hex or base64 of a 32-byte seed or a 64-byte key)")
}

// decodeKey decodes hex or standard base64 (padded or not) of exactly size
// bytes.
func decodeKey(s string, size int) ([]byte, bool) {
	s = strings.TrimSpace(s)
	if len(s) == 2*size {
		if b, err := hex.DecodeString(s); err == nil {
			return b, true
		}
	}
	for _, e := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding} {
		if b, err := e.DecodeString(s); err == nil && len(b) == size {
			return b, true
		}
	}
	return nil, false
}

// derOrPEM returns the DER bytes of a PEM block or of base64 text.
func derOrPEM(s string) []byte {
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "-----BEGIN") {
		if b, _ := pem.Decode([]byte(s)); b != nil {
			return b.Bytes
		}
		return nil
	}
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil {
		return nil
	}
	return b
}

// parseECDSAPublic reads an ECDSA P-256 public key: base64 of its DER
// (SubjectPublicKeyInfo; SendGrid's form) or a PEM "PUBLIC KEY" block.
func parseECDSAPublic(s string) (*ecdsa.PublicKey, error) {
	errKey := errors.New("not an ECDSA P-256 public key (base64 DER or PEM)")
	der := derOrPEM(s)
	if der == nil {
		return nil, errKey
	}
	k, err := x509.ParsePKIXPublicKey(der)
	if err != nil {
		return nil, errKey
	}
	ek, ok := k.(*ecdsa.PublicKey)
	if !ok || ek.Curve != elliptic.P256() {
		return nil, errKey
	}
	return ek, nil
}

// parseECDSAPrivate reads the key Sign uses: PKCS #8 or SEC 1 DER, in
// base64 or PEM.
func parseECDSAPrivate(s string) (*ecdsa.PrivateKey, error) {
	if s == "" {
		return nil, errors.New("a public key cannot sign: give the private key (hookbox send --signing-key)")
	}
	errKey := errors.New("signing key: not an ECDSA P-256 private key (PKCS #8 or SEC 1 DER, base64 or PEM)")
	der := derOrPEM(s)
	if der == nil {
		return nil, errKey
	}
	if k, err := x509.ParsePKCS8PrivateKey(der); err == nil {
		if ek, ok := k.(*ecdsa.PrivateKey); ok && ek.Curve == elliptic.P256() {
			return ek, nil
		}
		return nil, errKey
	}
	if ek, err := x509.ParseECPrivateKey(der); err == nil && ek.Curve == elliptic.P256() {
		return ek, nil
	}
	return nil, errKey
}
