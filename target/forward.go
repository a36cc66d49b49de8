package target

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"golang.org/x/net/http/httpproxy"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/config"
	"github.com/hookbox/hookbox/effect"
	"github.com/hookbox/hookbox/redact"
	"github.com/hookbox/hookbox/tracing"
	"github.com/hookbox/hookbox/verify"
	"github.com/hookbox/hookbox/worker"
	"golang.org/x/net/http/httpguts"
)

// Headers Forward sets on every request; the stored and the extra headers
// cannot override them.
const (
	HeaderIdempotencyKey = "Idempotency-Key"  // "<source>:<delivery id>", see effect.IdempotencyKey and ForwardKey
	HeaderEventID        = "Hookbox-Event-Id" // the event's id, the 202 reply's, for a named target's delivery too (hookbox.Event.EventID)
	HeaderAttempt        = "Hookbox-Attempt"  // 1 for the first attempt
	HeaderSource         = "Hookbox-Source"   // the configured source name
	HeaderTarget         = "Hookbox-Target"   // the target's name, for a delivery of a named target
)

// DefaultPermanentStatuses are the reply statuses that make an event dead at
// once when ForwardOptions.PermanentStatuses is nil: 410 Gone, the app's way
// of saying it will never take this event.
var DefaultPermanentStatuses = []int{http.StatusGone}

// errorBodyBytes is how much of a failed reply's body goes into the error.
const errorBodyBytes = 200

// transportErrorBytes is how much of the text of a request that got no
// reply goes into the error: what the worker stores of an error
// (worker.MaxErrorText), so a text it stored whole before is unchanged.
const transportErrorBytes = worker.MaxErrorText

// drainBytes bounds how much of a reply body is read so the connection can
// be reused; a larger body closes the connection instead.
const drainBytes = 64 << 10

// drainWait bounds how long the rest of a reply's body is read after the
// attempt has its answer: a small body, all that keeping the connection is
// worth, arrives in far less. A receiver that trickles its body, or holds
// it open, would otherwise keep the attempt, and its slot, until the
// attempt's time limit, though the event was delivered.
const drainWait = 250 * time.Millisecond

// errorBodyWait bounds how long the first bytes of a failed reply's body
// (the text the error shows) are read: an app's refusal sends them with
// its headers, and the status alone decides the attempt.
const errorBodyWait = time.Second

// drain reads what is left of body, at most drainBytes for at most
// drainWait, so the connection can be reused, and closes it; a body that
// is longer, or slower, closes the connection instead.
func drain(body io.ReadCloser) {
	t := time.AfterFunc(drainWait, func() { body.Close() })
	io.Copy(io.Discard, io.LimitReader(body, drainBytes))
	t.Stop()
	body.Close()
}

// ForwardOptions configure a Forward target.
type ForwardOptions struct {
	// URL receives a POST per attempt (http:// or https://). Its password
	// (and the Basic credential made of its userinfo), its query, and the
	// segments of its path that look like credentials (see
	// redact.SecretPathSegment: the token of a Slack or Discord
	// incoming-webhook URL)
	// never appear in errors, even where a reply echoes the request.
	URL string
	// Headers are added to every request, for example a shared secret the
	// app checks. They replace stored headers of the same name. Their values
	// never appear in errors, nor does the credential of a value shaped
	// "scheme credential" (Bearer X: X, which an app that refuses it tends
	// to echo; see redact.HeaderSecrets). "Host" sets the request's Host:
	// a host name or address and an optional port (validHost); with an
	// https URL, the certificate is still checked against the URL's host.
	Headers map[string]string
	// PermanentStatuses are the reply statuses that make the event dead at
	// once instead of retried: 300 to 599, the final replies Deliver
	// counts as failures (a 2xx is done, and a 1xx is never final: a 101
	// is always retried). nil means DefaultPermanentStatuses ([410]); an
	// empty, non-nil slice means none.
	PermanentStatuses []int
	// Client sends the requests. nil means a client with a connection pool
	// sized for concurrent deliveries, proxy settings from the environment
	// (HTTP_PROXY, HTTPS_PROXY, NO_PROXY, as http.ProxyFromEnvironment
	// reads them; NewForward refuses one it would ignore, see
	// checkProxyEnvironment), and reply headers bounded
	// (maxReplyHeaderBytes). Whatever the client, Forward never follows a
	// redirect: it sends with a copy of the client whose CheckRedirect
	// takes the 3xx reply as the answer, which is retried like any other
	// failure. A followed redirect would send the body, the sender's
	// signature headers, the Idempotency-Key and the values of Headers to
	// whatever host the Location names (a 307 or 308 keeps them all but
	// Authorization and Cookie), or turn the POST into a GET without its
	// body (301, 302, 303). The attempt's time limit comes from the
	// context the worker passes.
	Client *http.Client
	// Redactor masks secrets in the errors Deliver returns (a reply body
	// that echoes a token, above all); nil masks nothing. The values of
	// Headers are masked in any case.
	Redactor *redact.Redactor
	// Sign, when set, signs every attempt with hookbox's own Standard
	// Webhooks secret and the attempt's time (see SignOptions).
	Sign *SignOptions
}

// SignOptions make a Forward sign what it sends, so the app can verify a
// forward whenever it arrives: the sender's own signature is timestamped
// at the original delivery and goes stale after a few minutes of retries.
// Each attempt carries webhook-id (the Idempotency-Key, see ForwardKey: the
// same on every attempt), webhook-timestamp (the attempt's time) and webhook-signature
// (v1, HMAC-SHA256 over id.timestamp.body). These replace a sender's
// headers of the same names, whatever DropSenderHeaders says: a Standard
// Webhooks sender's own webhook-id, webhook-timestamp and
// webhook-signature never reach the app of a signed forward.
type SignOptions struct {
	// Secret is the Standard Webhooks secret ("whsec_" and base64) the
	// app verifies with.
	Secret string
	// DropSenderHeaders leaves out the sender's signature headers (see
	// SenderSignatureHeader, and SenderHeaders), so the app sees
	// hookbox's signature only.
	DropSenderHeaders bool
	// SenderHeaders are more names of the sender's signature headers,
	// left out with DropSenderHeaders: those a source configures, which
	// SenderSignatureHeader cannot know (an hmac source's header and
	// timestamp_header, X-Foo-Hmac say). Names ignore case.
	SenderHeaders []string
}

// SenderSignatureHeader reports whether a stored header carries the
// sender's signature or what it signs: any name with "signature" in it
// (Stripe-Signature, X-Hub-Signature-256, webhook-signature, …), the
// Standard Webhooks and Svix id and timestamp, and the other providers'
// signing headers hookbox knows.
func SenderSignatureHeader(name string) bool {
	n := strings.ToLower(name)
	switch n {
	case "webhook-id", "webhook-timestamp", "svix-id", "svix-timestamp",
		"x-shopify-hmac-sha256", "x-gitlab-token", "x-slack-request-timestamp", "x-twilio-signature":
		return true
	}
	return strings.Contains(n, "signature")
}

// Forward POSTs each event's raw body, with the sender's original headers,
// to a URL. It is safe for concurrent use.
type Forward struct {
	url        string
	host       string          // Host override from the extra headers
	extra      http.Header     // extra headers, canonical keys
	extraAs    map[string]bool // their names with "_" read as "-" (see dropped)
	secrets    []string        // extra headers' secrets and URL secrets, masked in errors; longest first
	red        *redact.Redactor
	permanent  map[int]bool
	client     *http.Client
	sign       *verify.Config  // hookbox's own signature, when set
	dropSender map[string]bool // with DropSenderHeaders (else nil): SenderHeaders' canonical names
}

// NewForward validates opts and returns the target. Errors name the option
// at fault and never quote a header value or the URL.
func NewForward(opts ForwardOptions) (*Forward, error) {
	u, err := url.Parse(opts.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("forward: URL must be an absolute http:// or https:// URL")
	}
	f := &Forward{url: opts.URL, extra: http.Header{}, extraAs: map[string]bool{}, permanent: map[int]bool{}, client: opts.Client, red: opts.Redactor}
	if opts.Sign != nil {
		cfg := verify.Config{Scheme: verify.SchemeStandardWebhooks, Secrets: []string{opts.Sign.Secret}}
		if _, err := verify.New(cfg); err != nil || !strings.HasPrefix(opts.Sign.Secret, "whsec_") {
			return nil, errors.New("forward: sign: the secret must be whsec_ followed by base64")
		}
		f.sign = &cfg
		if opts.Sign.DropSenderHeaders {
			f.dropSender = map[string]bool{}
			for _, name := range opts.Sign.SenderHeaders {
				f.dropSender[http.CanonicalHeaderKey(name)] = true
			}
		}
		f.secrets = append(f.secrets, opts.Sign.Secret)
	}
	given := map[string]string{} // canonical name → the name as configured
	for name, value := range opts.Headers {
		if !httpguts.ValidHeaderFieldName(name) {
			return nil, fmt.Errorf("forward: headers: %q is not a valid header name", name)
		}
		if other, ok := given[http.CanonicalHeaderKey(name)]; ok {
			a, b := min(name, other), max(name, other)
			return nil, fmt.Errorf("forward: headers: %q and %q name the same header (names ignore case), and only one could be sent: keep one", a, b)
		}
		given[http.CanonicalHeaderKey(name)] = name
		if !validHeaderValue(value) {
			return nil, fmt.Errorf("forward: headers: the value of %s contains a line break or control character", name)
		}
		key := http.CanonicalHeaderKey(name)
		// Judged by its dashed name, as dropped judges a sender's: an
		// app behind CGI, WSGI or Rack reads Idempotency_Key as
		// Idempotency-Key, beside hookbox's own.
		dashed := dashedName(key)
		switch {
		case key == "Host":
			if !validHost(value) {
				return nil, errors.New("forward: headers: Host must be a host name or address with an optional port, like app.internal or 10.0.0.5:8080")
			}
			f.host = value
		case reservedHeader(dashed):
			return nil, fmt.Errorf("forward: headers: %s is set by hookbox and cannot be configured", key)
		case hopByHop[dashed]:
			return nil, fmt.Errorf("forward: headers: %s is a connection header and cannot be configured", key)
		default:
			f.extra.Set(key, value)
			f.extraAs[dashed] = true
		}
		f.secrets = append(f.secrets, redact.HeaderSecrets(value)...)
	}
	f.secrets = append(f.secrets, urlSecrets(opts.URL, u)...)
	f.secrets = sortSecrets(f.secrets)
	statuses := opts.PermanentStatuses
	if statuses == nil {
		statuses = DefaultPermanentStatuses
	}
	for _, s := range statuses {
		if !config.PermanentStatusAllowed(s) {
			return nil, fmt.Errorf("forward: permanent statuses: %d is not a reply a forward fails with; list 3xx, 4xx or 5xx statuses", s)
		}
		f.permanent[s] = true
	}
	if f.client == nil {
		if err := checkProxyEnvironment(u); err != nil {
			return nil, err
		}
		f.secrets = sortSecrets(append(f.secrets, proxySecrets(u)...))
		f.client = defaultClient()
	} else {
		c := *f.client // the caller's client is left as it is
		c.CheckRedirect = noRedirects
		f.client = &c
	}
	return f, nil
}

// noRedirects is Forward's http.Client.CheckRedirect: the 3xx reply is the
// answer (see ForwardOptions.Client).
func noRedirects(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

// maxIdlePerHost is more connections than any sensible
// workers.concurrency keeps in flight to one target.
const maxIdlePerHost = 4096

// maxReplyHeaderBytes bounds the size of a reply's status line and
// headers, which the transport reads whole before Deliver sees the reply
// (net/http's own bound is 10 MiB, per attempt in flight). An app's
// reply headers are a few hundred bytes; a reverse proxy in front of
// one passes no more than its buffer (nginx: 4 or 8 KiB by default).
// Larger ones make the attempt fail, and be retried.
const maxReplyHeaderBytes = 64 << 10

// checkProxyEnvironment refuses a proxy variable that net/http would
// ignore for u: http.ProxyFromEnvironment skips a value that is not a URL
// (a password with a bare "%", say) as though it were unset, so the
// forwards would go around the proxy the operator set, directly, and fail
// to resolve or connect where only the proxy gets out, or leave by a way
// the proxy was there to watch. A variable NO_PROXY makes moot for u, or
// that u's scheme does not read, is let be; the error names the variable
// and never quotes its value, whose password is a secret.
func checkProxyEnvironment(u *url.URL) error {
	env := httpproxy.FromEnvironment()
	value, name := &env.HTTPProxy, "HTTP_PROXY"
	if u.Scheme == "https" {
		value, name = &env.HTTPSProxy, "HTTPS_PROXY"
	}
	if *value == "" || proxyUsable(*value) {
		return nil
	}
	// Would the proxy be used for u, were the value good?
	*value = "http://proxy.invalid"
	if proxy, err := env.ProxyFunc()(u); err != nil || proxy == nil {
		return nil
	}
	return fmt.Errorf("forward: the environment's %s (or its lower-case form) is not a URL, and net/http would ignore it and send the forwards around the proxy: fix it, percent-encoding a %% in its password as %%25 (http://user:p%%25ss@proxy:3128), or unset it", name)
}

// proxySecrets returns the secrets of the proxy the environment gives
// for u (HTTP_PROXY or HTTPS_PROXY, as the default client reads them), in
// the forms urlSecrets gives: its password, or its user name when it has
// none, and the Proxy-Authorization credential the client derives from
// them. A proxy that refuses a forward may echo that header in its reply
// (a 407 page), which the forward's error quotes and the database keeps.
func proxySecrets(u *url.URL) []string {
	proxy, err := httpproxy.FromEnvironment().ProxyFunc()(u)
	if err != nil || proxy == nil || proxy.User == nil {
		return nil
	}
	return urlSecrets(proxy.String(), proxy)
}

// proxyUsable reports whether net/http takes the proxy variable's value v
// (as golang.org/x/net/http/httpproxy parses it): a URL, or a host and
// port it reads as an http:// URL.
func proxyUsable(v string) bool {
	if _, err := url.Parse(v); err == nil {
		return true
	}
	_, err := url.Parse("http://" + v)
	return err == nil
}

// defaultClient returns the client Forward uses when none is given.
func defaultClient() *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	// Keep every connection the pool had in flight at once, however high
	// workers.concurrency is set (it bounds them): with a fixed cap, a
	// target worked at a higher concurrency closed the connections above
	// it after each round and dialled them again (100 at once with a cap
	// of 64: 36 new connections a round). Idle ones close after 90 s.
	t.MaxIdleConns = 0 // no limit over all hosts
	t.MaxIdleConnsPerHost = maxIdlePerHost
	t.IdleConnTimeout = 90 * time.Second
	t.MaxResponseHeaderBytes = maxReplyHeaderBytes
	return &http.Client{Transport: t, CheckRedirect: noRedirects}
}

// Deliver POSTs ev to the URL. A 2xx reply is nil; a status listed as
// permanent is a worker.Permanent error; anything else, a 101 Switching
// Protocols among them, is an error to retry,
// wrapped in worker.RetryAfter when the reply carries a Retry-After header.
// An event whose payload was cleared is a worker.Permanent error, and
// nothing is sent.
func (f *Forward) Deliver(ctx context.Context, ev *hookbox.Event) error {
	if err := checkPayload("forward", ev); err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.url, bytes.NewReader(ev.Payload))
	if err != nil {
		return errors.New("forward: cannot build the request") // the URL was validated; never quote it
	}
	req.Header = ForwardHeader(ev.Header)
	key := ForwardKey(ev, f.sign != nil)
	var signed http.Header
	if f.sign != nil {
		signed, err = verify.Sign(*f.sign, ev.Payload, key, time.Now())
		if err != nil {
			return worker.Permanent(fmt.Errorf("forward: sign: %w", err))
		}
	}
	for k := range req.Header {
		// A sender's header is judged by the name an app behind CGI,
		// FastCGI, WSGI or Rack reads it as ("_" as "-", see dropped), as
		// the configured ones are (extraAs): the sender's X_Api_Key would
		// otherwise reach the app beside the configured X-Api-Key, its
		// X-Api-Key beside a configured X_Api_Key, and its Webhook_Id
		// beside hookbox's own. (A configured header is set after.)
		name := dashedName(k)
		switch {
		case f.dropSender != nil && (SenderSignatureHeader(name) || f.dropSender[name]):
		case f.extraAs[name]:
		case name != k && signed[name] != nil:
		default:
			continue
		}
		delete(req.Header, k)
	}
	for k, v := range f.extra {
		req.Header[k] = v
	}
	for k, v := range signed {
		req.Header[k] = v
	}
	if f.host != "" {
		req.Host = f.host
	}
	req.Header.Set(HeaderIdempotencyKey, key)
	req.Header.Set(HeaderEventID, strconv.FormatInt(ev.EventID(), 10))
	req.Header.Set(HeaderAttempt, strconv.Itoa(ev.Attempts))
	req.Header.Set(HeaderSource, ev.SourceName())
	if ev.Target != "" {
		req.Header.Set(HeaderTarget, ev.Target)
	}
	tracing.InjectHeader(ctx, req.Header) // the attempt's span
	if _, ok := req.Header["User-Agent"]; !ok {
		req.Header.Set("User-Agent", "hookbox")
	}

	resp, err := f.client.Do(req)
	if err != nil {
		// url.Error quotes the URL, which may carry a token in its query:
		// keep only the cause.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		if ctxErr := ctx.Err(); ctxErr != nil && !errors.Is(err, ctxErr) {
			err = fmt.Errorf("%w (%v)", ctxErr, err)
		}
		// The transport's error may quote what the receiver sent (a
		// malformed status line or header, up to the size of the reply's
		// headers, and four times that once escaped): keep no more of it
		// than the worker stores, so that the attempt's span status
		// (tracing.Attempts), which gets the error itself, is bounded too.
		return &transportError{err: err, text: worker.CutText(cleanText(f.redact(err.Error()), math.MaxInt), transportErrorBytes)}
	}
	// The transport stops reading a reply's body when ctx ends, except the
	// body of a 101 Switching Protocols reply: that is the raw connection,
	// which no context reaches. Closing the body when ctx ends bounds every
	// read below by the attempt's time limit, whatever the reply.
	stop := context.AfterFunc(ctx, func() { resp.Body.Close() })
	defer stop()
	code := resp.StatusCode
	if code < 200 {
		// The transport answers the other 1xx replies itself and waits for
		// the final one; a 101 hands over the connection instead, and a
		// receiver that switched protocols never took the event. Its body
		// is that connection: close it unread, and retry. The transport
		// takes any three digits as a status, so a broken receiver's 000
		// to 099 come here too: nothing says the app took the event either.
		resp.Body.Close()
		note := "the receiver switched protocols instead of answering; retried"
		if code < 100 {
			note = "not an HTTP status: a broken receiver; retried"
		}
		return &statusError{code: code, note: note}
	}
	defer drain(resp.Body)
	if code < 300 {
		return nil
	}
	// The longest text masked: a secret the read cuts is shorter.
	longest := f.red.Longest()
	for _, s := range f.secrets {
		longest = max(longest, len(s))
	}
	// The text of a refusal comes with its headers; one trickled, or held
	// open, would otherwise keep the attempt, and its slot, until the
	// attempt's time limit for a reply whose status is already known.
	cut := time.AfterFunc(errorBodyWait, func() { resp.Body.Close() })
	text := f.refusalText(resp.Body, longest)
	cut.Stop()
	serr := &statusError{code: code, body: cleanText(text, errorBodyBytes)}
	if code >= 300 && code < 400 {
		serr.note = "redirect not followed; point forward at the final URL"
	}
	if f.permanent[code] {
		return worker.Permanent(serr)
	}
	if d, ok := parseRetryAfter(resp.Header.Get("Retry-After"), time.Now()); ok {
		return worker.RetryAfter(serr, d)
	}
	return serr
}

// refusalText reads the start of a refusal's body, secrets masked, for
// its first errorBodyBytes to be shown. longest is the longest masked
// text. A secret the read cuts (the body goes on, or errorBodyWait, the
// attempt's end or a lost connection ends the read mid-body) is not
// masked: it is at most longest-1 bytes at the very end of the read,
// which are never shown. So the read goes on, in growing steps up to
// drainBytes, until what comes before them fills errorBodyBytes once
// cleanText has collapsed its white space (an indented echo of the
// request's headers is mostly white space), or the body ends.
func (f *Forward) refusalText(body io.Reader, longest int) string {
	want := errorBodyBytes + longest
	var head []byte
	for {
		chunk, err := io.ReadAll(io.LimitReader(body, int64(want-len(head))))
		head = append(head, chunk...)
		text := f.redact(string(head))
		if longest == 0 || err == nil && len(head) < want {
			return text // the body ended within the read: none of it is cut
		}
		text = text[:max(len(text)-(longest-1), 0)]
		if err != nil || want >= drainBytes || len(cleanText(text, errorBodyBytes)) >= errorBodyBytes-utf8.UTFMax {
			return text
		}
		want = min(2*want, drainBytes)
	}
}

// ForwardKey returns the Idempotency-Key Forward sends for ev, which is
// also the id it signs with (webhook-id) when signed is set:
// effect.IdempotencyKey(ev), the same on every attempt. A key the request
// could not carry as it is has each control byte (C0, DEL), each byte of
// its trailing white space, and each "%", written as "%" and two
// upper-case hex digits: "src:evt_1\n" is sent as "src:evt_1%0A", on
// every attempt alike. Unsigned, that is a key with a C0 byte other than
// tab, or DEL, which no header can hold; signed, also one with a tab or
// trailing white space, which signing refuses. Every other key is sent
// unchanged, "%" and all, as before the encoding existed. Ingest refuses
// ids with control characters or white space at either end
// (hookbox.NotReceivable); events stored before it did are forwarded so,
// instead of failing every attempt. An encoded key may equal the key of
// another legacy id that was written with the same "%XX" text.
func ForwardKey(ev *hookbox.Event, signed bool) string {
	key := effect.IdempotencyKey(ev)
	trimmed := strings.TrimRightFunc(key, unicode.IsSpace)
	unsendable := strings.IndexFunc(key, func(r rune) bool { return r != '\t' && isCtlByte(r) }) >= 0
	unsignable := strings.IndexFunc(key, isCtlByte) >= 0 || trimmed != key
	if !unsendable && !(signed && unsignable) {
		return key
	}
	var b strings.Builder
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c < 0x20 || c == 0x7f || c == '%' || i >= len(trimmed) {
			fmt.Fprintf(&b, "%%%02X", c)
		} else {
			b.WriteByte(c)
		}
	}
	return b.String()
}

// isCtlByte reports whether r is a C0 control character or DEL: the
// characters a header value (tab aside) and a signed id cannot hold.
func isCtlByte(r rune) bool { return r < 0x20 || r == 0x7f }

// redact masks every string of f.secrets in s (the extra header values
// whatever their length and their credentials, the URL's secrets as
// urlSecrets gives them), then
// the Redactor's secrets.
func (f *Forward) redact(s string) string {
	for _, v := range f.secrets {
		s = strings.ReplaceAll(s, v, redact.Mask)
	}
	return f.red.String(s)
}

// minURLSecret is the length, in bytes, below which a password or query
// value of the forward URL is not masked on its own: values such as "1",
// "v2" or "yes" are flags, not secrets (a secret that short can be
// guessed), and masking every occurrence of one would garble the reply it
// is found in ("404" with a value "4"). They are still masked as part of
// the raw query and of the Basic credential.
const minURLSecret = 4

// urlSecrets returns the parts of the forward URL rawURL (parsed as u) that
// errors must not show, in every form a reply that echoes the request may
// hold them:
//   - the password of its userinfo (or the user name, when there is no
//     password: then the name is the credential), decoded and as written,
//     and the Basic credential the HTTP client derives from the userinfo
//     (base64 of "user:password", padded and not);
//   - its raw query as a whole, as written (what RequestURI echoes) and
//     decoded;
//   - each query value (a part without "=" counts as a value), as written,
//     decoded, re-encoded for a query or a path, and JSON-escaped;
//   - each path segment that looks like a credential
//     (redact.SecretPathSegment), in
//     the same forms as a query value.
//
// Empty strings are left out.
func urlSecrets(rawURL string, u *url.URL) []string {
	var out []string
	// add keeps value and its forms when value is long enough.
	add := func(value string, forms ...string) {
		if len(value) < minURLSecret {
			return
		}
		for _, s := range append([]string{value}, forms...) {
			if s != "" {
				out = append(out, s)
			}
		}
	}
	encoded := func(v string) []string {
		forms := []string{url.QueryEscape(v), url.PathEscape(v)}
		if b, err := json.Marshal(v); err == nil {
			forms = append(forms, string(b[1:len(b)-1]))
		}
		return forms
	}
	if u.User != nil {
		user := u.User.Username()
		password, hasPassword := u.User.Password()
		secret := password
		if !hasPassword {
			secret = user
		}
		// The userinfo as written, and the secret's part of it, for their
		// escaped forms.
		var rawUserinfo, rawSecret string
		if _, rest, ok := strings.Cut(rawURL, "://"); ok {
			authority := rest[:indexAny(rest, "/?#")]
			if i := strings.LastIndex(authority, "@"); i >= 0 {
				rawUserinfo = authority[:i]
				rawSecret = rawUserinfo
				if _, p, ok := strings.Cut(rawUserinfo, ":"); ok {
					rawSecret = p
				}
			}
		}
		add(secret, append([]string{rawSecret}, encoded(secret)...)...)
		// What the client sends as Authorization: Basic, and that decoded.
		cred := user + ":" + password
		add(cred, rawUserinfo,
			base64.StdEncoding.EncodeToString([]byte(cred)),
			base64.RawStdEncoding.EncodeToString([]byte(cred)))
	}
	if raw := u.RawQuery; raw != "" {
		decoded, err := url.QueryUnescape(raw)
		if err != nil {
			decoded = ""
		}
		add(raw, decoded)
		for _, part := range strings.Split(raw, "&") {
			_, v, ok := strings.Cut(part, "=")
			if !ok {
				v = part
			}
			d, err := url.QueryUnescape(v)
			if err != nil {
				d = v
			}
			add(d, append([]string{v}, encoded(d)...)...)
		}
	}
	for _, seg := range strings.Split(u.EscapedPath(), "/") {
		d, err := url.PathUnescape(seg)
		if err != nil {
			d = seg
		}
		if redact.SecretPathSegment(d) {
			add(d, append([]string{seg}, encoded(d)...)...)
		}
	}
	return out
}

// indexAny is strings.IndexAny, with len(s) when no char of chars is in s.
func indexAny(s, chars string) int {
	if i := strings.IndexAny(s, chars); i >= 0 {
		return i
	}
	return len(s)
}

// sortSecrets returns secrets without duplicates or empty strings, longest
// first, so that a secret that contains another is masked whole. A
// secret that holds "/" comes with it written "\/" too, as JSON encoders
// that escape it (PHP's json_encode, by default) echo it: a base64 token
// holds "/".
func sortSecrets(secrets []string) []string {
	seen := map[string]bool{}
	var out []string
	add := func(s string) {
		if s != "" && !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	for _, s := range secrets {
		add(s)
		if strings.Contains(s, "/") {
			add(strings.ReplaceAll(s, "/", `\/`))
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return len(out[i]) > len(out[j]) })
	return out
}

// statusError is a non-2xx reply.
type statusError struct {
	code int
	note string
	body string // cleaned, redacted, at most errorBodyBytes
}

func (e *statusError) Error() string {
	var b strings.Builder
	b.WriteString("forward: ")
	b.WriteString(strconv.Itoa(e.code))
	if t := http.StatusText(e.code); t != "" {
		b.WriteString(" " + t)
	}
	if e.note != "" {
		b.WriteString(" (" + e.note + ")")
	}
	if e.body != "" {
		b.WriteString(": " + e.body)
	}
	return b.String()
}

// transportError is a request that got no reply: refused, reset, timed out.
type transportError struct {
	err  error
	text string // err's text, redacted, cleaned and at most transportErrorBytes
}

func (e *transportError) Error() string { return "forward: " + e.text }
func (e *transportError) Unwrap() error { return e.err }

// hopByHop are the headers that describe one connection, not the message
// (RFC 9110 §7.6.1), plus those the client computes itself. dropped also
// leaves out every other Proxy-* header (a proxy's, never the sender's
// message; see proxyHeader).
var hopByHop = map[string]bool{
	"Connection": true, "Proxy-Connection": true, "Keep-Alive": true,
	"Proxy-Authenticate": true, "Proxy-Authorization": true, "Te": true,
	"Trailer": true, "Transfer-Encoding": true, "Upgrade": true,
	"Host": true, "Content-Length": true, "Expect": true,
}

// traceHeaders are a trace context's: W3C Trace Context's traceparent and
// tracestate, and W3C Baggage. A sender's are never forwarded, tracing on
// or off: under a parent-based sampler its sampled flag would decide what
// the app's tracing keeps, and its baggage would enter the app's context,
// before anything about it is verified. With tracing on, the attempt's
// span gives the app a traceparent of hookbox's trace (tracing.InjectHeader),
// which links the sender's. The other formats' headers, whose sampled
// flags an app's tracing reads as much, are never forwarded either:
// Zipkin's B3 (B3, X-B3-*), Jaeger's (Uber-Trace-Id, Uberctx-*), Google
// Cloud's X-Cloud-Trace-Context, AWS X-Ray's X-Amzn-Trace-Id, Sentry's
// Sentry-Trace, Datadog's X-Datadog-*, Elastic APM's
// Elastic-Apm-Traceparent and SkyWalking's Sw8 and Sw8-*. A name ending
// in "*" stands for every name that starts with what comes before it.
var traceHeaders = map[string]bool{"Traceparent": true, "Tracestate": true, "Baggage": true,
	"B3": true, "X-B3-*": true, "Uber-Trace-Id": true, "Uberctx-*": true,
	"X-Cloud-Trace-Context": true, "X-Amzn-Trace-Id": true, "Sentry-Trace": true,
	"X-Datadog-*": true, "Elastic-Apm-Traceparent": true, "Sw8": true, "Sw8-*": true}

// hookboxPrefix starts the names of the headers hookbox sets. A sender's
// header of that namespace is never forwarded, whether hookbox sets the
// name on this request or not (Hookbox-Target only for a named target; a
// name a later version adds), so an app may take every Hookbox-* header it
// gets as hookbox's word. forward_headers may still configure one.
const hookboxPrefix = "Hookbox-"

// reservedHeader reports whether key is one Forward sets itself.
func reservedHeader(key string) bool {
	switch key {
	case HeaderIdempotencyKey, HeaderEventID, HeaderAttempt, HeaderSource, HeaderTarget:
		return true
	}
	return false
}

// routingHeaders tell a server where a request came from, which host,
// scheme or URL it was meant for, which method to treat it as, or how its
// body is encoded. A sender controls them, and an app (or its framework)
// behind hookbox may trust them, since they look like its proxy's: they
// are never forwarded. A name ending in "*" stands for every name that
// starts with what comes before it; dropped also leaves out the
// X-*-Method-Override headers, whose pattern is not a prefix.
var routingHeaders = map[string]bool{
	// Standard and de facto client, host and scheme headers.
	"Forwarded": true, "X-Forwarded": true, "X-Forwarded-*": true, "Via": true,
	"X-Real-Ip": true, "X-Client-Ip": true, "Client-Ip": true, "True-Client-Ip": true,
	"X-Cluster-Client-Ip": true, "X-Original-Forwarded-For": true, "X-Originating-Ip": true,
	"X-Host": true, "X-Original-Host": true,
	"X-Scheme": true, "X-Url-Scheme": true, "Front-End-Https": true,
	// CDNs' and proxies' own.
	"Cf-Connecting-Ip": true, "Cf-Connecting-Ipv6": true, "Fastly-Client-Ip": true, "X-Envoy-*": true,
	"Wl-Proxy-Client-Ip": true, "X-Appengine-*": true,
	// The URL and method the request was meant for.
	"X-Original-Url": true, "X-Original-Uri": true, "X-Rewrite-Url": true,
	"X-Original-Method": true, "X-Http-Method": true,
	// The body is sent as stored, whatever the sender said of it.
	"Content-Encoding": true,
	// What the sender accepts in hookbox's reply, not what hookbox
	// accepts in the app's: forwarded, it would stop the client from
	// asking for gzip itself and decompressing the reply, and a
	// compressed error reply would be recorded as binary noise.
	"Accept-Encoding": true,
	// Credentials meant for hookbox, not for the app (ingest does not store
	// them either).
	"Authorization": true, "Cookie": true,
	// Who the user or client is, as an authenticating proxy in front of
	// an app asserts it (the app trusts them from that proxy, which sets
	// them on every request; hookbox, calling the app directly, would be
	// passing the sender's): auth_request setups and Kubernetes'
	// authenticating proxy, oauth2-proxy, Grafana's auth proxy, AWS ALB,
	// Google IAP, Azure App Service, Cloudflare Access, Pomerium,
	// Tailscale, Vouch; and the client certificate a TLS-ending proxy
	// vouches for (nginx's and HAProxy's conventions, Azure's).
	"Remote-User": true, "X-Remote-*": true, "X-Auth-Request-*": true, "Gap-Auth": true,
	"X-Webauth-*": true, "X-Amzn-Oidc-*": true, "X-Amzn-Mtls-*": true,
	"X-Goog-Authenticated-User-*": true, "X-Goog-Iap-Jwt-Assertion": true,
	"X-Ms-Client-Principal*": true, "X-Ms-Token-*": true, "Cf-Access-*": true,
	"X-Pomerium-*": true, "Tailscale-User-*": true, "X-Vouch-*": true,
	"X-Ssl-*": true, "Ssl-Client-*": true, "X-Client-Cert*": true,
	"X-Client-Verify": true, "X-Client-Dn": true, "X-Arr-Clientcert": true,
}

// droppedPrefixes are the prefixes of routingHeaders' and traceHeaders'
// "*" names.
var droppedPrefixes = func() []string {
	var out []string
	for _, m := range []map[string]bool{routingHeaders, traceHeaders} {
		for name := range m {
			if p, ok := strings.CutSuffix(name, "*"); ok {
				out = append(out, p)
			}
		}
	}
	sort.Strings(out)
	return out
}()

// proxyHeader reports whether key names a header of a proxy's: Proxy,
// or any name that starts with Proxy- in any case (Proxy-Authorization,
// Proxy-Status, …). The bare Proxy header is how httpoxy sets the proxy
// of a CGI or FastCGI app (HTTP_PROXY).
func proxyHeader(key string) bool {
	const p = "Proxy-"
	return strings.EqualFold(key, "Proxy") || (len(key) >= len(p) && strings.EqualFold(key[:len(p)], p))
}

// dashedName is the name an app behind CGI, FastCGI, WSGI or Rack reads
// the header key as: with a "_", canonical with each "_" as "-"
// (X_Forwarded_For is its HTTP_X_FORWARDED_FOR); without one, key as it
// is.
func dashedName(key string) string {
	if !strings.Contains(key, "_") {
		return key
	}
	return http.CanonicalHeaderKey(strings.ReplaceAll(key, "_", "-"))
}

// dropped reports whether Forward leaves out the header with canonical key.
// The name is judged with each "_" read as "-": an app behind CGI,
// FastCGI, WSGI or Rack reads both X_Forwarded_For and X-Forwarded-For as
// HTTP_X_FORWARDED_FOR, so a sender's X_Forwarded_For would pass for its
// proxy's header where X-Forwarded-For is dropped.
func dropped(key string) bool {
	key = dashedName(key)
	if hopByHop[key] || routingHeaders[key] || traceHeaders[key] || reservedHeader(key) || proxyHeader(key) || strings.HasPrefix(key, hookboxPrefix) {
		return true
	}
	for _, p := range droppedPrefixes {
		if strings.HasPrefix(key, p) {
			return true
		}
	}
	return strings.HasPrefix(key, "X-") && strings.HasSuffix(key, "-Method-Override")
}

// ForwardHeader returns the copy of a stored event's headers that Forward
// sends (before adding its own): every header but the hop-by-hop ones
// (Connection, Keep-Alive, Transfer-Encoding, TE, Trailer, Upgrade,
// Proxy and every Proxy-*, Host, Content-Length, Expect) and those a
// Connection header names; the routing ones (Forwarded, X-Forwarded,
// X-Forwarded-*, Via, X-Real-Ip, X-Client-Ip, Client-Ip, True-Client-Ip,
// X-Cluster-Client-Ip, X-Original-Forwarded-For, X-Originating-Ip, X-Host,
// X-Original-Host, X-Scheme, X-Url-Scheme, Front-End-Https,
// Cf-Connecting-Ip, Cf-Connecting-Ipv6, Fastly-Client-Ip, X-Envoy-*,
// Wl-Proxy-Client-Ip, X-Appengine-*, X-Original-Url, X-Original-Uri,
// X-Rewrite-Url, X-Original-Method, X-Http-Method, X-*-Method-Override);
// Content-Encoding and Accept-Encoding; Authorization and Cookie; the
// trace context (Traceparent, Tracestate, Baggage, B3, X-B3-*,
// Uber-Trace-Id, Uberctx-*, X-Cloud-Trace-Context, X-Amzn-Trace-Id,
// Sentry-Trace, X-Datadog-*, Elastic-Apm-Traceparent, Sw8, Sw8-*); the
// identity ones an authenticating proxy sets (Remote-User, X-Remote-*,
// X-Auth-Request-*, Gap-Auth, X-Webauth-*, X-Amzn-Oidc-*, X-Amzn-Mtls-*,
// X-Goog-Authenticated-User-*, X-Goog-Iap-Jwt-Assertion,
// X-Ms-Client-Principal*, X-Ms-Token-*, Cf-Access-*, X-Pomerium-*,
// Tailscale-User-*, X-Vouch-*, X-Ssl-*, Ssl-Client-*, X-Client-Cert*,
// X-Client-Verify, X-Client-Dn, X-Arr-Clientcert); and the
// Idempotency-Key and every Hookbox-* header (the namespace of those
// Forward sets itself). A name with "_" in place of a "-" is left out as
// that name is (X_Forwarded_For as X-Forwarded-For), since an app behind a
// gateway interface (CGI, WSGI, Rack) reads the two alike. Keys come out
// canonical; values are copied.
func ForwardHeader(stored http.Header) http.Header {
	named := connectionNamed(stored)
	out := make(http.Header, len(stored)+6)
	for k, vs := range stored {
		key := http.CanonicalHeaderKey(k)
		if dropped(key) || named[key] || len(vs) == 0 {
			continue
		}
		out[key] = append(out[key], vs...)
	}
	return out
}

// WithoutConnectionHeaders returns a copy of h without Connection and the
// headers its values name (RFC 9110 §7.6.1: they were meant for the one
// connection, and a sender may use them to pass a header that a proxy would
// have dropped). net/http leaves both in Request.Header; ingest calls this
// on the request's headers before storing them, since once Connection is
// gone the names it listed cannot be known.
func WithoutConnectionHeaders(h http.Header) http.Header {
	named := connectionNamed(h)
	out := make(http.Header, len(h))
	for k, vs := range h {
		key := http.CanonicalHeaderKey(k)
		if key == "Connection" || named[key] {
			continue
		}
		out[k] = append([]string(nil), vs...)
	}
	return out
}

// connectionNamed returns the canonical names listed in h's Connection
// values.
func connectionNamed(h http.Header) map[string]bool {
	named := map[string]bool{}
	for k, vs := range h {
		if http.CanonicalHeaderKey(k) != "Connection" {
			continue
		}
		for _, v := range vs {
			for _, name := range strings.Split(v, ",") {
				if name = strings.TrimSpace(name); name != "" {
					named[http.CanonicalHeaderKey(name)] = true
				}
			}
		}
	}
	return named
}

// parseRetryAfter reads a Retry-After value: delay-seconds or an HTTP date.
// It reports false for a missing, malformed or past value.
func parseRetryAfter(v string, now time.Time) (time.Duration, bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return 0, false
	}
	// delay-seconds too large for a uint64 is still a (very long) delay:
	// ParseUint gives its largest value with ErrRange.
	if n, err := strconv.ParseUint(v, 10, 64); err == nil || errors.Is(err, strconv.ErrRange) {
		const maxSeconds = 1 << 31 // about 68 years; the policy caps it anyway
		if n == 0 {
			return 0, false
		}
		return time.Duration(min(n, maxSeconds)) * time.Second, true
	}
	t, err := http.ParseTime(v)
	if err != nil {
		return 0, false
	}
	d := t.Sub(now)
	if d <= 0 {
		return 0, false
	}
	return d, true
}

// cleanText makes s safe to store and print: valid UTF-8, no control
// characters (each run of whitespace or controls becomes one space), at most
// n bytes without splitting a character.
func cleanText(s string, n int) string {
	var b strings.Builder
	space := false
	for _, r := range strings.ToValidUTF8(s, "\uFFFD") {
		if r < 0x20 || r == 0x7f || r == ' ' {
			space = true
			continue
		}
		sep := space && b.Len() > 0
		space = false
		need := utf8.RuneLen(r)
		if sep {
			need++
		}
		if b.Len()+need > n {
			break
		}
		if sep {
			b.WriteByte(' ')
		}
		b.WriteRune(r)
	}
	return b.String()
}

// validHost reports whether v can be sent as the Host header as it is: a
// host name or address and an optional port, nothing else. net/http would
// send "app internal" or "app/internal" as "app", silently, and the app
// would answer for a host nobody configured.
func validHost(v string) bool {
	u, err := url.Parse("http://" + v)
	return err == nil && u.Host == v && u.User == nil && u.Path == "" && u.RawQuery == "" && u.Fragment == "" && !strings.HasSuffix(v, ":")
}

// validHeaderValue rejects line breaks and other controls (tab is allowed).
func validHeaderValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if c := v[i]; (c < 0x20 && c != '\t') || c == 0x7f {
			return false
		}
	}
	return true
}
