package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/storetest"
	"github.com/hookbox/hookbox/verify"
)

// TestPurgeStoppedSaysHowToGoOn: a purge stopped after its first batch
// (cancelled, as Ctrl-C would) says, after what it deleted and the
// part-way note, that running it again is safe; with --json, where the
// reply used to read as a finished purge's, it adds "stopped",
// "deleted_count" (exactly the events gone), "error" and "rerun". Both
// exit non-zero.
func TestPurgeStoppedSaysHowToGoOn(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		cliNeedOps(t, st)
		names := make([]string, 2500) // more than two batches on both stores (250 and 1000)
		for i := range names {
			names[i] = fmt.Sprint("p", i)
		}
		cliSeed(t, st, "a", "t", hookbox.StatusDone, time.Now().Add(-40*24*time.Hour), names...)
		left := func() int {
			t.Helper()
			stats, err := st.Stats(context.Background(), time.Now())
			if err != nil {
				t.Fatal(err)
			}
			return stats.ByStatus[hookbox.StatusDone]
		}

		screen, err := runCLICancelled(t, " deleted", "purge", "--days", "30", "--db", dbURL)
		shown := screen[strings.LastIndex(screen, "\r")+1:]
		if err == nil || left() == len(names) || !strings.Contains(shown, partialNote) || !strings.Contains(shown, "Run the same purge again: it is safe") {
			t.Errorf("text: err %v, %d of %d left; the screen lacks the part-way note or that running it again is safe:\n%s", err, left(), len(names), shown)
		}

		before := left()
		screen, err = runCLICancelled(t, " deleted", "purge", "--days", "30", "--db", dbURL, "--json")
		var rep struct {
			Done         int    `json:"done"`
			Stopped      bool   `json:"stopped"`
			DeletedCount int    `json:"deleted_count"`
			Error        string `json:"error"`
			Rerun        string `json:"rerun"`
		}
		if jerr := json.Unmarshal([]byte(screen[strings.LastIndex(screen, "\r")+1:]), &rep); jerr != nil || err == nil {
			t.Fatalf("--json: err %v, output %v:\n%s", err, jerr, screen)
		}
		gone := before - left()
		if !rep.Stopped || gone == 0 || left() == 0 || rep.DeletedCount != gone || rep.Done != gone ||
			!strings.Contains(rep.Error, "the rest were not deleted") || !strings.Contains(rep.Rerun, "safe") {
			t.Errorf("--json: %+v; want stopped, the %d events gone counted, and that running it again is safe", rep, gone)
		}
	})
}

// TestRecheckStoppedSaysSoInJSON: a re-check whose second page fails (a
// trigger refuses to mark one of its rejections admitted) exits non-zero
// and, with --json, where the reply used to read as a finished
// re-check's, adds "stopped", "admitted_count" (every event stored),
// "error" and "rerun".
func TestRecheckStoppedSaysSoInJSON(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		const secret = "whsec_Y2xpLXJlY2hlY2stc2VjcmV0LWZvci10ZXN0"
		st := dbtest.Open(t, dbURL)
		ctx := context.Background()
		kept := storetest.SignedRejections(t, st, verify.Config{Scheme: verify.SchemeStandardWebhooks, Secrets: []string{secret}}, "polar", 150) // two pages of a re-check (100)
		dbtest.Refuse(t, dbURL, "UPDATE", "rejected_deliveries", kept[125].ID)                                                                   // for the rest of the test
		cfgPath := filepath.Join(t.TempDir(), "hookbox.yaml")
		cfg := fmt.Sprintf("sources:\n  - name: polar\n    scheme: standard-webhooks\n    secrets: [%q]\n    store_only: true\n", secret)
		if err := os.WriteFile(cfgPath, []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
		out, _, err := runCLI(t, "rejected", "recheck", "--db", dbURL, "--config", cfgPath, "--json")
		var rep struct {
			Admitted      []json.RawMessage `json:"admitted"`
			Stopped       bool              `json:"stopped"`
			AdmittedCount int               `json:"admitted_count"`
			Error         string            `json:"error"`
			Rerun         string            `json:"rerun"`
		}
		if jerr := json.Unmarshal([]byte(out), &rep); jerr != nil || err == nil {
			t.Fatalf("--json: err %v, output %v:\n%s", err, jerr, out)
		}
		evs, err := st.Events(ctx, hookbox.Filter{Source: "polar", Limit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if !rep.Stopped || rep.AdmittedCount != len(evs) || len(rep.Admitted) != len(evs) || len(evs) == 0 ||
			!strings.Contains(rep.Error, "stopped part-way") || !strings.Contains(rep.Rerun, "safe") {
			t.Errorf("--json: stopped %v, admitted_count %d, %d admitted, error %q, rerun %q; want stopped, the %d events stored counted, "+
				"and that running it again is safe", rep.Stopped, rep.AdmittedCount, len(rep.Admitted), rep.Error, rep.Rerun, len(evs))
		}
	})
}

// TestRetireStoppedSaysHowToGoOn: a retire stopped after its first slice
// (cancelled, as Ctrl-C would) says, after what it ended and the part-way
// note, that running it again is safe; with --json, where the reply used
// to read as a finished retire's, it adds "stopped", "ended_count"
// (exactly the deliveries gone dead), "error" and "rerun". Both exit
// non-zero.
func TestRetireStoppedSaysHowToGoOn(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		st := dbtest.Open(t, dbURL)
		cliNeedOps(t, st)
		names := make([]string, 3500) // more than three slices on both stores (1000)
		for i := range names {
			names[i] = fmt.Sprint("r", i)
		}
		cliSeed(t, st, "gone", "t", hookbox.StatusPending, time.Now().Add(-time.Hour), names...)
		dead := func() int {
			t.Helper()
			stats, err := st.Stats(context.Background(), time.Now())
			if err != nil {
				t.Fatal(err)
			}
			return stats.ByStatus[hookbox.StatusDead]
		}

		screen, err := runCLICancelled(t, " ended", "targets", "retire", "gone", "--yes", "--db", dbURL)
		shown := screen[strings.LastIndex(screen, "\r")+1:]
		if err == nil || dead() == 0 || dead() == len(names) || !strings.Contains(shown, partialNote) || !strings.Contains(shown, "Run the same retire again: it is safe") {
			t.Errorf("text: err %v, %d of %d dead; the screen lacks the part-way note or that running it again is safe:\n%s", err, dead(), len(names), shown)
		}

		before := dead()
		screen, err = runCLICancelled(t, " ended", "targets", "retire", "gone", "--yes", "--db", dbURL, "--json")
		var rep struct {
			Ended      int    `json:"ended"`
			Stopped    bool   `json:"stopped"`
			EndedCount int    `json:"ended_count"`
			Error      string `json:"error"`
			Rerun      string `json:"rerun"`
		}
		if jerr := json.Unmarshal([]byte(screen[strings.LastIndex(screen, "\r")+1:]), &rep); jerr != nil || err == nil {
			t.Fatalf("--json: err %v, output %v:\n%s", err, jerr, screen)
		}
		ended := dead() - before
		if !rep.Stopped || ended == 0 || dead() == len(names) || rep.EndedCount != ended || rep.Ended != ended ||
			!strings.Contains(rep.Error, "the rest were not ended") || !strings.Contains(rep.Rerun, "safe") {
			t.Errorf("--json: %+v; want stopped, the %d deliveries ended counted, and that running it again is safe", rep, ended)
		}
	})
}
