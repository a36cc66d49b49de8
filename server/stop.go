package server

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/hookbox/hookbox"
)

// FailureStatus is the answer of the admin API and the console to a bulk
// operation (replay, purge, re-check) that failed with err: 503 with
// Retry-After, set on w, when the database could not be reached, else
// 500; why says which, in words that name no internal error (the error
// itself goes to the server log).
func FailureStatus(w http.ResponseWriter, err error) (code int, why string) {
	if errors.Is(err, hookbox.ErrUnavailable) {
		w.Header().Set("Retry-After", adminRetryAfter)
		return http.StatusServiceUnavailable, "the database was unavailable (down, or it cut the statement short); see the server log"
	}
	return http.StatusInternalServerError, "a database error; see the server log"
}

// stopWords are the words of one bulk operation's stop report
// (stopError): its name, what it works on, where the reply lists what it
// did, what that did to them, and what the rest were not.
type stopWords struct {
	op, one, many, where, done, rest, nothing string
}

var (
	replayWords  = stopWords{op: "replay", one: "event", many: "events", where: "in replayed", done: "replayed", rest: "replayed", nothing: "replayed"}
	purgeWords   = stopWords{op: "purge", one: "event", many: "events", where: "counted here", done: "deleted", rest: "deleted", nothing: "deleted"}
	recheckWords = stopWords{op: "re-check", one: "delivery", many: "deliveries", where: "in admitted", done: "stored", rest: "re-checked", nothing: "admitted"}
)

// stopError is the error of an operation that failed (why, said in
// brackets) after its committed batches did n things: those stay done,
// the rest were not.
func (sw stopWords) stopError(why string, n int) string {
	if n == 0 {
		return sw.op + " failed (" + why + "): nothing was " + sw.nothing
	}
	return fmt.Sprintf("%s stopped part-way (%s): the %d %s %s %s %s before it stopped and %s %s; the rest %s not %s",
		sw.op, why, n, plural(n, sw.one, sw.many), sw.where, plural(n, "was", "were"), sw.done,
		plural(n, "stays", "stay"), sw.done, plural(n, "was", "were"), sw.rest)
}

// plural picks the word for n things.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}
