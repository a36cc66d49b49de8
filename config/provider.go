package config

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/hookbox/hookbox/rejected"
	"github.com/hookbox/hookbox/verify"
)

// Preset is what `provider: NAME` on a source fills in: the scheme, the
// header names, where the delivery id and the event type are, the
// timestamp tolerance, any handshake, and how long the provider may
// deliver an event again. A key the source sets itself wins over the
// preset's; the id's place (id_header, id_field) and the type's
// (type_header, type_field) are each taken whole, from the source if it
// names one, else from the preset. Secrets never come from a preset.
type Preset struct {
	// Name is the value of provider: that picks the preset.
	Name string
	// Keys holds the preset's values of the source keys it fills.
	Keys Source
	// Alternatives are the preset's keys for other schemes the provider
	// can sign with, for a source that names one of them as its scheme
	// (GitLab signs with a token, or with Standard Webhooks).
	Alternatives []Source
	// Redelivery is how long after an event the provider may still send
	// it again, by automatic retries or by a person's redelivery; 0 when
	// the provider documents none. Rows purged sooner than this lose their
	// dedupe memory while copies may still come.
	Redelivery time.Duration
	// RedeliveryNote says what that window is made of.
	RedeliveryNote string
	// Note is what else to know when configuring the provider.
	Note string
}

const day = 24 * time.Hour

// svixRetries is the retry schedule of the senders that deliver through
// Svix: attempts after 5 s, 5 min, 30 min, 2 h, 5 h, 10 h and 10 h.
const svixRetries = 5*time.Second + 5*time.Minute + 30*time.Minute + 27*time.Hour

// Presets are the providers `provider:` knows, one entry each. Only
// providers whose signing is documented precisely are here; the README's
// table of presets is written from the same facts.
var Presets = []Preset{
	{Name: "stripe", Keys: Source{Scheme: verify.SchemeStripe},
		Redelivery: 3 * day, RedeliveryNote: "automatic retries for up to 3 days (live mode)"},
	{Name: "github", Keys: Source{Scheme: verify.SchemeGitHub},
		Redelivery: 3 * day, RedeliveryNote: "no automatic retries; deliveries of the past 3 days can be redelivered by hand"},
	{Name: "gitlab",
		Keys:         Source{Scheme: verify.SchemeToken, Header: "X-Gitlab-Token", IDHeader: "Idempotency-Key", TypeHeader: "X-Gitlab-Event"},
		Alternatives: []Source{{Scheme: verify.SchemeStandardWebhooks, TypeHeader: "X-Gitlab-Event"}},
		Redelivery:   2 * day, RedeliveryNote: "recent events (2 days) can be resent by hand",
		Note: "secret token by default (X-Gitlab-Token, compared in constant time); with a signing token set scheme: standard-webhooks and its whsec_ secret. Idempotency-Key is sent by recent GitLab releases"},
	{Name: "shopify",
		Keys:       Source{Scheme: verify.SchemeHMAC, Header: "X-Shopify-Hmac-Sha256", Encoding: "base64", IDHeader: "X-Shopify-Webhook-Id", TypeHeader: "X-Shopify-Topic"},
		Redelivery: 4 * time.Hour, RedeliveryNote: "8 retries over 4 hours",
		Note: "the old client secret may still sign for about an hour after rotation: keep both in secrets"},
	{Name: "slack",
		Keys: Source{Scheme: verify.SchemeHMAC, Header: "X-Slack-Signature", Prefix: "v0=", TimestampHeader: "X-Slack-Request-Timestamp",
			Signed: "v0:{timestamp}:{body}", IDField: "event_id", IDOptional: new(bool(true)), TypeField: "event.type", Handshake: verify.HandshakeSlack},
		Redelivery: time.Hour, RedeliveryNote: "3 retries within about an hour",
		Note: "Events API (JSON bodies); url_verification is answered and not stored; app_rate_limited, which has no event_id, is kept under its body hash"},
	{Name: "twilio", Keys: Source{Scheme: verify.SchemeTwilio},
		RedeliveryNote: "no automatic redelivery unless the URL asks for it (#rc=), and then within minutes",
		Note:           "set public_url to the URL configured in Twilio; form bodies only (not JSON bodies signed through bodySHA256)"},
	{Name: "paddle", Keys: Source{Scheme: verify.SchemePaddle},
		Redelivery: 3 * day, RedeliveryNote: "automatic retries for up to 3 days (live)"},
	{Name: "linear",
		Keys:       Source{Scheme: verify.SchemeHMAC, Header: "Linear-Signature", IDHeader: "Linear-Delivery", TypeHeader: "Linear-Event"},
		Redelivery: 7 * time.Hour, RedeliveryNote: "3 retries: after 1 minute, 1 hour and 6 hours",
		Note: "the body's webhookTimestamp is not checked; copies are caught by Linear-Delivery and the body"},
	{Name: "discord",
		Keys: Source{Scheme: verify.SchemeHMAC, Algorithm: verify.AlgorithmEd25519, Header: "X-Signature-Ed25519",
			TimestampHeader: "X-Signature-Timestamp", Signed: "{timestamp}{body}", TypeField: "event.type", Handshake: verify.HandshakeDiscord},
		RedeliveryNote: "none documented",
		Note:           "secrets are the application's public key (hex); webhook events: PINGs are answered and not stored. Interactions other than PING need an answer hookbox does not give"},
	{Name: "mailgun", Keys: Source{Scheme: verify.SchemeMailgun},
		Redelivery: 8 * time.Hour, RedeliveryNote: "retries for 8 hours",
		Note: "the signature covers timestamp and token, not event-data: a token seen again with another body is refused as a replay; keep tolerance short and use allow_ips"},
	{Name: "sendgrid",
		Keys: Source{Scheme: verify.SchemeHMAC, Algorithm: verify.AlgorithmECDSAP256, Encoding: "base64",
			Header: "X-Twilio-Email-Event-Webhook-Signature", TimestampHeader: "X-Twilio-Email-Event-Webhook-Timestamp", Signed: "{timestamp}{body}"},
		Redelivery: day, RedeliveryNote: "retries for 24 hours",
		Note: "secrets are the verification public key (base64 DER); a body is a batch of events, kept whole under its body hash"},
	{Name: "polar", Keys: Source{Scheme: verify.SchemeStandardWebhooks},
		RedeliveryNote: "not documented precisely; deliveries can be redelivered by hand",
		Note:           "older secrets without whsec_ are used as raw bytes"},
	{Name: "svix", Keys: Source{Scheme: verify.SchemeStandardWebhooks},
		Redelivery: svixRetries, RedeliveryNote: "7 retries over about 28 hours, and by hand from the dashboard"},
	{Name: "clerk", Keys: Source{Scheme: verify.SchemeStandardWebhooks},
		Redelivery: svixRetries, RedeliveryNote: "delivered by Svix: 7 retries over about 28 hours"},
	{Name: "resend", Keys: Source{Scheme: verify.SchemeStandardWebhooks},
		Redelivery: svixRetries, RedeliveryNote: "delivered by Svix: 7 retries over about 28 hours"},
	{Name: "zoom",
		Keys: Source{Scheme: verify.SchemeHMAC, Header: "X-Zm-Signature", Prefix: "v0=", TimestampHeader: "X-Zm-Request-Timestamp",
			Signed: "v0:{timestamp}:{body}", TypeField: "event", Handshake: verify.HandshakeZoom},
		Redelivery: 2 * time.Hour, RedeliveryNote: "3 retries: after 5, 30 and 90 minutes",
		Note: "endpoint.url_validation is answered and not stored; no delivery id: the body hash is the key"},
	{Name: "square",
		Keys:       Source{Scheme: verify.SchemeHMAC, Header: "X-Square-Hmacsha256-Signature", Encoding: "base64", Signed: "{url}{body}", IDField: "event_id", TypeField: "type"},
		Redelivery: day, RedeliveryNote: "retries for up to 24 hours",
		Note: "set public_url to the notification URL configured in Square: it is signed"},
}

// PresetNames lists the known providers, for messages.
func PresetNames() []string {
	names := make([]string, len(Presets))
	for i, p := range Presets {
		names[i] = p.Name
	}
	return names
}

// FindPreset returns the preset named name.
func FindPreset(name string) (Preset, bool) {
	for _, p := range Presets {
		if p.Name == name {
			return p, true
		}
	}
	return Preset{}, false
}

// WithPreset returns s with its provider's preset applied: every key the
// preset fills and s leaves empty takes the preset's value. s is returned
// as is when it names no provider, an unknown one, or a scheme the
// provider does not sign with (validation reports those).
func (s Source) WithPreset() Source {
	p, ok := FindPreset(s.Provider)
	if !ok {
		return s
	}
	keys, ok := p.keysFor(s.Scheme)
	if !ok {
		return s
	}
	fill := func(dst *string, v string) {
		if *dst == "" {
			*dst = v
		}
	}
	fill(&s.Scheme, keys.Scheme)
	fill(&s.Header, keys.Header)
	fill(&s.Prefix, keys.Prefix)
	fill(&s.Encoding, keys.Encoding)
	fill(&s.Algorithm, keys.Algorithm)
	fill(&s.Signed, keys.Signed)
	fill(&s.TimestampHeader, keys.TimestampHeader)
	fill(&s.TimestampUnit, keys.TimestampUnit)
	fill(&s.Handshake, keys.Handshake)
	if s.IDHeader == "" && s.IDField == "" {
		// The preset's place for the id, and whether it may be missing:
		// a source that names its own place says that itself.
		s.IDHeader, s.IDField = keys.IDHeader, keys.IDField
		if s.IDOptional == nil && keys.IDOptional != nil {
			s.IDOptional = new(*keys.IDOptional) // a copy: never the preset's own
		}
	}
	if s.TypeHeader == "" && s.TypeField == "" {
		s.TypeHeader, s.TypeField = keys.TypeHeader, keys.TypeField
	}
	if s.Tolerance == 0 {
		s.Tolerance = keys.Tolerance
	}
	return s
}

// keysFor returns the preset's keys for a source's scheme ("" for the
// preset's own).
func (p Preset) keysFor(scheme string) (Source, bool) {
	if scheme == "" || scheme == p.Keys.Scheme {
		return p.Keys, true
	}
	for _, a := range p.Alternatives {
		if a.Scheme == scheme {
			return a, true
		}
	}
	return Source{}, false
}

// schemes returns the schemes the preset can sign with.
func (p Preset) schemes() []string {
	out := []string{p.Keys.Scheme}
	for _, a := range p.Alternatives {
		out = append(out, a.Scheme)
	}
	return out
}

// checkProvider reports a provider: key that names no preset, or a scheme
// the provider does not sign with. key names the source in messages.
func checkProvider(key string, s Source) error {
	if s.Provider == "" {
		return nil
	}
	p, ok := FindPreset(s.Provider)
	if !ok {
		// The name may have come from the environment: not repeated.
		return fmt.Errorf("%s.provider: unknown provider; known: %s (or leave provider out and set scheme)", key, strings.Join(PresetNames(), ", "))
	}
	if _, ok := p.keysFor(s.Scheme); !ok && slices.Contains(verify.Schemes, s.Scheme) {
		return fmt.Errorf("%s.scheme: provider %s signs with %s; remove scheme, or provider", key, p.Name, strings.Join(p.schemes(), " or "))
	}
	return nil
}

// retentionWarningMark starts every retention warning, so that
// SetRetentionDays can replace them.
const retentionWarningMark = "retention_days "

// RetentionWarnings names each source whose provider may deliver an event
// again after retention_days has purged its row: such a copy is stored and
// worked a second time. It also warns when payload_retention_days is not
// shorter than retention_days, where it can clear nothing.
func (c *Config) RetentionWarnings() []string {
	if c.RetentionDays <= 0 {
		return nil
	}
	keep := time.Duration(c.RetentionDays) * day
	var ws []string
	if c.PayloadRetentionDays >= c.RetentionDays {
		// Payloads are cleared to keep ids (the dedupe memory) longer
		// than bodies; an event deleted first never has its payload
		// cleared.
		ws = append(ws, fmt.Sprintf("%s%d is not longer than payload_retention_days %d: events are deleted before their payloads would be cleared, so payload_retention_days does nothing; set it below retention_days, or remove it",
			retentionWarningMark, c.RetentionDays, c.PayloadRetentionDays))
	}
	for i, s := range c.Sources {
		p, ok := FindPreset(s.Provider)
		if !ok || p.Redelivery <= keep {
			continue
		}
		need := int((p.Redelivery + day - 1) / day)
		ws = append(ws, fmt.Sprintf("%s%d is shorter than how long %s may deliver an event again (%s), source %s: a copy arriving after its row is purged is stored and worked again; set retention_days to %d or more",
			retentionWarningMark, c.RetentionDays, p.Name, p.RedeliveryNote, c.sourceLabel(i), need))
	}
	return ws
}

// rejectedWarningMark starts the warning of RejectedAgeWarnings, so that
// SetRetentionDays can replace it.
const rejectedWarningMark = "rejected.max_age "

// RejectedAgeWarnings warns when the log of refused deliveries keeps them
// (their headers, and each body up to rejected.max_body_bytes) longer
// than the shortest retention window keeps an accepted event's payload:
// payload_retention_days, or retention_days when shorter or alone. A
// refused delivery is often a real customer's event (refused for a wrong
// secret during a rotation), and an operator who set the window expects
// its data gone with the others'. The log is trimmed by its own bound,
// never by the windows, so the warning asks to set it.
func (c *Config) RejectedAgeWarnings() []string {
	key, days := "payload_retention_days", c.PayloadRetentionDays
	if c.RetentionDays > 0 && (days <= 0 || c.RetentionDays < days) {
		key, days = "retention_days", c.RetentionDays
	}
	if days <= 0 {
		return nil
	}
	age, window := c.Rejected.MaxAge, Duration(time.Duration(days)*day)
	if age <= 0 {
		age = Duration(rejected.DefaultMaxAge)
	}
	if age <= window {
		return nil
	}
	a, _ := age.MarshalText()
	w, _ := window.MarshalText()
	return []string{fmt.Sprintf("%s%s keeps refused deliveries (headers and bodies) longer than %s %d keeps payloads: set rejected.max_age to %s or less",
		rejectedWarningMark, a, key, days, w)}
}

// SetRetentionDays changes retention_days after loading (the
// RETENTION_DAYS variable of hookbox serve) and brings Warnings up to date
// with it.
func (c *Config) SetRetentionDays(days int) {
	c.RetentionDays = days
	c.Warnings = slices.DeleteFunc(c.Warnings, func(w string) bool {
		return strings.HasPrefix(w, retentionWarningMark) || strings.HasPrefix(w, rejectedWarningMark)
	})
	c.Warnings = append(c.Warnings, c.RetentionWarnings()...)
	c.Warnings = append(c.Warnings, c.RejectedAgeWarnings()...)
}
