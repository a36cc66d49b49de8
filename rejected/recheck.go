package rejected

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"slices"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/verify"
)

// Source is what a re-check needs of one configured source.
type Source struct {
	Verifier verify.Verifier
	// DedupesByBody sets the body hash on admitted deliveries, as ingest
	// does for such a source (config.Source.DedupesByBody).
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
}

// RecheckStore is what a re-check reads and writes.
type RecheckStore interface {
	hookbox.RejectionStore
	Ingest(ctx context.Context, ds []hookbox.Delivery) ([]hookbox.Receipt, error)
}

// RecheckParams say which kept rejections to verify again.
type RecheckParams struct {
	// IDs names rejections one by one; empty means every kept one not yet
	// admitted.
	IDs []int64
	// DryRun verifies and reports, and stores nothing.
	DryRun bool
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

// RecheckResult says what a re-check did (or, dry, would do).
type RecheckResult struct {
	Admitted []Admission `json:"admitted"`
	// Refused still fail verification under the current configuration,
	// or were not kept whole, or name a source that is not configured, or
	// came from an address the source's allow_ips do not accept.
	Refused []Refusal `json:"refused"`
	DryRun  bool      `json:"dry_run"`
}

// Reasons a re-check gives for not admitting a delivery besides the
// verifier's own.
const (
	ReasonNotWhole      = "the body was not kept whole, so the delivery cannot be verified again"
	ReasonNoSource      = "no source of this name is configured"
	ReasonAlreadyStored = "already admitted"
	// ReasonAddressRefused: the source has allow_ips and the delivery came
	// from an address outside them.
	ReasonAddressRefused = "the delivery came from an address this source does not accept (allow_ips)"
	// ReasonAddressUnknown: the source has allow_ips and the log does not
	// hold the client's address (it could not be told when the delivery
	// was refused), so it cannot be shown to be allowed.
	ReasonAddressUnknown = "the client's address is not known and this source accepts only the addresses in allow_ips"
)

// recheckPage is how many rejections one read of a re-check takes.
const recheckPage = 100

// Recheck verifies kept rejected deliveries again against sources (the
// current configuration), judging signed timestamps against the time each
// was received, and stores those that pass as ordinary events, deduplicated
// as ingest does: a delivery whose event exists already (or that passed
// twice, sent twice) is reported as a duplicate of it. Each admitted
// rejection records its event, so a second re-check skips it. A source's
// allow_ips apply as the server applies them: a delivery recorded from
// another address, or from one not told, is refused. An admitted event is
// routed as ingest routes it (Source.Route), and holds the headers ingest
// would have stored: not those that carry the source's secret
// (verify.CredentialHeaders), which the log keeps only to verify them
// again. Only deliveries whose whole body was kept can pass. The
// deliveries that pass are stored recheckPage to a transaction.
func Recheck(ctx context.Context, st RecheckStore, sources map[string]Source, p RecheckParams) (RecheckResult, error) {
	res := RecheckResult{Admitted: []Admission{}, Refused: []Refusal{}, DryRun: p.DryRun}
	if len(p.IDs) > 0 {
		var named []hookbox.Rejection
		for _, id := range p.IDs {
			rj, err := st.Rejection(ctx, id)
			switch {
			case errors.Is(err, hookbox.ErrNotFound):
				res.Refused = append(res.Refused, Refusal{RejectionID: id, Reason: "no such rejected delivery (trimmed from the log?)"})
			case err != nil:
				return res, err
			case rj.AdmittedEventID != 0:
				res.Refused = append(res.Refused, Refusal{RejectionID: id, Reason: ReasonAlreadyStored})
			default:
				named = append(named, rj)
			}
		}
		for len(named) > 0 {
			n := min(len(named), recheckPage)
			if err := recheckBatch(ctx, st, sources, p.DryRun, named[:n], &res); err != nil {
				return res, err
			}
			named = named[n:]
		}
		return res, nil
	}
	for before := int64(0); ; {
		page, err := st.Rejections(ctx, hookbox.RejectionFilter{Unadmitted: true, WithBody: true, BeforeID: before, Limit: recheckPage})
		if err != nil {
			return res, err
		}
		if err := recheckBatch(ctx, st, sources, p.DryRun, page, &res); err != nil {
			return res, err
		}
		if len(page) < recheckPage {
			return res, nil
		}
		before = page[len(page)-1].ID
	}
}

// recheckBatch verifies rjs and, unless dry, stores those that pass in one
// ingest transaction and records each one's event, adding the outcome to
// res.
func recheckBatch(ctx context.Context, st RecheckStore, sources map[string]Source, dry bool, rjs []hookbox.Rejection, res *RecheckResult) error {
	var passed []hookbox.Rejection
	var ds []hookbox.Delivery
	for _, rj := range rjs {
		d, why := admissible(rj, sources)
		if why != "" {
			res.Refused = append(res.Refused, Refusal{RejectionID: rj.ID, Reason: why})
			continue
		}
		if dry {
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
	for i, rj := range passed {
		if bad != nil {
			if why := bad.ItemError(i); why != nil {
				res.Refused = append(res.Refused, Refusal{RejectionID: rj.ID, Reason: "the store refuses it: " + why.Error()})
				continue
			}
		}
		rc := receipts[i]
		if err := st.SetRejectionAdmitted(ctx, rj.ID, rc.ID); err != nil && !errors.Is(err, hookbox.ErrNotFound) {
			return fmt.Errorf("admit rejection %d: %w", rj.ID, err)
		}
		res.Admitted = append(res.Admitted, Admission{RejectionID: rj.ID, EventID: rc.ID, Duplicate: rc.Duplicate})
	}
	return nil
}

// admissible verifies rj against sources and returns the delivery to
// store, or why it cannot be admitted.
func admissible(rj hookbox.Rejection, sources map[string]Source) (hookbox.Delivery, string) {
	src, ok := sources[rj.Source]
	if !ok {
		return hookbox.Delivery{}, ReasonNoSource
	}
	if why := allowedAddress(rj.RemoteAddr, src.AllowIPs); why != "" {
		return hookbox.Delivery{}, why
	}
	if !rj.BodyComplete {
		return hookbox.Delivery{}, ReasonNotWhole
	}
	body := rj.Body
	if body == nil {
		body = []byte{}
	}
	vr := verify.Request{Header: rj.Header, Body: body, Now: rj.ReceivedAt}
	if err := src.Verifier.CheckHeader(vr); err != nil {
		return hookbox.Delivery{}, "still refused: " + err.Error()
	}
	res, err := src.Verifier.Verify(vr)
	if err != nil {
		return hookbox.Delivery{}, "still refused: " + err.Error()
	}
	d := hookbox.Delivery{
		Source: rj.Source, DeliveryID: res.DeliveryID, IDIsHash: res.IDIsHash, EventType: res.EventType,
		Header: withoutCredentials(rj.Header, verify.CredentialHeaders(src.Verifier)), Payload: body, ReceivedAt: rj.ReceivedAt,
	}
	if err := hookbox.CheckStorable(&d); err != nil {
		return hookbox.Delivery{}, err.Error()
	}
	if src.DedupesByBody {
		sum := sha256.Sum256(body)
		d.BodySHA256 = sum[:]
	}
	if src.Route != nil {
		src.Route(&d)
	}
	return d, ""
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

// withoutCredentials returns a copy of h without the headers named in
// credentials (verify.CredentialHeaders of the source's verifier: a token
// scheme's header, basic's Authorization). The rejection log keeps those
// headers so that a re-check can verify them, but the event a re-check
// admits must not hold them, just as ingest does not store them
// (server's keptHeader, with the same list): a stored header is shown and
// forwarded, and whoever read the secret could send deliveries. The other
// headers were filtered as ingest filters them when the rejection was
// recorded (server.KeptHeader).
func withoutCredentials(h http.Header, credentials []string) http.Header {
	if h == nil {
		return nil
	}
	out := make(http.Header, len(h))
	for k, vs := range h {
		if !slices.Contains(credentials, http.CanonicalHeaderKey(k)) {
			out[k] = vs
		}
	}
	return out
}
