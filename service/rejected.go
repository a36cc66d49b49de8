package service

import (
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/config"
	"github.com/hookbox/hookbox/rejected"
	"github.com/hookbox/hookbox/verify"
)

// RecheckSources builds, from cfg's sources, what rejected.Recheck needs
// to verify kept rejected deliveries against the current configuration
// and store those that pass as ingest would: each source's verifier, its
// allow_ips (checked against the address each rejection was recorded
// from) and the routing ingest applies (FanOut and routes for a source
// with named targets or store_only).
func RecheckSources(cfg *config.Config) (map[string]rejected.Source, error) {
	route := router(cfg)
	out := make(map[string]rejected.Source, len(cfg.Sources))
	for i, src := range cfg.Sources {
		v, err := verify.New(src.Verify())
		if err != nil {
			return nil, fmt.Errorf("sources[%d] (%s): %w", i, src.Name, err)
		}
		out[src.Name] = rejected.Source{Verifier: v, DedupesByBody: src.DedupesByBody(), AllowIPs: src.AllowedIPs(), Route: route,
			MaxBodyBytes: cfg.BodyLimit(src)}
	}
	return out, nil
}

// HeaderShower returns the function that makes headers fit to show in the
// admin API, the CLI and the UI: signature and credential values masked
// (including each hmac source's configured signature header), and cfg's
// secrets masked wherever else they appear.
func HeaderShower(cfg *config.Config) func(http.Header) http.Header {
	red := Redactor(cfg)
	var names []string
	for _, src := range cfg.Sources {
		if src.Header != "" {
			names = append(names, src.Header)
		}
	}
	return func(h http.Header) http.Header { return red.Header(h, names...) }
}

// rejectedOptions turns the config's rejected section into the recorder's
// options.
func rejectedOptions(cfg *config.Config) rejected.Options {
	r := cfg.Rejected
	return rejected.Options{MaxCount: r.MaxCount, MaxAge: time.Duration(r.MaxAge), MaxBodyBytes: r.MaxBodyBytes, Rate: r.Rate, Burst: r.Burst}
}

// Recheck verifies the kept rejected deliveries again against the
// service's configuration and stores those that now pass, waking the
// workers for them; see rejected.Recheck.
func (s *Service) Recheck(ctx context.Context, p rejected.RecheckParams) (rejected.RecheckResult, error) {
	res, err := rejected.Recheck(ctx, s.Store, s.recheckSources, p)
	for _, a := range res.Admitted {
		if !a.Duplicate && a.EventID != 0 {
			s.Pool.Notify()
			break
		}
	}
	return res, err
}

var _ rejected.RecheckStore = hookbox.Store(nil)
