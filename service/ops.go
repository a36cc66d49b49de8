package service

import (
	"context"
	"net/http"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/config"
	"github.com/hookbox/hookbox/metrics"
	"github.com/hookbox/hookbox/server"
	"github.com/hookbox/hookbox/ui"
)

// RetentionInterval is how often serve applies retention_days,
// payload_retention_days and rejected.max_age (and once when it starts).
const RetentionInterval = time.Hour

// sourceNames lists the configured sources, the only values a metric's
// source label may take.
func sourceNames(cfg *config.Config) []string {
	names := make([]string, 0, len(cfg.Sources))
	for _, src := range cfg.Sources {
		names = append(names, src.Name)
	}
	return names
}

// registerOps adds GET /metrics, the queue statistics behind it and (when
// an admin token is configured) the admin API and the web console (/ui/)
// to the server, or to the admin listener's mux when admin_listen is set.
func (s *Service) registerOps() {
	var mux server.Mux = s.Server
	if s.Config.AdminListen != "" {
		s.Admin = http.NewServeMux()
		s.Admin.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
			http.Error(w, "no such endpoint", http.StatusNotFound)
		})
		mux = s.Admin
	}
	mux.Handle("GET /metrics", s.Metrics.Handler())
	s.Metrics.WatchStats(s.Store.Stats, metrics.DefaultStatsCache, s.log)
	s.Metrics.WatchHeldKeys(s.Store.HeldKeys, heldKeyTargets(s.Config), metrics.DefaultStatsCache, s.log)
	s.Metrics.WatchSlots(s.Pool.Slots)
	guesses := server.NewAuthLimiter(s.Config.TrustedProxyPrefixes())
	server.RegisterAdmin(mux, server.AdminConfig{
		Token:      s.Config.AdminToken,
		Guesses:    guesses,
		Store:      s.Store,
		Notify:     s.Pool.Notify,
		Logger:     s.log,
		ShowHeader: HeaderShower(s.Config),
		Recheck:    s.Recheck,

		Targets:     s.targets,
		KnownTarget: s.knownTarget,
		Works:       s.works,
	})
	ui.Register(mux, ui.Config{
		Token:      s.Config.AdminToken,
		Store:      s.Store,
		Sources:    sourceNames(s.Config),
		Deliveries: s.Metrics.DeliveryCounts,
		ShowHeader: HeaderShower(s.Config),
		Recheck:    s.Recheck,
		Notify:     s.Pool.Notify,
		Guesses:    guesses,
		Logger:     s.log,

		TrustedProxies: forwardedProtoTrusted(s.Config),
	})
}

// forwardedProtoTrusted are the peers whose X-Forwarded-Proto the console
// believes, to make its session cookie Secure behind a proxy that ends
// TLS: the local networks, where such proxies sit (admin_listen on
// loopback behind nginx, say), and trusted_proxies. The header can only
// add Secure, which a peer that lies about it withholds from itself; a
// peer on a public address not listed in trusted_proxies is not believed.
func forwardedProtoTrusted(cfg *config.Config) []netip.Prefix {
	return append(slices.Clone(server.LocalPrefixes), cfg.TrustedProxyPrefixes()...)
}

// startRetention runs runRetention in the background until ctx ends; the
// function it returns waits for it to stop.
func (s *Service) startRetention(ctx context.Context) (wait func()) {
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		s.runRetention(ctx)
	}()
	return wg.Wait
}

// runRetention applies retention once at start and then every
// RetentionInterval, until ctx ends: retention_days purges finished (done)
// events older than that many days, payload_retention_days drops the
// payloads of older done events, with their headers, order keys and
// errors, and keeps their rows (the dedupe memory).
// Dead events are never purged here: their work never succeeded. The log
// of refused deliveries is trimmed to rejected.max_age and max_count too,
// whatever the two say: each refusal written trims it, and without this
// a burst of them stayed past max_age until the next.
func (s *Service) runRetention(ctx context.Context) {
	s.retentionLoop(ctx, RetentionInterval, time.Now)
}

func (s *Service) retentionLoop(ctx context.Context, every time.Duration, now func() time.Time) {
	cfg := s.Config
	retain := cfg.RetentionDays > 0 || cfg.PayloadRetentionDays > 0
	if !retain && s.Rejections == nil {
		return
	}
	ops := s.Store
	if retain {
		s.log.Info("retention on", "retention_days", cfg.RetentionDays, "payload_retention_days", cfg.PayloadRetentionDays,
			"every", every)
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		s.retainOnce(ctx, ops, now())
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// retainOnce trims the log of refused deliveries and applies both
// retention windows as of now. A window past hookbox.MaxDays (a count
// meant as "forever") is refused with an error in the log and applies
// nothing.
func (s *Service) retainOnce(ctx context.Context, ops hookbox.Ops, now time.Time) {
	s.trimRejected(ctx)
	if ctx.Err() != nil {
		return
	}
	if days := s.Config.RetentionDays; days > 0 {
		s.purgeOld(ctx, ops, now, days)
	}
	if ctx.Err() != nil {
		return
	}
	if days := s.Config.PayloadRetentionDays; days > 0 {
		s.clearOldPayloads(ctx, ops, now, days)
	}
}

// trimRejected trims the log of refused deliveries to its bounds (the
// Recorder's clock, not now: the bounds are the ones its writes apply).
func (s *Service) trimRejected(ctx context.Context) {
	if s.Rejections == nil {
		return
	}
	n, err := s.Rejections.Trim(ctx)
	switch {
	case err != nil && ctx.Err() == nil:
		s.log.Error("rejected deliveries trim", "err", err)
	case n > 0:
		s.log.Debug("rejected deliveries trimmed", "deleted", n)
	}
}

// purgeOld deletes done events last changed more than days before now.
func (s *Service) purgeOld(ctx context.Context, ops hookbox.Ops, now time.Time, days int) {
	before, err := hookbox.DaysAgo(now, days)
	if err != nil {
		s.log.Error("retention purge refused: retention_days (or RETENTION_DAYS): " + err.Error())
		return
	}
	res, err := ops.Purge(ctx, hookbox.PurgeParams{Before: before})
	switch {
	case err != nil && ctx.Err() == nil:
		// The batches before the failure stay done: say how many.
		s.log.Error("retention purge", "err", err, "done", res.Done, "stored", res.Stored, "before", before.UTC())
	case err != nil:
		if res.Total() > 0 {
			s.log.Info("retention purge stopped by shutdown", "done", res.Done, "stored", res.Stored, "before", before.UTC(), "note", server.PurgeNote)
		}
	case res.Total() > 0:
		s.log.Info("retention purge", "done", res.Done, "stored", res.Stored, "before", before.UTC(), "note", server.PurgeNote)
	default:
		s.log.Debug("retention purge: nothing to delete", "before", before.UTC())
	}
}

// clearOldPayloads drops the payloads of done events last changed more
// than days before now, and with them their headers, order keys and
// errors (see hookbox.Ops.ClearPayloads).
func (s *Service) clearOldPayloads(ctx context.Context, ops hookbox.Ops, now time.Time, days int) {
	before, err := hookbox.DaysAgo(now, days)
	if err != nil {
		s.log.Error("payload retention refused: payload_retention_days: " + err.Error())
		return
	}
	n, err := ops.ClearPayloads(ctx, before)
	switch {
	case err != nil && ctx.Err() == nil:
		s.log.Error("payload retention", "err", err, "cleared", n, "before", before.UTC())
	case err != nil:
		if n > 0 {
			s.log.Info("payload retention stopped by shutdown: payloads, headers, order keys and errors cleared, ids and status kept", "cleared", n, "before", before.UTC())
		}
	case n > 0:
		s.log.Info("payload retention: payloads, headers, order keys and errors cleared, ids and status kept", "cleared", n, "before", before.UTC())
	default:
		s.log.Debug("payload retention: nothing to clear", "before", before.UTC())
	}
}
