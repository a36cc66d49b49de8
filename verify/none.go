package verify

import (
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
)

// noneVerifier checks no signature; it only extracts the delivery id. Use it
// for trusted networks and tests.
type noneVerifier struct {
	ids idSpec
}

func newNone(cfg Config) (*noneVerifier, error) {
	ids, err := newIDSpec(SchemeNone, cfg)
	if err != nil {
		return nil, err
	}
	return &noneVerifier{ids: ids}, nil
}

// CheckHeader implements Verifier: with no signature there is nothing to
// judge before the body.
func (v *noneVerifier) CheckHeader(Request) error { return nil }

// Verify implements Verifier.
func (v *noneVerifier) Verify(r Request) (Result, error) {
	return v.ids.extract(r)
}

func (v *noneVerifier) sign(_ []byte, deliveryID string, _ time.Time) (http.Header, error) {
	h := make(http.Header, 1)
	if err := v.ids.sign(h, deliveryID); err != nil {
		return nil, err
	}
	return h, nil
}

// idSpec says where a scheme whose id is not fixed finds the delivery id
// and the event type: a header, a JSON field (a dotted path for a nested
// one), or, for the id, the body hash when neither is configured.
type idSpec struct {
	scheme                 string
	idHeader, typeHeader   string // canonical keys, "" when unset
	idField, typeField     string // "" when unset
	idOptional             bool   // a missing id falls back to the body hash
	errIDHeader, errIDBody error
	errIDField             error
}

func newIDSpec(scheme string, cfg Config) (idSpec, error) {
	s := idSpec{scheme: scheme, idField: cfg.IDField, typeField: cfg.TypeField, idOptional: cfg.IDOptional}
	if cfg.IDHeader != "" && cfg.IDField != "" {
		return idSpec{}, errors.New("id_header, id_field: set at most one")
	}
	if cfg.IDOptional && cfg.IDHeader == "" && cfg.IDField == "" {
		return idSpec{}, errors.New("id_optional: set id_header or id_field with it (without either, the body hash is always the id)")
	}
	if cfg.TypeHeader != "" && cfg.TypeField != "" {
		return idSpec{}, errors.New("type_header, type_field: set at most one")
	}
	for _, f := range []struct{ key, path string }{{"id_field", cfg.IDField}, {"type_field", cfg.TypeField}} {
		if f.path != "" && slices.Contains(strings.Split(f.path, "."), "") {
			return idSpec{}, errors.New(f.key + ": a dotted path must not have an empty part")
		}
	}
	if cfg.IDHeader != "" {
		if !httpguts.ValidHeaderFieldName(cfg.IDHeader) {
			return idSpec{}, errors.New("id_header: not a valid header name")
		}
		s.idHeader = http.CanonicalHeaderKey(cfg.IDHeader)
		s.errIDHeader = malformed(scheme + ": missing " + cfg.IDHeader + " header (id_header)")
	}
	if cfg.TypeHeader != "" {
		if !httpguts.ValidHeaderFieldName(cfg.TypeHeader) {
			return idSpec{}, errors.New("type_header: not a valid header name")
		}
		s.typeHeader = http.CanonicalHeaderKey(cfg.TypeHeader)
	}
	if cfg.IDField != "" {
		s.errIDBody = malformed(scheme + ": body is not a JSON object (id_field)")
		s.errIDField = malformed(fmt.Sprintf("%s: body has no string or number field %q (id_field)", scheme, cfg.IDField))
	}
	return s, nil
}

// extract finds the delivery id and event type of r. Without an id where
// the source says (idHeader, idField), the id is the body hash when the
// source has none of its own or makes it optional; otherwise the delivery
// is refused.
func (s *idSpec) extract(r Request) (Result, error) {
	var res Result
	if s.idHeader != "" {
		id, _ := headerValue(r.Header, s.idHeader)
		if id == "" && (!s.idOptional || len(r.Header[s.idHeader]) > 1) {
			// Sent on two lines is not missing: refused even when optional.
			return Result{}, absent(r.Header, s.errIDHeader, s.idHeader)
		}
		res.DeliveryID = id
	}
	if s.typeHeader != "" {
		res.EventType, _ = headerValue(r.Header, s.typeHeader)
	}
	if s.idField != "" || s.typeField != "" {
		idRaw, typeRaw, ok := jsonPaths(r.Body, s.idField, s.typeField)
		if s.idField != "" {
			if !ok {
				return Result{}, s.errIDBody
			}
			id, scalar := jsonScalarText(idRaw)
			// Only a missing id (absent, null or "") may be optional: one
			// that is there but not a string or number is refused.
			missing := idRaw == nil || string(idRaw) == "null" || (scalar && id == "")
			if id == "" && (!s.idOptional || !missing) {
				return Result{}, s.errIDField
			}
			res.DeliveryID = id
		}
		if s.typeField != "" && ok {
			res.EventType, _ = jsonScalarText(typeRaw)
		}
	}
	if res.DeliveryID == "" {
		res.DeliveryID = bodyHash(r.Body)
		res.IDIsHash = true
	}
	return res, nil
}

// eventType finds the event type of r alone ("" when there is none).
func (s *idSpec) eventType(r Request) string {
	var t string
	switch {
	case s.typeHeader != "":
		t, _ = headerValue(r.Header, s.typeHeader)
	case s.typeField != "":
		if _, raw, ok := jsonPaths(r.Body, "", s.typeField); ok {
			t, _ = jsonScalarText(raw)
		}
	}
	return t
}

// bodyDefaults are the JSON fields in which the schemes whose id is not
// fixed find the id and the type when the source names no place of its own.
var bodyDefaults = map[string]struct{ id, typ string }{
	SchemePaddle:  {"event_id", "event_type"},
	SchemeMailgun: {"event-data.id", "event-data.event"},
}

// BodyFields returns the JSON fields (dotted paths) of the body from which
// a verifier built from cfg reads the delivery id and the event type, ""
// for each it does not read from the body. hookbox send builds its sample
// body with them.
func BodyFields(cfg Config) (idField, typeField string) {
	switch cfg.Scheme {
	case SchemeStripe:
		idField, typeField = "id", "type"
	case SchemeStandardWebhooks:
		typeField = "type"
	case SchemeGitHub:
	default:
		d := bodyDefaults[cfg.Scheme]
		cfg = withIDDefaults(cfg, "", d.id, "", d.typ)
		idField = cfg.IDField
	}
	switch {
	case cfg.TypeHeader != "":
		typeField = ""
	case cfg.TypeField != "":
		typeField = cfg.TypeField
	}
	return idField, typeField
}

// withIDDefaults returns cfg with the scheme's default places for the id
// and the type filled in, each only where the source names no place of its
// own for it.
func withIDDefaults(cfg Config, idHeader, idField, typeHeader, typeField string) Config {
	if cfg.IDHeader == "" && cfg.IDField == "" {
		cfg.IDHeader, cfg.IDField = idHeader, idField
	}
	if cfg.TypeHeader == "" && cfg.TypeField == "" {
		cfg.TypeHeader, cfg.TypeField = typeHeader, typeField
	}
	return cfg
}

// sign sets the id header, when one is configured, for Sign.
func (s *idSpec) sign(h http.Header, deliveryID string) error {
	if s.idHeader == "" {
		return nil
	}
	if err := checkSignID(s.scheme, deliveryID); err != nil {
		return err
	}
	h.Set(s.idHeader, deliveryID)
	return nil
}
