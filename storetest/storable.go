package storetest

import (
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
)

// incompressible returns n bytes of letters and digits drawn from a fixed
// seed: text PostgreSQL cannot compress into an index entry, as it can a
// run of one letter.
func incompressible(n int) string {
	const chars = "abcdefghijklmnopqrstuvwxyz0123456789"
	r := rand.New(rand.NewPCG(uint64(n), 42))
	b := make([]byte, n)
	for i := range b {
		b[i] = chars[r.IntN(len(chars))]
	}
	return string(b)
}

// storableCase is a delivery that every store refuses alone, or that
// every store keeps.
type storableCase struct {
	name   string
	stored bool
	change func(d *hookbox.Delivery)
}

// storableCases are the deliveries a library caller may hand a store
// that the two stores used to treat differently (SQLite stored each of
// the refused ones; PostgreSQL refused them, by its own checks or by the
// SQL failing, or stored the short ones), or that failed the whole batch
// on both (an empty or repeated target), and the values at the bounds,
// which every store keeps.
var storableCases = []storableCase{
	{"source at the bound", true, func(d *hookbox.Delivery) {
		d.Source = incompressible(hookbox.MaxNameLength)
		d.DeliveryID += strings.Repeat("i", hookbox.MaxIDLength-len(d.DeliveryID))
	}},
	{"source too long", false, func(d *hookbox.Delivery) { d.Source = incompressible(hookbox.MaxNameLength + 1) }},
	{"source of 3000 bytes", false, func(d *hookbox.Delivery) { d.Source = incompressible(3000) }},
	{"source not UTF-8", false, func(d *hookbox.Delivery) { d.Source = "caf\xe9" }},
	{"source with NUL", false, func(d *hookbox.Delivery) { d.Source = "a\x00b" }},
	{"source empty", false, func(d *hookbox.Delivery) { d.Source = "" }},
	{"source named like a target's queue", false, func(d *hookbox.Delivery) { d.Source = hookbox.QueueName("alike", "app") }},
	{"source of a send", false, func(d *hookbox.Delivery) { d.Source = "send:email" }},
	{"source with a colon", false, func(d *hookbox.Delivery) { d.Source = "shop:eu" }},
	{"source named send", false, func(d *hookbox.Delivery) { d.Source = "send" }},
	{"source starting send", true, func(d *hookbox.Delivery) { d.Source = "sender" }},

	{"header not UTF-8", true, func(d *hookbox.Delivery) { d.Header = http.Header{"X-Name": {"caf\xe9"}, "X-\xe9": {"v"}} }},
	{"header name with NUL", false, func(d *hookbox.Delivery) { d.Header = http.Header{"X-\x00": {"v"}} }},
	{"header value with NUL", false, func(d *hookbox.Delivery) { d.Header = http.Header{"X-Name": {"a\x00b"}} }},
	{"header value not UTF-8 with NUL", false, func(d *hookbox.Delivery) { d.Header = http.Header{"X-Name": {"\xe9\x00"}} }},

	{"body SHA-256", true, func(d *hookbox.Delivery) {
		sum := sha256.Sum256([]byte(d.DeliveryID))
		d.BodySHA256 = sum[:]
	}},
	{"body SHA-256 empty", false, func(d *hookbox.Delivery) { d.BodySHA256 = []byte{} }},
	{"body SHA-256 short", false, func(d *hookbox.Delivery) { d.BodySHA256 = []byte("12345") }},
	{"body SHA-256 of 3000 bytes", false, func(d *hookbox.Delivery) { d.BodySHA256 = []byte(incompressible(3000)) }},

	{"received at the zero time", true, func(d *hookbox.Delivery) { d.ReceivedAt = time.Time{} }},
	{"received in the year 9999", true, func(d *hookbox.Delivery) { d.ReceivedAt = time.Date(9999, 12, 31, 0, 0, 0, 0, time.UTC) }},
	{"received in the year 10000", false, func(d *hookbox.Delivery) { d.ReceivedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }},
	{"received in the year 300000", false, func(d *hookbox.Delivery) { d.ReceivedAt = time.Date(300000, 1, 1, 0, 0, 0, 0, time.UTC) }},
	{"received in the year -5000", false, func(d *hookbox.Delivery) { d.ReceivedAt = time.Date(-5000, 1, 1, 0, 0, 0, 0, time.UTC) }},

	{"target at the bound", true, func(d *hookbox.Delivery) {
		d.Source = incompressible(hookbox.MaxNameLength)
		d.DeliveryID += strings.Repeat("i", hookbox.MaxIDLength-len(d.DeliveryID))
		d.FanOut, d.Routes = true, []hookbox.Route{
			{Target: incompressible(hookbox.MaxNameLength), OrderKey: incompressible(hookbox.MaxOrderKeyLength)},
		}
	}},
	{"target too long", false, func(d *hookbox.Delivery) {
		d.FanOut, d.Routes = true, []hookbox.Route{{Target: "a"}, {Target: incompressible(hookbox.MaxNameLength + 1)}}
	}},
	{"target of 3000 bytes", false, func(d *hookbox.Delivery) {
		d.FanOut, d.Routes = true, []hookbox.Route{{Target: incompressible(3000)}}
	}},
	{"target not UTF-8", false, func(d *hookbox.Delivery) { d.FanOut, d.Routes = true, []hookbox.Route{{Target: "caf\xe9"}} }},
	{"target with NUL", false, func(d *hookbox.Delivery) { d.FanOut, d.Routes = true, []hookbox.Route{{Target: "a\x00"}} }},
	{"target empty", false, func(d *hookbox.Delivery) { d.FanOut, d.Routes = true, []hookbox.Route{{Target: ""}} }},
	{"target twice", false, func(d *hookbox.Delivery) {
		d.FanOut, d.Routes = true, []hookbox.Route{{Target: "a"}, {Target: "b"}, {Target: "a", OrderKey: "k"}}
	}},
}

// testIngestStoresRefuseAlike: every store refuses the same deliveries
// from a library caller (hookbox.CheckStorable), each alone, by Ingest and
// by IngestTx.Add, and keeps the others, with their neighbours. Before
// the stores shared the rule SQLite stored every delivery storableCases
// refuses, PostgreSQL refused most of them, and an empty or repeated
// target failed the whole batch on both with ErrUnavailable (a 503 for
// every sender in it).
func testIngestStoresRefuseAlike(t *testing.T, s hookbox.Store) {
	ctx := context.Background()
	for _, c := range storableCases {
		t.Run(c.name, func(t *testing.T) {
			batch := func(prefix string) []hookbox.Delivery {
				d := Delivery("alike", prefix+c.name)
				c.change(&d)
				return []hookbox.Delivery{
					Delivery("alike", prefix+"before "+c.name), d, Delivery("alike", prefix+"after "+c.name),
				}
			}
			// check checks what Ingest or Add said of a batch, and
			// what the store holds of it.
			check := func(ds []hookbox.Delivery, rs []hookbox.Receipt, err error) {
				t.Helper()
				var bad []int
				if c.stored {
					if err != nil {
						t.Fatalf("error = %v, want every delivery stored", err)
					}
				} else {
					bad = []int{1}
					checkBad(t, err, bad, len(ds))
				}
				checkReceipts(t, rs, bad)
				for i, d := range ds {
					evs, err := s.Events(ctx, hookbox.Filter{DeliveryID: d.DeliveryID, Limit: 100})
					if err != nil {
						t.Fatal(err)
					}
					want := 1 // the event
					if d.FanOut {
						want += len(d.Routes) // and its deliveries
					}
					if slices.Contains(bad, i) {
						want = 0
					}
					if len(evs) != want {
						t.Errorf("delivery %.80q: %d rows stored, want %d", d.DeliveryID, len(evs), want)
					}
				}
			}
			one := batch("one-")
			rs, err := s.Ingest(ctx, one)
			check(one, rs, err)
			tx := beginIngest(t, s)
			two := batch("tx-")
			rs, err = tx.Add(ctx, two)
			if bd := (*hookbox.BadDeliveries)(nil); err != nil && !errors.As(err, &bd) {
				tx.Rollback()
				t.Fatalf("Add: %v, want at most this delivery refused", err)
			}
			if err := tx.Commit(ctx); err != nil {
				t.Fatal(err)
			}
			check(two, rs, err)
		})
	}
}

// checkReceipts checks that every delivery not in bad got a new row.
func checkReceipts(t *testing.T, rs []hookbox.Receipt, bad []int) {
	t.Helper()
	for i, r := range rs {
		if !slices.Contains(bad, i) && (r.ID == 0 || r.Duplicate) {
			t.Errorf("delivery %d: receipt %+v, want a new row", i, r)
		}
	}
}

// testIngestWithoutHeader: a delivery stored without a header (a library
// caller's) reads back with an empty header on both stores, so the admin
// API shows "headers": {} for it. SQLite kept JSON null, read as no header
// at all, where PostgreSQL kept {}.
func testIngestWithoutHeader(t *testing.T, s hookbox.Store) {
	d := Delivery("lib", "no-header")
	d.Header = nil
	r := ingest(t, s, d)
	e, err := s.Event(context.Background(), r[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	if e.Header == nil || len(e.Header) != 0 {
		t.Fatalf("Header of a delivery stored without one = %#v, want an empty, non-nil header", e.Header)
	}
	if b, _ := json.Marshal(e.Header); string(b) != "{}" {
		t.Errorf("its JSON = %s, want {}", b)
	}
}
