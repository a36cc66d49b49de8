package verify

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net/http"
)

// Handshakes a sender makes before it delivers events, in Config.Handshake.
const (
	// HandshakeSlack answers the Events API's url_verification with its
	// challenge.
	HandshakeSlack = "slack"
	// HandshakeZoom answers endpoint.url_validation with the plainToken and
	// its HMAC-SHA256 under the secret token.
	HandshakeZoom = "zoom"
	// HandshakeDiscord answers an interactions PING (type 1) with a PONG
	// and a webhook-events PING (type 0) with 204.
	HandshakeDiscord = "discord"
)

// maxChallenge bounds the challenge a handshake reply echoes.
const maxChallenge = 256

var (
	errSlackChallenge = malformed("slack: url_verification without a printable challenge of at most 256 bytes")
	errZoomNoSecret   = unauthorized("zoom: no secret verifies the handshake")
	errZoomToken      = malformed("zoom: endpoint.url_validation without a printable payload.plainToken of at most 256 bytes")
)

// handshaker answers a sender's URL check once the request's signature is
// verified. The check is never answered unverified: Zoom's reply is an HMAC
// under the secret of a text the request chooses, which must not be handed
// to anyone who asks.
type handshaker struct {
	signer
	kind string
	// zoom: one verifier and one key per secret, to answer with the
	// secret that verified the request.
	single []Verifier
	keys   [][]byte
}

func newHandshaker(v signer, cfg Config) (*handshaker, error) {
	h := &handshaker{signer: v, kind: cfg.Handshake}
	switch cfg.Handshake {
	case HandshakeSlack, HandshakeDiscord:
	case HandshakeZoom:
		if cfg.Scheme != SchemeHMAC || cfg.Algorithm == AlgorithmEd25519 || cfg.Algorithm == AlgorithmECDSAP256 {
			return nil, errors.New("handshake: zoom needs the hmac scheme with an HMAC algorithm (its secret token answers the check)")
		}
		for _, s := range cfg.Secrets {
			one := cfg
			one.Secrets, one.Handshake = []string{s}, ""
			sv, err := build(one)
			if err != nil {
				return nil, err
			}
			h.single = append(h.single, sv)
			h.keys = append(h.keys, []byte(s))
		}
	default:
		return nil, errors.New("handshake: must be slack, zoom or discord")
	}
	return h, nil
}

func (h *handshaker) inner() signer { return h.signer }

// Verify implements Verifier. ErrMalformed from the inner verifier means
// the signature matched (a handshake has no delivery id), so the handshake
// is looked for then too.
func (h *handshaker) Verify(r Request) (Result, error) {
	res, err := h.signer.Verify(r)
	if err != nil && !errors.Is(err, ErrMalformed) {
		return Result{}, err
	}
	reply, herr := h.reply(r)
	switch {
	case herr != nil:
		return Result{}, herr
	case reply != nil:
		return Result{Reply: reply}, nil
	}
	return res, err
}

// reply returns the answer to a handshake request, nil for any other one.
func (h *handshaker) reply(r Request) (*Reply, error) {
	switch h.kind {
	case HandshakeSlack:
		typ, challenge, _ := jsonFields(r.Body, "type", "challenge")
		if t, _ := jsonString(typ); t != "url_verification" {
			return nil, nil
		}
		c, _ := jsonString(challenge)
		if !printableToken(c) {
			return nil, errSlackChallenge
		}
		return jsonReply(map[string]string{"challenge": c}), nil
	case HandshakeZoom:
		event, payload, _ := jsonFields(r.Body, "event", "payload")
		if e, _ := jsonString(event); e != "endpoint.url_validation" {
			return nil, nil
		}
		plain, _ := jsonString(jsonDescend(payload, "plainToken"))
		if !printableToken(plain) {
			return nil, errZoomToken
		}
		for i, v := range h.single {
			if _, err := v.Verify(r); err != nil && !errors.Is(err, ErrMalformed) {
				continue
			}
			m := hmac.New(sha256.New, h.keys[i])
			m.Write([]byte(plain))
			return jsonReply(map[string]string{"plainToken": plain, "encryptedToken": hex.EncodeToString(m.Sum(nil))}), nil
		}
		return nil, errZoomNoSecret // not reached: the whole set verified
	case HandshakeDiscord:
		typ, event, _ := jsonFields(r.Body, "type", "event")
		if event != nil {
			return nil, nil // a webhook event, not a PING
		}
		switch t, _ := jsonScalarText(typ); t {
		case "1":
			return jsonReply(map[string]int{"type": 1}), nil
		case "0":
			return &Reply{Status: http.StatusNoContent}, nil
		}
	}
	return nil, nil
}

func jsonReply(v any) *Reply {
	b, _ := json.Marshal(v)
	return &Reply{Status: http.StatusOK, ContentType: "application/json", Body: b}
}

// printableToken reports whether s is a challenge fit to echo: 1 to 256
// bytes of printable ASCII, none of them quotes, backslashes or markup.
func printableToken(s string) bool {
	if s == "" || len(s) > maxChallenge {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' || c == '\'' {
			return false
		}
	}
	return true
}

// typeOverride replaces the event type of a scheme with a fixed id
// (standard-webhooks, stripe, github) by the configured type_header or
// type_field: GitLab signs with Standard Webhooks but names the event in
// X-Gitlab-Event.
type typeOverride struct {
	signer
	ids idSpec
}

func newTypeOverride(v signer, cfg Config) (*typeOverride, error) {
	ids, err := newIDSpec(cfg.Scheme, Config{TypeHeader: cfg.TypeHeader, TypeField: cfg.TypeField})
	if err != nil {
		return nil, err
	}
	return &typeOverride{signer: v, ids: ids}, nil
}

func (t *typeOverride) inner() signer { return t.signer }

// Verify implements Verifier.
func (t *typeOverride) Verify(r Request) (Result, error) {
	res, err := t.signer.Verify(r)
	if err != nil {
		return res, err
	}
	res.EventType = t.ids.eventType(r)
	return res, nil
}
