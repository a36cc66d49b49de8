package service

import (
	"context"
	"log/slog"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/config"
	"github.com/hookbox/hookbox/redact"
	"github.com/hookbox/hookbox/routing"
	"github.com/hookbox/hookbox/server"
	"github.com/hookbox/hookbox/target"
	"github.com/hookbox/hookbox/tracing"
	"github.com/hookbox/hookbox/worker"
)

// routeTargets registers the named targets of every source in pool: each
// target's deliveries are the queue name "source/target", run by its
// forward or exec under its own policy and controls. A go_handler
// target's deliveries wait for the Go handlers a program registers under
// that name; its controls apply to two-phase handlers (apply-only ones
// run inside transactions, several at a time, and take none; with
// order_by the pool refuses to start, see worker.Pool.Start).
func routeTargets(cfg *config.Config, pool *worker.Pool, red *redact.Redactor, log *slog.Logger) error {
	for _, src := range cfg.Sources {
		for _, t := range src.Targets {
			name := hookbox.QueueName(src.Name, t.Name)
			pool.SetPolicy(name, t.Policy(src))
			if !t.GoHandler {
				tg, err := target.FromTarget(src, t, red, log)
				if err != nil {
					return err
				}
				pool.Route(name, tracing.Attempts(tg))
			}
			after, cooldown := t.Circuit(src)
			pool.SetControls(name, worker.Controls{
				MaxConcurrency:  t.MaxConcurrency,
				Rate:            t.Rate,
				ByKey:           t.OrderBy != "",
				SkipDead:        t.OnDead == "skip",
				CircuitAfter:    after,
				CircuitCooldown: cooldown,
			})
		}
	}
	return nil
}

// withRoutes marks the deliveries of sources with named targets FanOut and
// gives each the routes its targets' filters pick (see router).
func withRoutes(cfg *config.Config, ingest server.IngestFunc) server.IngestFunc {
	route := router(cfg)
	if route == nil {
		return ingest
	}
	return func(ctx context.Context, d hookbox.Delivery) (hookbox.Receipt, error) {
		route(&d)
		return ingest(ctx, d)
	}
}

// router returns what sets, on a delivery about to be stored, how it is
// worked: a source with named targets makes it FanOut with the routes its
// targets' filters pick (see package routing); a store_only source's are
// FanOut with no routes: stored, never due. Other sources' deliveries are
// left alone. Nil when no source has named targets or store_only. Ingest
// (withRoutes) and a re-check of rejected deliveries (RecheckSources)
// both apply it, so a delivery is stored the same way by either.
func router(cfg *config.Config) func(*hookbox.Delivery) {
	tables := map[string]*routing.Table{}
	for _, src := range cfg.Sources {
		if src.StoreOnly {
			tables[src.Name] = routing.New(nil) // no routes: stored, nothing works it
			continue
		}
		if len(src.Targets) == 0 {
			continue
		}
		rules := make([]routing.Rule, len(src.Targets))
		for i, t := range src.Targets {
			rules[i] = t.Rule()
		}
		tables[src.Name] = routing.New(rules)
	}
	if len(tables) == 0 {
		return nil
	}
	return func(d *hookbox.Delivery) {
		if t, ok := tables[d.Source]; ok {
			d.FanOut = true
			d.Routes = t.Routes(d.EventType, d.DeliveryID, d.Header, d.Payload)
		}
	}
}

// metricNames are the label values of the metrics (metrics.NewQueues):
// sources, every configured source, which receive deliveries; and worked,
// the queue names whose events are worked: each named target's
// "source/target", and each source with neither targets nor store_only,
// worked by its own forward or exec, or by the Go handlers a program
// registers on Pool after New (so a source with none in the config
// counts). A source with targets or store_only stores its events as
// fan-outs (see router), never worked themselves: only its targets'
// deliveries are.
func metricNames(cfg *config.Config) (sources, worked []string) {
	for _, src := range cfg.Sources {
		sources = append(sources, src.Name)
		if src.WorkedAsItself() {
			worked = append(worked, src.Name)
		}
		for _, t := range src.Targets {
			worked = append(worked, hookbox.QueueName(src.Name, t.Name))
		}
	}
	return sources, worked
}

// heldKeyTargets are the queue names of hookbox_target_keys_held: each
// named target with order_by whose dead deliveries hold their keys
// (on_dead: hold, the default). Under on_dead: skip a dead delivery holds
// nothing, and an unordered target has no keys.
func heldKeyTargets(cfg *config.Config) []string {
	var names []string
	for _, src := range cfg.Sources {
		for _, t := range src.Targets {
			if t.OrderBy != "" && t.OnDead != "skip" {
				names = append(names, hookbox.QueueName(src.Name, t.Name))
			}
		}
	}
	return names
}

// targets lists what works each source's events: its own forward or
// exec, or its named targets, with the pauses in the database and what
// this process's pool knows of each.
func (s *Service) targets(ctx context.Context) ([]server.TargetStatus, error) {
	paused, err := s.Store.Paused(ctx)
	if err != nil {
		return nil, err
	}
	state := map[string]worker.TargetState{}
	for _, st := range s.Pool.Targets() {
		state[st.Name] = st
	}
	var out []server.TargetStatus
	add := func(name, kind string) {
		st := state[name]
		ts := server.TargetStatus{Name: name, Kind: kind, InFlight: st.InFlight, Failures: st.Failures,
			CircuitOpen: st.CircuitOpen, OpenUntil: st.OpenUntil}
		for _, p := range paused {
			if p.Name == name {
				ts.Paused, ts.PausedAt, ts.Reason = true, p.PausedAt, p.Reason
			}
		}
		out = append(out, ts)
	}
	for _, src := range s.Config.Sources {
		switch {
		case src.Forward != "":
			add(src.Name, "forward")
		case len(src.Exec) > 0:
			add(src.Name, "exec")
		}
		for _, t := range src.Targets {
			add(hookbox.QueueName(src.Name, t.Name), t.Kind())
		}
	}
	return out, nil
}

// configured finds the queue name name in the config: src is the source
// it is or belongs to (nil when it names none of the config), and t the
// target when name is one.
func (s *Service) configured(name string) (src *config.Source, t *config.Target) {
	source, target := hookbox.SplitQueueName(name)
	for i := range s.Config.Sources {
		c := &s.Config.Sources[i]
		if c.Name != source {
			continue
		}
		if target == "" {
			return c, nil
		}
		for j := range c.Targets {
			if c.Targets[j].Name == target {
				return c, &c.Targets[j]
			}
		}
	}
	return nil, nil
}

// knownTarget reports whether name is a configured target: a named
// target, or a source worked as itself (its own forward or exec, or Go
// handlers). A source with named targets, or store_only, is no target:
// its events are stored as fan-outs that no worker claims under its
// name, so a pause of that name would stop nothing (its targets' queues
// are "source/target").
func (s *Service) knownTarget(name string) bool {
	src, t := s.configured(name)
	switch {
	case src == nil:
		return false
	case t != nil:
		return true
	}
	return src.WorkedAsItself()
}

// works reports whether name's deliveries have a worker: this process's
// pool (worker.Pool.Works), or, for a go_handler target of the config or
// a source worked as itself with no forward or exec, the Go program that
// registers its handlers (serve never does, and the target is no less in
// the config for that: knownTarget).
func (s *Service) works(name string) bool {
	if s.Pool.Works(name) {
		return true
	}
	src, t := s.configured(name)
	if t != nil {
		return t.GoHandler
	}
	return src != nil && src.Forward == "" && len(src.Exec) == 0 && src.WorkedAsItself()
}

// warnUnworked logs, once, a warning for each queue name with unfinished
// deliveries that nothing in this process works (see works): a
// target or source removed from the config (or renamed, or turned
// store_only) leaves its deliveries pending, and nothing else would ever
// say so. They are left as they are: during a
// rolling deploy, a process still running the older config works them.
// The warning names the way out (hookbox targets retire) and the alert
// they keep firing: hookbox_oldest_due_seconds counts them, as the
// undelivered work they are.
func (s *Service) warnUnworked(ctx context.Context) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	names, err := s.Store.UnfinishedTargets(ctx)
	if err != nil {
		s.log.Warn("could not look for deliveries that nothing in this process works", "err", err)
		return
	}
	now := time.Now()
	for _, name := range names {
		if s.works(name) {
			s.warnUnordered(ctx, name)
			continue
		}
		b, err := s.Store.TargetBacklog(ctx, name, now)
		if err != nil {
			s.log.Warn("could not count the deliveries that nothing in this process works", "target", name, "err", err)
			continue
		}
		if b.Unfinished() == 0 {
			continue // finished since the list was read
		}
		attrs := []any{"target", name, "pending", b.Pending, "processing", b.Processing}
		if !b.OldestDue.IsZero() {
			// due_since is on the store's clock; waited is read on it too.
			attrs = append(attrs, "due_since", b.OldestDue.UTC().Format(time.RFC3339),
				"waited", b.OldestDueAge.Round(time.Second).String())
		}
		s.log.Warn(UnworkedWarning, append(attrs, "end_them_with", "hookbox --config FILE targets retire "+name)...)
	}
}

// warnUnordered logs a warning when name, a target this process works
// without order_by, has unfinished deliveries with an order key: stored
// by a process whose config orders the target (the config before this
// one, or another instance's). Ordering is the claimer's: this process
// claims them without regard to their key, several of one key at once and
// out of order, beside processes that order them. One read of the
// target's entries of the order index (Ops.KeyedUnfinished), for targets
// with unfinished deliveries only.
func (s *Service) warnUnordered(ctx context.Context, name string) {
	_, t := s.configured(name)
	if t == nil || t.OrderBy != "" || t.GoHandler || !s.Pool.Works(name) {
		return
	}
	n, err := s.Store.KeyedUnfinished(ctx, name)
	if err != nil {
		s.log.Warn("could not look for deliveries with an order key", "target", name, "err", err)
		return
	}
	if n > 0 {
		s.log.Warn(UnorderedWarning, "target", name, "keyed_unfinished", n,
			"pause_with", "hookbox targets pause "+name)
	}
}

// UnorderedWarning is the message of the start warning about a target
// this process works without order_by while deliveries of it with an
// order key wait.
const UnorderedWarning = "deliveries of a target have an order key, and this process's config has no order_by for it: " +
	"it works them without regard to their key, several of one key at once and out of order, also while a process with order_by works the key " +
	"(a rolling deploy that adds or removes order_by, or instances whose configs differ). " +
	"Give every instance the same order_by; for a deploy that changes it, pause the target (`hookbox targets pause TARGET`) " +
	"until every instance runs the new config, then resume it"

// UnworkedWarning is the message of the start warning about deliveries
// that nothing in the process works; the line names the target, its
// counts and the command that ends them.
const UnworkedWarning = "deliveries of a target wait, and nothing in this process works it " +
	"(a target or source removed or renamed in the config?): a process still running an older config works them until it stops; " +
	"if the target is gone for good, `hookbox --config FILE targets retire TARGET` ends them as dead (replayable; purge --days N --include-dead deletes them), " +
	"else put it back in the config. Until then hookbox_oldest_due_seconds counts them, and HookboxWorkStuck fires"
