package rejected

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"math"
	"net/http"
	"net/netip"
	"slices"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/verify"
)

// Source is what a re-check needs of one configured source.
type Source struct {
	Verifier verify.Verifier
	// DedupesByBody sets the body key (verify.BodyKey) on admitted
	// deliveries, as ingest does for such a source
	// (config.Source.DedupesByBody).
	DedupesByBody bool
	// AllowIPs, when not empty, are the only client addresses the source
	// accepts deliveries from (config.Source.AllowedIPs), which the server
	// checks before anything else. A rejection recorded from another
	// address, or whose client address was not told, is refused, as the
	// server would have refused the delivery.
	AllowIPs []netip.Prefix
	// Route, when not nil, is given each delivery that passes before it is
	// stored, to set what ingest sets on it: FanOut and the Routes that
	// the source's named targets pick (the service's routing, the same
	// function its ingest applies). Without it a delivery of a source
	// with named targets or store_only would be stored as a plain event
	// that no worker runs.
	Route func(*hookbox.Delivery)
	// MaxBodyBytes, when above 0, is the largest body the source accepts
	// (config's max_body_bytes, as serve applies it): ingest answers 413 to
	// a larger one, and a re-check refuses it.
	MaxBodyBytes int64
}

// RecheckStore is what a re-check reads and writes.
type RecheckStore interface {
	hookbox.RejectionStore
	hookbox.NonceStore
	Ingest(ctx context.Context, ds []hookbox.Delivery) ([]hookbox.Receipt, error)
}

// RecheckParams say which kept rejections to verify again.
type RecheckParams struct {
	// IDs names rejections one by one; empty means every kept one not yet
	// admitted.
	IDs []int64
	// DryRun verifies and reports, and stores nothing.
	DryRun bool
	// Now is the present, against which the one-time tokens of signatures
	// are judged (see Recheck); zero means time.Now().
	Now time.Time
}

// Admission is one rejected delivery a re-check found to pass.
type Admission struct {
	RejectionID int64 `json:"rejection_id"`
	EventID     int64 `json:"event_id,omitempty"` // 0 in a dry run
	Duplicate   bool  `json:"duplicate"`          // the event was already stored
}

// Refusal is one rejected delivery a re-check could not admit, and why.
type Refusal struct {
	RejectionID int64  `json:"rejection_id"`
	Reason      string `json:"reason"`
}

// RecheckResult says what a re-check did (or, dry, would do). Beside an
// error it says what was done before the failure: a re-check stores what
// passes a page at a time, each page committed on its own, so every
// delivery in Admitted with an EventID is stored as that event, even when
// the failure came before its rejection was marked admitted (a re-check
// run again then finds it already stored, as a duplicate, and marks it).
type RecheckResult struct {
	Admitted []Admission `json:"admitted"`
	// Refused still fail verification under the current configuration,
	// or were not kept whole or as sent (a body or a header cut, a basic
	// source's credentials, which are never logged), or name a source that
	// is not configured, or came from an address the source's allow_ips do
	// not accept, or are a sender's handshake; each with its reason (the
	// Reason constants, or the verifier's).
	Refused []Refusal `json:"refused"`
	DryRun  bool      `json:"dry_run"`
}

// Reasons a re-check gives for not admitting a delivery besides the
// verifier's own.
const (
	ReasonNotWhole      = "the body was not kept whole, so the delivery cannot be verified again"
	ReasonNoSource      = "no source of this name is configured"
	ReasonAlreadyStored = "already admitted"
	// ReasonNotFound: a delivery named by id is not in the log (never
	// logged, or trimmed from it).
	ReasonNotFound = "no such rejected delivery (trimmed from the log?)"
	// ReasonAddressRefused: the source has allow_ips and the delivery came
	// from an address outside them.
	ReasonAddressRefused = "the delivery came from an address this source does not accept (allow_ips)"
	// ReasonAddressUnknown: the source has allow_ips and the log does not
	// hold the client's address (it could not be told when the delivery
	// was refused), so it cannot be shown to be allowed.
	ReasonAddressUnknown = "the client's address is not known and this source accepts only the addresses in allow_ips"
	// ReasonReplayed: the delivery was refused because its signed token
	// had come with another body (hookbox.ReplayReason), or a re-check
	// finds that it has: which of the two was the sender's cannot be told.
	ReasonReplayed = "its signed one-time token came with another body: a replay, which a re-check never admits"
	// ReasonTokenExpired: the delivery's signature carries a one-time
	// token (Mailgun's) and its timestamp has left the tolerance, after
	// which the store no longer knows every body the token came with. The
	// sender retries with a new token.
	ReasonTokenExpired = "its signature carries a one-time token whose time has passed, so a re-check cannot tell whether the token came with another body; the sender retries with a new one"
	// ReasonCompressed: the body came with a Content-Encoding other than
	// identity, which ingest refuses (hookbox.IdentityEncoded).
	ReasonCompressed = "the body is compressed (Content-Encoding), which hookbox does not store; the sender must send it uncompressed"
	// ReasonHeaderAltered: a header name or value was cut, or had bytes
	// that are not UTF-8 text replaced, when the delivery was logged
	// (HeaderAltered): verifying what the log holds could admit it under
	// an id, or with headers, the sender never sent.
	ReasonHeaderAltered = "a header was cut, left out (one the sender named in Connection), or had bytes that are not UTF-8 text replaced (U+FFFD), when it was logged, so the delivery as sent cannot be verified again"
	// ReasonCredentialsNotLogged: the source's secret travels in a header
	// the log never keeps (basic's Authorization: the log does not store
	// passwords), so none of its deliveries can be verified again.
	ReasonCredentialsNotLogged = "this source's credentials (basic auth's Authorization header) are never logged, so its refused deliveries cannot be verified again; the sender must send them again"
	// ReasonHandshake: the delivery is a sender's URL check (Slack's
	// url_verification, Discord's PING, Zoom's endpoint.url_validation),
	// which ingest answers and never stores.
	ReasonHandshake = "a handshake (the sender's check of the URL), which ingest answers and never stores as an event"
	// ReasonTooLarge: the body is larger than the source's max_body_bytes
	// now, which ingest answers with 413.
	ReasonTooLarge = "the body is larger than this source's max_body_bytes, which ingest refuses (413)"
)

// recheckPage is how many rejections one read of a re-check takes.
const recheckPage = 100

// Recheck verifies kept rejected deliveries again against sources (the
// current configuration), judging signed timestamps against the time each
// was received, and stores those that pass as ordinary events,
// deduplicated as ingest does: a delivery whose event exists already (or
// that passed twice, sent twice) is reported as a duplicate of it. Each
// admitted rejection records its event, so a second re-check skips it. A
// source's allow_ips apply as the server applies them: a delivery recorded
// from another address, or from one not told, is refused. An admitted
// event is routed as ingest routes it (Source.Route), and holds the
// headers ingest would have stored: not those that carry the source's
// secret (verify.CredentialHeaders), which the log keeps only to verify
// them again. Only deliveries whose whole body and headers were kept as
// sent (HeaderAltered) can pass, and never a sender's handshake
// (verify.Result.Reply), which ingest answers and does not store. A
// delivery whose signature carries a nonce (verify.Result.Nonce: Mailgun's
// token) passes only while that signature is still within its tolerance
// now (RecheckParams.Now), when the store remembers every body the nonce
// was accepted with, and only if it is not remembered with another body;
// it is then remembered with this one. A delivery refused as a replay
// (hookbox.ReplayReason) never passes, nor does any delivery whose nonce
// came with more than one body among those the log keeps, however the
// deliveries to re-check are named. A dry run does not ask the store about
// nonces. The deliveries that pass are stored recheckPage to a
// transaction.
func Recheck(ctx context.Context, st RecheckStore, sources map[string]Source, p RecheckParams) (RecheckResult, error) {
	res := RecheckResult{Admitted: []Admission{}, Refused: []Refusal{}, DryRun: p.DryRun}
	rc := &recheck{st: st, sources: sources, dry: p.DryRun, res: &res, at: p.Now,
		replayed: map[string]bool{}, seen: map[string][sha256.Size]byte{}}
	// pages calls fn with the kept rejections that hold a body, newest
	// first, a page at a time.
	pages := func(unadmitted bool, fn func(context.Context, []hookbox.Rejection) error) error {
		for before := int64(0); ; {
			page, err := st.Rejections(ctx, hookbox.RejectionFilter{Unadmitted: unadmitted, WithBody: true, BeforeID: before, Limit: recheckPage})
			if err != nil {
				return err
			}
			if err := fn(ctx, page); err != nil {
				return err
			}
			if len(page) < recheckPage {
				return nil
			}
			before = page[len(page)-1].ID
		}
	}
	// The nonces of the whole log first, admitted rejections included:
	// a delivery named alone is judged against its twins all the same.
	// Only when some source signs nonces: otherwise there are none to find.
	rc.newest = math.MaxInt64
	if slices.ContainsFunc(slices.Collect(maps.Values(sources)), func(s Source) bool { return verify.SignsNonces(s.Verifier) }) {
		rc.newest = 0
		if err := pages(false, rc.findReplays); err != nil {
			return res, err
		}
	}
	if len(p.IDs) == 0 {
		// Only what findReplays saw: a rejection logged since could be
		// the twin of one it did not see.
		return res, pages(true, func(ctx context.Context, rjs []hookbox.Rejection) error {
			rjs = slices.DeleteFunc(rjs, func(rj hookbox.Rejection) bool { return rj.ID > rc.newest })
			return rc.batch(ctx, rjs)
		})
	}
	var named []hookbox.Rejection
	for _, id := range p.IDs {
		rj, err := st.Rejection(ctx, id)
		switch {
		case errors.Is(err, hookbox.ErrNotFound):
			res.Refused = append(res.Refused, Refusal{RejectionID: id, Reason: ReasonNotFound})
		case err != nil:
			return res, err
		case rj.AdmittedEventID != 0:
			res.Refused = append(res.Refused, Refusal{RejectionID: id, Reason: ReasonAlreadyStored})
		case rj.ID > rc.newest:
			// Logged after findReplays read the log (ids grow): judging
			// it without its twins would let a forgery logged meanwhile in.
			res.Refused = append(res.Refused, Refusal{RejectionID: id, Reason: "logged during this re-check; re-check it again"})
		default:
			named = append(named, rj)
		}
	}
	for len(named) > 0 {
		n := min(len(named), recheckPage)
		if err := rc.batch(ctx, named[:n]); err != nil {
			return res, err
		}
		named = named[n:]
	}
	return res, nil
}

// recheck is one run of Recheck.
type recheck struct {
	st      RecheckStore
	sources map[string]Source
	dry     bool
	res     *RecheckResult
	at      time.Time // RecheckParams.Now; zero: the clock
	// seen are the nonces of the kept deliveries that pass verification,
	// with their bodies' hashes; replayed are those that came with more
	// than one body; newest is the newest rejection findReplays read
	// (the largest id when it did not run: no source signs nonces).
	seen     map[string][sha256.Size]byte
	replayed map[string]bool
	newest   int64
}

// now is the present, against which signatures' nonces are judged: read
// for each, as a long run's start may be older than the store's memory.
func (rc *recheck) now() time.Time {
	if !rc.at.IsZero() {
		return rc.at
	}
	return time.Now()
}

// findReplays notes the nonces of rjs that pass verification, and which of
// them came with another body too: none of those is admitted, as which
// body was the sender's cannot be told (and admitting the first to be
// judged would let the order of the log decide). A nonce is one at every
// source, as in the store.
func (rc *recheck) findReplays(_ context.Context, rjs []hookbox.Rejection) error {
	for _, rj := range rjs {
		rc.newest = max(rc.newest, rj.ID)
		if src, ok := rc.sources[rj.Source]; !ok || !verify.SignsNonces(src.Verifier) {
			continue
		}
		d, vres, why := admissible(rj, rc.sources)
		if why != "" || vres.Nonce == "" {
			continue
		}
		sum := sha256.Sum256(d.Payload)
		if prev, ok := rc.seen[vres.Nonce]; ok && prev != sum {
			rc.replayed[vres.Nonce] = true
		}
		rc.seen[vres.Nonce] = sum
	}
	return nil
}

// batch verifies rjs and, unless dry, stores those that pass in one
// ingest transaction and records each one's event, adding the outcome to
// the result.
func (rc *recheck) batch(ctx context.Context, rjs []hookbox.Rejection) error {
	st, res := rc.st, rc.res
	var passed []hookbox.Rejection
	var ds []hookbox.Delivery
	for _, rj := range rjs {
		d, vres, why := admissible(rj, rc.sources)
		if why == "" && vres.Nonce != "" {
			var err error
			if why, err = rc.nonce(ctx, rj, vres, d.Payload); err != nil {
				return err
			}
		}
		if why != "" {
			res.Refused = append(res.Refused, Refusal{RejectionID: rj.ID, Reason: why})
			continue
		}
		if rc.dry {
			res.Admitted = append(res.Admitted, Admission{RejectionID: rj.ID})
			continue
		}
		passed, ds = append(passed, rj), append(ds, d)
	}
	if len(ds) == 0 {
		return nil
	}
	receipts, err := st.Ingest(ctx, ds)
	var bad *hookbox.BadDeliveries
	if err != nil && !errors.As(err, &bad) {
		return fmt.Errorf("admit rejected deliveries: %w", err)
	}
	// The ingest has committed: each delivery that passed is an event
	// now, and is reported admitted whether or not its rejection could be
	// marked so. One left unmarked by a failure is found already stored
	// (a duplicate) by the next re-check, which marks it.
	var failed error
	for i, rj := range passed {
		if bad != nil {
			if why := bad.ItemError(i); why != nil {
				res.Refused = append(res.Refused, Refusal{RejectionID: rj.ID, Reason: "the store refuses it: " + why.Error()})
				continue
			}
		}
		rcpt := receipts[i]
		if failed == nil {
			if err := st.SetRejectionAdmitted(ctx, rj.ID, rcpt.ID); err != nil && !errors.Is(err, hookbox.ErrNotFound) {
				failed = fmt.Errorf("admit rejection %d: its event %d is stored, but it (and the rest of its page) could not be marked admitted: %w",
					rj.ID, rcpt.ID, err)
			}
		}
		res.Admitted = append(res.Admitted, Admission{RejectionID: rj.ID, EventID: rcpt.ID, Duplicate: rcpt.Duplicate})
	}
	return failed
}

// nonce judges the nonce of a delivery that passed verification, and
// returns why it cannot be admitted, or "": a nonce that came with two
// bodies in the log is refused, and so is one whose signature has left
// its tolerance by now (verify.MaxNonceTolerance keeps that within what
// the store remembers). A real run then asks the store, which remembers
// the nonce with this body, so that the nonce with another body is
// refused from then on, at ingest or by a later re-check.
func (rc *recheck) nonce(ctx context.Context, rj hookbox.Rejection, vres verify.Result, body []byte) (string, error) {
	now := rc.now()
	switch {
	case rc.replayed[vres.Nonce]:
		return ReasonReplayed, nil
	case now.After(vres.NonceExpires):
		return ReasonTokenExpired, nil
	case rc.dry:
		return "", nil
	}
	sum := sha256.Sum256(body)
	ok, err := rc.st.UseNonces(ctx, []hookbox.Nonce{{Source: rj.Source, Value: vres.Nonce, BodySHA256: sum[:],
		Signed: vres.NonceSigned, Now: now}})
	switch {
	case err != nil:
		return "", fmt.Errorf("remember the signed token of rejection %d: %w", rj.ID, err)
	case !ok[0]:
		return ReasonReplayed, nil
	}
	return "", nil
}

// admissible verifies rj against sources and returns the delivery to
// store with what verification found, or why it cannot be admitted.
func admissible(rj hookbox.Rejection, sources map[string]Source) (hookbox.Delivery, verify.Result, string) {
	src, ok := sources[rj.Source]
	if !ok {
		return hookbox.Delivery{}, verify.Result{}, ReasonNoSource
	}
	if why := allowedAddress(rj.RemoteAddr, src.AllowIPs); why != "" {
		return hookbox.Delivery{}, verify.Result{}, why
	}
	if slices.ContainsFunc(verify.CredentialHeaders(src.Verifier), notLogged) {
		return hookbox.Delivery{}, verify.Result{}, ReasonCredentialsNotLogged
	}
	if !rj.BodyComplete {
		return hookbox.Delivery{}, verify.Result{}, ReasonNotWhole
	}
	if rj.Reason == hookbox.ReplayReason {
		return hookbox.Delivery{}, verify.Result{}, ReasonReplayed
	}
	if src.MaxBodyBytes > 0 && int64(len(rj.Body)) > src.MaxBodyBytes {
		return hookbox.Delivery{}, verify.Result{}, ReasonTooLarge
	}
	if HeaderAltered(rj.Header) {
		return hookbox.Delivery{}, verify.Result{}, ReasonHeaderAltered
	}
	if !hookbox.IdentityEncoded(rj.Header) {
		return hookbox.Delivery{}, verify.Result{}, ReasonCompressed
	}
	body := rj.Body
	if body == nil {
		body = []byte{}
	}
	vr := verify.Request{Header: withoutCredentials(rj.Header, nil), Body: body, Now: rj.ReceivedAt}
	if err := src.Verifier.CheckHeader(vr); err != nil {
		return hookbox.Delivery{}, verify.Result{}, "still refused: " + err.Error()
	}
	res, err := src.Verifier.Verify(vr)
	if err != nil {
		return hookbox.Delivery{}, verify.Result{}, "still refused: " + err.Error()
	}
	if res.Reply != nil {
		return hookbox.Delivery{}, verify.Result{}, ReasonHandshake
	}
	d := hookbox.Delivery{
		Source: rj.Source, DeliveryID: res.DeliveryID, IDIsHash: res.IDIsHash, EventType: res.EventType,
		Header: withoutCredentials(rj.Header, verify.CredentialHeaders(src.Verifier)), Payload: body, ReceivedAt: rj.ReceivedAt,
	}
	if err := hookbox.CheckReceivable(&d); err != nil { // ingest's rule
		return hookbox.Delivery{}, verify.Result{}, err.Error()
	}
	if src.DedupesByBody {
		key := verify.BodyKey(src.Verifier, body) // as ingest keys it
		d.BodySHA256 = key[:]
	}
	if src.Route != nil {
		src.Route(&d)
	}
	return d, res, ""
}

// allowedAddress returns why a delivery recorded from remote (a
// Rejection's RemoteAddr) cannot be admitted to a source that accepts
// only the addresses in allow, or "" when it can (or allow is empty). The
// server records the client's address alone when it could tell it, and
// otherwise the connection's "host:port" (which may be a proxy's): only
// the former is a client address, as only then could the server have
// admitted the delivery.
func allowedAddress(remote string, allow []netip.Prefix) string {
	if len(allow) == 0 {
		return ""
	}
	addr, err := netip.ParseAddr(remote)
	if err != nil {
		return ReasonAddressUnknown
	}
	addr = addr.Unmap()
	for _, p := range allow {
		if p.Contains(addr) {
			return ""
		}
	}
	return ReasonAddressRefused
}

// notLogged reports whether the rejection log leaves out the header name
// (canonical) whatever the source: the credentials meant for hookbox or a
// proxy in front of it, which server.KeptHeader drops.
func notLogged(name string) bool {
	return name == "Authorization" || name == "Proxy-Authorization" || name == "Cookie"
}

// withoutCredentials returns a copy of h without the headers named in
// credentials (verify.CredentialHeaders of the source's verifier: a token
// scheme's header; basic's Authorization is never logged, see notLogged),
// and without the log's list of them (MarkCredentials), which the sender
// never sent.
// The rejection log keeps a token's header so that a re-check can verify
// it (when the body was kept whole), but the event a re-check admits must
// not hold it, just as ingest does not store it (server's keptHeader, with
// the same list): a stored header is shown and forwarded, and whoever read
// the secret could send deliveries. The other headers were filtered as
// ingest filters them when the rejection was recorded (server.KeptHeader).
func withoutCredentials(h http.Header, credentials []string) http.Header {
	if h == nil {
		return nil
	}
	out := make(http.Header, len(h))
	for k, vs := range h {
		if k != credentialsHeader && !slices.Contains(credentials, http.CanonicalHeaderKey(k)) {
			out[k] = vs
		}
	}
	return out
}
