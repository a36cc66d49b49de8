package service

import (
	"context"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/config"
	"github.com/hookbox/hookbox/redact"
	"github.com/hookbox/hookbox/routing"
	"github.com/hookbox/hookbox/server"
	"github.com/hookbox/hookbox/target"
	"github.com/hookbox/hookbox/worker"
)

// routeTargets registers the named targets of every source in pool: each
// target's deliveries are the queue name "source/target", run by its
// forward or exec under its own policy and controls.
func routeTargets(cfg *config.Config, pool *worker.Pool, red *redact.Redactor) error {
	for _, src := range cfg.Sources {
		for _, t := range src.Targets {
			name := hookbox.QueueName(src.Name, t.Name)
			tg, err := target.FromTarget(src, t, red)
			if err != nil {
				return err
			}
			pool.SetPolicy(name, t.Policy(src))
			pool.Route(name, tg)
			after, cooldown := t.Circuit()
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
// gives each the routes its targets' filters pick (see package routing).
func withRoutes(cfg *config.Config, ingest server.IngestFunc) server.IngestFunc {
	tables := map[string]*routing.Table{}
	for _, src := range cfg.Sources {
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
		return ingest
	}
	return func(ctx context.Context, d hookbox.Delivery) (hookbox.Receipt, error) {
		if t, ok := tables[d.Source]; ok {
			d.FanOut = true
			d.Routes = t.Routes(d.EventType, d.Header, d.Payload)
		}
		return ingest(ctx, d)
	}
}

// queueNames are the configured sources and their targets' queue names:
// the values a metrics label may take.
func queueNames(cfg *config.Config) []string {
	var names []string
	for _, src := range cfg.Sources {
		names = append(names, src.Name)
		for _, t := range src.Targets {
			names = append(names, hookbox.QueueName(src.Name, t.Name))
		}
	}
	return names
}
