package worker

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"slices"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/hookbox/hookbox"
)

// Controls bound how this pool works the events of one route (a source,
// or a source's named target): how many at once, how fast, in what order,
// and when to stop trying a target that keeps failing. They apply to
// routes run by a Target or two-phase handlers. The bounds are this
// pool's: several processes each apply them.
type Controls struct {
	// MaxConcurrency bounds the route's events in flight (0: only the
	// pool's Concurrency).
	MaxConcurrency int
	// Rate bounds the events started per second (0: none), with a burst of
	// one second's worth (at least one).
	Rate float64
	// ByKey runs events with the same order key one at a time, in id
	// order (hookbox.ClaimParams.ByKey); SkipDead lets a dead one release
	// its key.
	ByKey    bool
	SkipDead bool
	// CircuitAfter failed attempts in a row open the route's circuit (0:
	// never): nothing is claimed for CircuitCooldown, then one trial
	// event is; its success closes the circuit, its failure opens it
	// again for twice as long (up to MaxCooldown).
	CircuitAfter    int
	CircuitCooldown time.Duration
}

// MaxCooldown bounds how long a circuit stays open between trials.
const MaxCooldown = 10 * time.Minute

// control is a route's Controls and their running state, guarded by
// Pool.ctlMu.
type control struct {
	Controls
	name     string
	limiter  *rate.Limiter
	inflight int
	fails    int       // failed attempts in a row
	open     bool      // circuit open (or trying one event)
	until    time.Time // end of the cool-down
	cooldown time.Duration
	trial    bool   // the trial event is in flight
	trialID  int64  // and its id
	afterKey string // where the next claim by key starts (ClaimParams.AfterKey)
}

// TargetState is what a pool knows of a route with Controls.
type TargetState struct {
	Name        string    `json:"name"`
	InFlight    int       `json:"in_flight"`
	Failures    int       `json:"failures_in_a_row"`
	CircuitOpen bool      `json:"circuit_open"`
	OpenUntil   time.Time `json:"open_until,omitzero"`
	Paused      bool      `json:"paused"`
}

// SetControls sets the controls of source (a queue name, see
// hookbox.QueueName). Call it before Start.
func (p *Pool) SetControls(source string, c Controls) {
	p.ctlMu.Lock()
	defer p.ctlMu.Unlock()
	ctl := &control{Controls: c, name: source, cooldown: c.CircuitCooldown}
	if c.Rate > 0 {
		ctl.limiter = rate.NewLimiter(rate.Limit(c.Rate), max(1, int(math.Ceil(c.Rate))))
	}
	if ctl.cooldown <= 0 {
		ctl.cooldown = 10 * time.Second
	}
	p.controls[source] = ctl
}

// Targets reports the state of every route with Controls, by name.
func (p *Pool) Targets() []TargetState {
	p.ctlMu.Lock()
	defer p.ctlMu.Unlock()
	var out []TargetState
	for name, c := range p.controls {
		st := TargetState{Name: name, InFlight: c.inflight, Failures: c.fails, CircuitOpen: c.open, Paused: p.paused[name]}
		if c.open {
			st.OpenUntil = c.until
		}
		out = append(out, st)
	}
	return out
}

// IsPaused reports whether the pool has seen source paused
// (hookbox.Ops.PauseTarget) when it last read the pauses.
func (p *Pool) IsPaused(source string) bool {
	p.ctlMu.Lock()
	defer p.ctlMu.Unlock()
	return p.paused[source]
}

// pausedEvery is how often a pool reads the paused names.
const pausedEvery = 200 * time.Millisecond

// refreshPaused reads the paused names when the last read is older than
// pausedEvery. A store that cannot say keeps the last known set. The set
// keeps paused queues out of the pool's claim rounds, their slots and
// its view (TargetState); it is not what holds their events back: the
// store checks the pause in every claim and pick itself (see
// hookbox.Queue.Claim), so a set that is stale or was never read (a
// first read that failed at start) costs claims that take nothing, never
// a paused queue's delivery.
func (p *Pool) refreshPaused(ctx context.Context) {
	p.ctlMu.Lock()
	stale := time.Since(p.pausedRead) >= pausedEvery
	p.ctlMu.Unlock()
	if !stale {
		return
	}
	// Bounded: a database that stops answering must not hold the claim
	// loop (nor a pooled connection) for long over a read this small.
	rctx, cancel := context.WithTimeout(ctx, time.Second)
	ps, err := p.q.Paused(rctx)
	cancel()
	p.logErr("read paused targets", err)
	if err != nil {
		return
	}
	set := make(map[string]bool, len(ps))
	for _, x := range ps {
		set[x.Name] = true
	}
	p.ctlMu.Lock()
	p.paused, p.pausedRead = set, time.Now()
	p.ctlMu.Unlock()
}

// active returns the names of list that are not paused.
func (p *Pool) active(list []string) []string {
	p.ctlMu.Lock()
	defer p.ctlMu.Unlock()
	if len(p.paused) == 0 {
		return list
	}
	out := make([]string, 0, len(list))
	for _, s := range list {
		if !p.paused[s] {
			out = append(out, s)
		}
	}
	return out
}

// controlled splits sources into those without Controls and those with.
func (p *Pool) controlled(sources []string) (plain []string, ctl []*control) {
	p.ctlMu.Lock()
	defer p.ctlMu.Unlock()
	for _, s := range sources {
		if c, ok := p.controls[s]; ok {
			ctl = append(ctl, c)
		} else {
			plain = append(plain, s)
		}
	}
	return plain, ctl
}

// allowance is how many events of c may be claimed now (at most limit),
// and, when none may, how long until one may (0: when one finishes).
func (p *Pool) allowance(c *control, limit int, now time.Time) (int, time.Duration) {
	p.ctlMu.Lock()
	defer p.ctlMu.Unlock()
	if c.open {
		switch {
		case now.Before(c.until):
			return 0, c.until.Sub(now)
		case c.trial:
			return 0, 0
		}
		limit = 1 // the trial
	}
	if c.MaxConcurrency > 0 {
		limit = min(limit, c.MaxConcurrency-c.inflight)
	}
	if c.limiter != nil && limit > 0 {
		tokens := int(c.limiter.TokensAt(now))
		if tokens < 1 {
			r := c.limiter.ReserveN(now, 1)
			wait := r.DelayFrom(now)
			r.CancelAt(now)
			return 0, max(wait, time.Millisecond)
		}
		limit = min(limit, tokens)
	}
	return max(limit, 0), 0
}

// control returns the Controls of source, or nil.
func (p *Pool) control(source string) *control {
	p.ctlMu.Lock()
	defer p.ctlMu.Unlock()
	return p.controls[source]
}

// allows reports whether c allows a claim of one event now (a strict
// source's); when it does not, it lowers *wait to when it may, if that is
// known and sooner.
func (p *Pool) allows(c *control, wait *time.Duration) bool {
	n, d := p.allowance(c, 1, time.Now())
	if n == 0 && d > 0 && (*wait == 0 || d < *wait) {
		*wait = d
	}
	return n > 0
}

// afterKey is where c's next claim by key starts.
func (p *Pool) afterKey(c *control) string {
	p.ctlMu.Lock()
	defer p.ctlMu.Unlock()
	return c.afterKey
}

// took records that the events evs of c were claimed (perhaps none) and
// start now. cursor is the claim's hookbox.ClaimParams.KeyCursor: when
// set, the claim visited every key it may without filling up, and the
// next one starts past them all, so that keys past a long stretch of
// blocked ones are reached in turn.
func (p *Pool) took(c *control, evs []hookbox.Event, now time.Time, cursor string) {
	p.ctlMu.Lock()
	defer p.ctlMu.Unlock()
	c.afterKey = nextAfterKey(c.afterKey, evs, cursor)
	n := len(evs)
	if n == 0 {
		return
	}
	c.inflight += n
	if c.limiter != nil {
		c.limiter.AllowN(now, n)
	}
	if c.open {
		// An open circuit's claim takes one event (allowance): the trial.
		c.trial, c.trialID = true, evs[0].ID
	}
}

// nextAfterKey is where the claim after one from after that took evs
// starts its walk: the cursor when the claim set one (it is past every
// key the claim took), else after the last key taken. The walk went up
// from after, then (wrapping) up from the start, so a key taken at or
// below after was taken on the wrapped walk, and is the later one.
func nextAfterKey(after string, evs []hookbox.Event, cursor string) string {
	if cursor != "" {
		return cursor
	}
	first, wrapped := "", ""
	for _, ev := range evs {
		if ev.OrderKey > after {
			first = max(first, ev.OrderKey)
		} else {
			wrapped = max(wrapped, ev.OrderKey)
		}
	}
	switch {
	case wrapped != "":
		return wrapped
	case first != "":
		return first
	}
	return after
}

// ended records how the event id of c ended: a done outcome closes the
// circuit; CircuitAfter failures in a row, or a failed trial, open it. A
// permanent refusal (refused: the target answered that this event can
// never succeed, a 410 say) is about the event, not the target: it
// neither counts as a failure nor closes the circuit, so events the app
// turns away one by one cannot pause the others.
//
// Only the trial's own end judges the trial: events claimed before the
// circuit opened may still be running, and one of them failing after the
// trial was claimed says nothing new (it is counted, and the circuit,
// already open, stays as it is).
func (p *Pool) ended(c *control, id int64, o hookbox.Outcome, refused bool) {
	p.ctlMu.Lock()
	defer p.ctlMu.Unlock()
	c.inflight--
	wasTrial := c.trial && id == c.trialID
	if wasTrial {
		c.trial = false
	}
	switch {
	case refused:
		// Says nothing about the target's health; an open circuit's next
		// claim is a new trial.
	case o.Status == hookbox.StatusDone:
		if c.open {
			p.log.Info("target circuit closed: the trial delivery succeeded", "target", c.name)
			if p.opts.OnCircuit != nil {
				p.opts.OnCircuit(c.name, false)
			}
		}
		// Closed (by the trial, or by an event that was running before
		// the circuit opened): a trial still running is one more event.
		c.fails, c.open, c.trial, c.cooldown = 0, false, false, c.CircuitCooldown
		if c.cooldown <= 0 {
			c.cooldown = 10 * time.Second
		}
	case o.Status == "" || o.AttemptOutcome() == hookbox.AttemptReleased:
		// Not run, or not judged (given back: cut short by shutdown,
		// hookbox out of a resource of its own; a lost lease): says
		// nothing about the target.
	default:
		c.fails++
		if c.CircuitAfter <= 0 || (!wasTrial && (c.open || c.fails < c.CircuitAfter)) {
			return
		}
		if wasTrial && c.cooldown < MaxCooldown {
			// Doubled up to MaxCooldown, never shortened: a first
			// cool-down above it stays, and none wraps negative.
			c.cooldown = doubled(c.cooldown, 1, MaxCooldown)
		}
		c.open, c.until = true, time.Now().Add(c.cooldown)
		p.log.Warn("target circuit open: pausing its deliveries", "target", c.name,
			"failures_in_a_row", c.fails, "retry_in", c.cooldown.String())
		if p.opts.OnCircuit != nil {
			p.opts.OnCircuit(c.name, true)
		}
	}
}

// claimUnit is a queue claimLeased claims on its own: a plain source
// (ctl nil) or a route with Controls.
type claimUnit struct {
	name string
	ctl  *control
}

// claimLeased claims and starts events of the leased queues: plain, the
// sources without Controls, claimed together, and ctls, the routes with
// them, each claimed as its controls allow. It reports whether a claim
// took all it asked for (more may be due), and how long until a route
// that could claim nothing may claim again (0: no such wait).
//
// The slots (Options.Concurrency) are shared out first: each queue may
// fill up to an equal share of them before any queue takes more, so a
// queue can never keep another's events waiting for long. Without the
// share, a queue whose target hangs would hold every slot: its retries,
// due before anyone else's new events, would be claimed first every time
// a slot freed, and a healthy source's event would wait behind that
// whole backlog, each event of it holding a slot for its full timeout.
// With it, a queue with events due gets a slot at the next round after
// one frees (the claim loop's wait for more to free, awaitSlots, is at
// most ClaimDelay), while slots no other queue asks for still go to
// whoever has events due, the one queue of a busy pool included. A
// queue's share is counted in slots, which its work holds while it runs
// (not while its outcome is recorded). Strict sources are claimed before
// this (claimLoop), so their one event takes a slot at that round too.
// A round hands out only the slots free when it began.
//
// While a queue of all (every queue the pool serves now, due or not)
// holds no slot, the last keep of the free slots (see slotsKept) go only
// to a queue that holds none: a queue that holds slots takes more only
// while more than keep are free. So an idle queue's next event starts at
// once, even when the queues with events due, their targets hanging,
// took every slot the idle ones left them.
func (p *Pool) claimLeased(claimCtx, runCtx context.Context, inflight *sync.WaitGroup, plain []string, ctls []*control, all []string, keep int) (more bool, wait time.Duration, err error) {
	queues := len(plain) + len(ctls)
	if queues == 0 {
		return false, 0, nil
	}
	share := max(1, p.opts.Concurrency/queues)
	// free is what the round may still claim: the slots free when it
	// began, less what it claimed. Slots freed while its claims ran are
	// left to the next round, which the claim loop starts once enough
	// have freed for a claim worth its transaction (awaitSlots): taken
	// here, they were claimed one or two at a time, each claim a
	// transaction (on SQLite, the write lock ingest waits for).
	slotsFree, claimed := p.freeSlots(), 0
	free := func() int { return min(slotsFree-claimed, p.opts.BatchSize) }
	// idle counts the queues of all that hold no slot (running), as
	// last read: those the kept slots wait for.
	var running map[string]int
	idle := 0
	readRunning := func() {
		running, idle = p.slotsByQueue(), 0
		if keep > 0 {
			for _, q := range all {
				if running[q] == 0 {
					idle++
				}
			}
		}
	}
	// spare is what a claim for a queue holding held slots may take when
	// left are free: all of them when no other queue is idle, else all
	// but keep, or one at least for a queue that holds none; no more than
	// a claim takes (BatchSize).
	spare := func(left, held int) int {
		others := idle
		if held == 0 {
			others-- // itself
		}
		n := left
		if others > 0 {
			n = left - keep
			if held == 0 {
				n = max(n, min(left, 1))
			}
		}
		return min(max(n, 0), p.opts.BatchSize)
	}
	var errs []error
	// claim takes up to limit events of sources (ctl's route when ctl is
	// set, as its controls allow) and reports whether it got all it asked.
	claim := func(sources []string, ctl *control, limit int) bool {
		if ctl != nil {
			n, d := p.allowance(ctl, limit, time.Now())
			if n == 0 {
				if d > 0 && (wait == 0 || d < wait) {
					wait = d
				}
				return false
			}
			limit = n
		}
		n, err := p.runTargets(claimCtx, runCtx, inflight, sources, false, limit, ctl)
		claimed += n
		if err != nil {
			if ctl != nil {
				err = fmt.Errorf("%s: %w", ctl.name, err)
			}
			errs = append(errs, err)
			return false
		}
		if n > 0 && len(sources) == 1 {
			p.serveSeq++
			p.served[sources[0]] = p.serveSeq
		}
		more = more || n == limit
		return n == limit
	}
	// claimEach takes up to limits[i] events of each queue units[i], and
	// up to total in all, in one claim per lease (claimUnit.ctl's allowance
	// taken already), and reports whether it got all it asked. Each queue
	// that got events is served, as by a claim of its own, when serve
	// says so.
	claimEach := func(units []claimUnit, limits []int, total int, serve func(claimUnit) bool) bool {
		got := make([]int, len(units))
		taken := 0
		for _, group := range p.byLease(units) {
			if taken >= total {
				break
			}
			us, ls := make([]claimUnit, len(group)), make([]int, len(group))
			for k, i := range group {
				us[k], ls[k] = units[i], min(limits[i], total-taken)
			}
			n, err := p.runTargetsEach(claimCtx, runCtx, inflight, us, ls, total-taken)
			if err != nil {
				errs = append(errs, fmt.Errorf("claim of %d queues: %w", len(us), err))
			}
			for k, i := range group {
				got[i] = n[k]
				taken += n[k]
				claimed += n[k]
			}
		}
		for i, u := range units {
			if got[i] > 0 && serve(u) {
				p.serveSeq++
				p.served[u.name] = p.serveSeq
			}
			// As for a claim of its own: a queue that got all it asked
			// may have more due.
			more = more || got[i] > 0 && got[i] == limits[i]
		}
		more = more || taken == total
		return taken == total
	}
	always := func(claimUnit) bool { return true }
	// Every queue up to its share: those running fewest first, and among
	// equals the one whose last claim alone got events longest ago (or
	// never) first, so that each takes its turn. (A rotation advanced
	// every round came back to the same order each time a slot freed when
	// the rounds between kept the same rhythm: a healthy queue lost every
	// turn to two hanging ones until their backlogs were done.) When the
	// free slots cannot give every queue under its share its due, each is
	// claimed up to its own due in that order (a claim of several sources
	// under one limit takes the oldest events first, the backlog of a
	// hanging target's retries); else the routes with Controls each up
	// to its due and the plain sources together. Queues claimed each up
	// to its own due are claimed together, with a limit per queue
	// (hookbox.ClaimParams.Limits): one claim, one transaction, for as
	// many queues as the free slots reach, rather than one per queue
	// (with hundreds of queues a few events each, a PostgreSQL drain ran
	// at one commit per delivery). A route that claims by key is claimed
	// alone.
	readRunning()
	var under []claimUnit
	for _, s := range plain {
		if running[s] < share {
			under = append(under, claimUnit{name: s})
		}
	}
	for _, c := range ctls {
		if running[c.name] < share {
			under = append(under, claimUnit{name: c.name, ctl: c})
		}
	}
	slices.SortStableFunc(under, func(a, b claimUnit) int {
		if d := running[a.name] - running[b.name]; d != 0 {
			return d
		}
		return cmp.Compare(p.served[a.name], p.served[b.name])
	})
	// claimApart claims the first of units (queues under their share, in
	// turn) the free slots can give their due: each up to its share (and
	// its Controls' allowance), those that claim by key each alone, the
	// others in one claim (a queue alone as claim does, with the same
	// statement). It returns the units it did not reach.
	claimApart := func(units []claimUnit) []claimUnit {
		f, left := free(), slotsFree-claimed
		var batch []claimUnit
		var limits []int
		now := time.Now()
		i := 0
		for ; i < len(units) && f > 0; i++ {
			u := units[i]
			limit := min(f, share-running[u.name], spare(left, running[u.name]))
			if limit <= 0 {
				continue
			}
			if u.ctl != nil {
				n, d := p.allowance(u.ctl, limit, now)
				if n == 0 {
					if d > 0 && (wait == 0 || d < wait) {
						wait = d
					}
					continue
				}
				limit = n
			}
			if running[u.name] == 0 {
				idle-- // it holds slots once claimed (counted again at the next read)
			}
			if u.ctl != nil && u.ctl.ByKey {
				claim([]string{u.name}, u.ctl, limit)
				f, left = f-limit, left-limit
				continue
			}
			batch, limits = append(batch, u), append(limits, limit)
			f, left = f-limit, left-limit
		}
		switch len(batch) {
		case 0:
		case 1:
			claim([]string{batch[0].name}, batch[0].ctl, limits[0])
		default:
			total := 0
			for _, n := range limits {
				total += n
			}
			claimEach(batch, limits, total, always)
		}
		return units[i:]
	}
	scarce := free() < share*len(under)
	var apart []claimUnit
	for _, u := range under {
		if scarce || u.ctl != nil {
			apart = append(apart, u)
		}
	}
	for len(apart) > 0 && free() > 0 {
		// Queues that came back short left their slots to the next.
		apart = claimApart(apart)
	}
	for !scarce && len(plain) > 0 && free() > 0 {
		readRunning()
		var group []string
		held := 0 // the most any of the group holds
		for _, s := range plain {
			if running[s] < share {
				group = append(group, s)
				held = max(held, running[s])
			}
		}
		limit := min(free(), share, spare(slotsFree-claimed, held))
		if len(group) == 0 || limit <= 0 || !claim(group, nil, limit) {
			break
		}
	}
	// Then what is left but keep, to whoever has events due: the plain
	// sources and the routes with Controls (each as they allow) in one
	// claim, the oldest events first; a route that claims by key alone,
	// after. (A queue that holds no slot had its turn above.) Only the
	// kept slots need the slots held read again.
	if keep > 0 {
		readRunning()
	}
	if f := spare(slotsFree-claimed, 1); f > 0 {
		var rest []claimUnit
		var limits []int
		now := time.Now()
		for _, s := range plain {
			rest, limits = append(rest, claimUnit{name: s}), append(limits, f)
		}
		for _, c := range ctls {
			if c.ByKey {
				continue
			}
			n, d := p.allowance(c, f, now)
			if n == 0 {
				if d > 0 && (wait == 0 || d < wait) {
					wait = d
				}
				continue
			}
			rest, limits = append(rest, claimUnit{name: c.name, ctl: c}), append(limits, n)
		}
		switch {
		case len(rest) == 1:
			claim([]string{rest[0].name}, rest[0].ctl, f)
		case len(rest) == len(plain) && len(plain) > 0:
			claim(plain, nil, f) // one limit for them all, as it always was
		case len(rest) > 1:
			// A route with Controls is served as by a claim of its own,
			// which it had here before; plain sources claimed together
			// are not.
			claimEach(rest, limits, f, func(u claimUnit) bool { return u.ctl != nil })
		}
	}
	for _, c := range ctls {
		if f := spare(slotsFree-claimed, 1); f > 0 && c.ByKey {
			claim([]string{c.name}, c, f)
		}
	}
	if len(errs) > 0 {
		return more, wait, errs[0]
	}
	return more, wait, nil
}

// byLease groups the indexes of units by the lease their claims take
// (lease), in the order of units: the queues of one claim share a lease,
// and none may have a shorter one than its own policy gives it, nor a
// longer one, which would keep its events from another process for
// longer after a crash.
func (p *Pool) byLease(units []claimUnit) [][]int {
	var groups [][]int
	var leases []time.Duration
	for i, u := range units {
		l := p.lease(p.policy(u.name))
		k := slices.Index(leases, l)
		if k < 0 {
			k = len(groups)
			groups, leases = append(groups, nil), append(leases, l)
		}
		groups[k] = append(groups[k], i)
	}
	return groups
}
