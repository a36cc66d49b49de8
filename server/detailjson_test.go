package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/server"
)

// TestEncodeEventDetailAsMarshalled: the detail written with its payload
// streamed is byte for byte what json.Marshal (and MarshalIndent, for
// hookbox events show --json) makes of it: a payload of any size, an
// empty one, a cleared one (null), and headers and attempts whose text
// holds "payload" as a key would.
func TestEncodeEventDetailAsMarshalled(t *testing.T) {
	n := 3
	for _, payload := range [][]byte{nil, {}, []byte(`{"payload":null}`), bytes.Repeat([]byte{0xff, 'a', 0}, 70000)} {
		d := server.EventDetail{
			Event: hookbox.Event{ID: 7, Source: "s", DeliveryID: `"payload":null`, Status: hookbox.StatusDead,
				Header: http.Header{"X-Payload": {`{"payload": 1}`}}},
			Attempts:       []hookbox.Attempt{{Attempt: 1, Outcome: "retry", Error: `"payload":"x"`}},
			Payload:        payload,
			Deliveries:     []hookbox.Event{{ID: 8, Source: "s/t"}},
			ReplayAttempts: &n,
		}
		for _, indent := range []bool{false, true} {
			var want []byte
			var err error
			if indent {
				want, err = json.MarshalIndent(d, "", "  ")
			} else {
				want, err = json.Marshal(d)
			}
			if err != nil {
				t.Fatal(err)
			}
			var got bytes.Buffer
			if err := server.EncodeEventDetail(&got, d, indent); err != nil {
				t.Fatalf("payload of %d bytes, indent %v: %v", len(payload), indent, err)
			}
			if !bytes.Equal(got.Bytes(), append(want, '\n')) {
				t.Errorf("payload of %d bytes, indent %v: got %d bytes, not json.Marshal's %d", len(payload), indent, got.Len(), len(want)+1)
			}
		}
	}
}

// TestAdminEventDetailStreamsPayload: GET /admin/events/{id} of an event
// with an 8 MiB payload allocates, beyond what the same request with
// ?payload=raw does (the store's read of the payload), less than half
// the payload's size. It marshalled the detail whole, its 11 MiB of
// base64 built in memory: 10 MiB more than the raw read (43 MiB for a
// payload of 32 MiB, for each request).
func TestAdminEventDetailStreamsPayload(t *testing.T) {
	const size = 8 << 20
	h := startAdmin(t, dbtest.SQLiteURL(t), adminToken)
	payload := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	rs, err := h.st.Ingest(context.Background(), []hookbox.Delivery{{Source: "big", DeliveryID: "1", Payload: payload, ReceivedAt: time.Now()}})
	if err != nil {
		t.Fatal(err)
	}
	path := fmt.Sprint("/admin/events/", rs[0].ID)
	var d server.EventDetail
	h.json("GET", path, http.StatusOK, &d)
	if !bytes.Equal(d.Payload, payload) {
		t.Fatalf("the detail's payload is %d bytes, not the %d stored", len(d.Payload), len(payload))
	}
	// allocated is what the process allocates while the reply to path is
	// read and thrown away.
	allocated := func(path string) uint64 {
		req, err := http.NewRequest("GET", h.url+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Authorization", "Bearer "+adminToken)
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		n, _ := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		runtime.ReadMemStats(&after)
		if resp.StatusCode != http.StatusOK || n < size {
			t.Fatalf("GET %s = %d, %d bytes", path, resp.StatusCode, n)
		}
		return after.TotalAlloc - before.TotalAlloc
	}
	allocated(path) // warm up connections and statement caches
	raw, detail := allocated(path+"?payload=raw"), allocated(path)
	t.Logf("an event with %d MiB of payload: %d MiB allocated for the raw payload, %d MiB for the JSON detail", size>>20, raw>>20, detail>>20)
	if detail > raw+size/2 {
		t.Errorf("the JSON detail allocated %d MiB more than the raw payload: the payload's base64 was built in memory", (detail-raw)>>20)
	}
}
