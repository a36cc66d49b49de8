package verify

import (
	"crypto/sha256"
	"encoding/hex"
	"testing"
)

func TestNoneVerify(t *testing.T) {
	body := []byte(`{"event_id":"e-1","event_type":"user.created","seq":7}`)
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	cases := []verifyCase{
		{name: "body hash", cfg: Config{Scheme: SchemeNone}, body: body, want: Result{DeliveryID: hash, IDIsHash: true}},
		{name: "body hash of empty body", cfg: Config{Scheme: SchemeNone}, body: nil,
			want: Result{DeliveryID: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855", IDIsHash: true}},
		{name: "id header", cfg: Config{Scheme: SchemeNone, IDHeader: "Idempotency-Key", TypeHeader: "X-Gitlab-Event"},
			header: hdr("Idempotency-Key", "k-1", "X-Gitlab-Event", "Push Hook"), body: body, want: Result{DeliveryID: "k-1", EventType: "Push Hook"}},
		{name: "id header missing", cfg: Config{Scheme: SchemeNone, IDHeader: "Idempotency-Key"}, header: hdr(), body: body,
			wantErr: ErrMalformed, errText: "none: missing Idempotency-Key header"},
		{name: "id header empty", cfg: Config{Scheme: SchemeNone, IDHeader: "Idempotency-Key"}, header: hdr("Idempotency-Key", " "), body: body,
			wantErr: ErrMalformed},
		{name: "id field", cfg: Config{Scheme: SchemeNone, IDField: "event_id", TypeField: "event_type"}, body: body,
			want: Result{DeliveryID: "e-1", EventType: "user.created"}},
		{name: "numeric id field", cfg: Config{Scheme: SchemeNone, IDField: "seq"}, body: body, want: Result{DeliveryID: "7"}},
		{name: "id field is an object", cfg: Config{Scheme: SchemeNone, IDField: "x"}, body: []byte(`{"x":{"a":1}}`), wantErr: ErrMalformed},
		{name: "id field is null", cfg: Config{Scheme: SchemeNone, IDField: "x"}, body: []byte(`{"x":null}`), wantErr: ErrMalformed},
		{name: "id field missing", cfg: Config{Scheme: SchemeNone, IDField: "id"}, body: body, wantErr: ErrMalformed, errText: `field "id"`},
		{name: "id field body not JSON", cfg: Config{Scheme: SchemeNone, IDField: "id"}, body: []byte("<xml/>"), wantErr: ErrMalformed},
		{name: "type field missing is fine", cfg: Config{Scheme: SchemeNone, IDField: "event_id", TypeField: "type"}, body: body,
			want: Result{DeliveryID: "e-1"}},
	}
	runCases(t, Config{}, cases)
}
