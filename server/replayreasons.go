package server

import (
	"context"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/hookbox/hookbox"
)

// EventReader reads events, as the replay reasons need: an event, and the
// deliveries of a FanOut event.
type EventReader interface {
	Event(ctx context.Context, id int64) (hookbox.Event, error)
	Events(ctx context.Context, f hookbox.Filter) ([]hookbox.Event, error)
}

// ExpectFrom reads if_attempts from v (the admin API's query, the
// console's form) for a replay of the event id: the attempts the caller saw
// (hookbox.ReplayAttempts), as a hookbox.ReplayParams.Expect. Nil when it
// is absent; an error for a value that is not a whole number from 0, or
// for if_attempts given more than once.
func ExpectFrom(v url.Values, id int64) (map[int64]int, error) {
	if !v.Has("if_attempts") {
		return nil, nil
	}
	// Several: which the caller meant is not known (see givenOnce).
	if err := givenOnce(v, "if_attempts"); err != nil {
		return nil, err
	}
	// An empty value is refused, not taken for none: a script whose
	// variable came out empty would replay without its condition.
	n, err := strconv.Atoi(v.Get("if_attempts"))
	if err != nil || n < 0 {
		return nil, fmt.Errorf("if_attempts: want a whole number from 0 (the event's attempts as you saw them)")
	}
	return map[int64]int{id: n}, nil
}

// DeliveryLabel names the delivery e of a FanOut event with its event and
// target ("delivery 7 of event 6 (target billing)"), and any other event
// by its id ("event 7").
func DeliveryLabel(e hookbox.Event) string {
	if e.Parent == 0 {
		return "event " + strconv.FormatInt(e.ID, 10)
	}
	return fmt.Sprintf("delivery %d of event %d (target %s)", e.ID, e.Parent, e.Target)
}

// changedReason says, for an event e that the replay p left alone, whether
// it was for p.Expect: the attempts of the event named (e, or the FanOut
// event e is a delivery of) are no longer those expected. It returns the
// words ("changed since you looked …") and true then.
func changedReason(ctx context.Context, st EventReader, p hookbox.ReplayParams, e hookbox.Event) (string, bool) {
	named := e
	if _, ok := p.Expect[e.ID]; !ok {
		if _, ok := p.Expect[e.Parent]; e.Parent == 0 || !ok {
			return "", false
		}
		var err error
		if named, err = st.Event(ctx, e.Parent); err != nil {
			return "", false
		}
	}
	var ds []hookbox.Event
	if named.FanOut {
		var err error
		if ds, err = st.Events(ctx, hookbox.Filter{Parent: named.ID, Limit: MaxListLimit}); err != nil {
			return "", false
		}
	}
	have, changed := hookbox.ChangedSince(p.Expect, named, ds)
	if !changed {
		return "", false
	}
	why := fmt.Sprintf("changed since you looked (%d attempts now, %d when you looked: it was replayed or worked meanwhile); look again before replaying",
		have, p.Expect[named.ID])
	if named.ID != e.ID {
		why = "was not replayed: event " + strconv.FormatInt(named.ID, 10) + " " + why
	}
	return why, true
}

// DoneHint ends ReplaySkipReason's words for an event left alone because
// it is done: what to pass to the admin API to run it again.
const DoneHint = "pass include_done to run it again"

// SkipCause is why a replay left a named event alone, the first of these
// that holds (ReplaySkipOf). Each caller says it in its own words.
type SkipCause int

const (
	// SkipMissing: there is no such event.
	SkipMissing SkipCause = iota
	// SkipUnreadable: the event could not be read.
	SkipUnreadable
	// SkipNoPayload: payload retention cleared its payload.
	SkipNoPayload
	// SkipInFlight: a worker holds it.
	SkipInFlight
	// SkipChanged: it changed since the operator looked (p.Expect).
	SkipChanged
	// SkipDone: it is done, and the replay did not include done events.
	SkipDone
	// SkipOther: it is in another state (Event.Status says which).
	SkipOther
)

// ReplaySkip is an event a replay left alone, as it reads now, and why.
type ReplaySkip struct {
	// Event is the event; zero for SkipMissing and SkipUnreadable.
	Event hookbox.Event
	// Cause is why the replay left it alone.
	Cause SkipCause
	// Detail is the read's error for SkipUnreadable, changedReason's
	// words for SkipChanged; else empty.
	Detail string
}

// ReplaySkipOf reads id, one of the Skipped of the replay p, and finds
// why p left it alone.
func ReplaySkipOf(ctx context.Context, st EventReader, p hookbox.ReplayParams, id int64) ReplaySkip {
	e, err := st.Event(ctx, id)
	switch {
	case errors.Is(err, hookbox.ErrNotFound):
		return ReplaySkip{Cause: SkipMissing}
	case err != nil:
		return ReplaySkip{Cause: SkipUnreadable, Detail: err.Error()}
	case e.PayloadCleared:
		return ReplaySkip{Event: e, Cause: SkipNoPayload}
	case e.Status == hookbox.StatusProcessing:
		return ReplaySkip{Event: e, Cause: SkipInFlight}
	}
	if why, ok := changedReason(ctx, st, p, e); ok {
		return ReplaySkip{Event: e, Cause: SkipChanged, Detail: why}
	}
	if e.Status == hookbox.StatusDone && !p.IncludeDone {
		return ReplaySkip{Event: e, Cause: SkipDone}
	}
	return ReplaySkip{Event: e, Cause: SkipOther}
}

// ReplaySkipReason says, in the admin API's and the console's words, why
// the replay p left id (one of its Skipped) alone (ReplaySkipOf). A
// delivery of a FanOut event is named with its event and target
// (DeliveryLabel).
func ReplaySkipReason(ctx context.Context, st EventReader, p hookbox.ReplayParams, id int64) string {
	sk := ReplaySkipOf(ctx, st, p, id)
	what := DeliveryLabel(sk.Event)
	switch sk.Cause {
	case SkipMissing:
		return "no event " + strconv.FormatInt(id, 10)
	case SkipUnreadable:
		return "event " + strconv.FormatInt(id, 10) + ": could not read it: " + sk.Detail
	case SkipNoPayload:
		return what + ": " + NoPayloadReason
	case SkipInFlight:
		return what + " is being worked right now; replay it after it finishes"
	case SkipChanged:
		return what + " " + sk.Detail
	case SkipDone:
		return what + " is done; " + DoneHint
	}
	return what + " is " + string(sk.Event.Status) + " and was not replayed"
}

// NotReplayed is the message of a replay of the one event ev (named in p)
// that replayed nothing, res its result: for a FanOut event, why each of
// its deliveries was left alone; else why ev was.
func NotReplayed(ctx context.Context, st EventReader, p hookbox.ReplayParams, res hookbox.ReplayResult, ev hookbox.Event) string {
	if ev.FanOut {
		var why []string
		for _, id := range res.Skipped {
			if id != ev.ID {
				why = append(why, ReplaySkipReason(ctx, st, p, id))
			}
		}
		if len(why) > 0 {
			return "no delivery of event " + strconv.FormatInt(ev.ID, 10) + " was replayed: " + strings.Join(why, "; ")
		}
	}
	return ReplaySkipReason(ctx, st, p, ev.ID)
}
