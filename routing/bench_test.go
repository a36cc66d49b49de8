package routing

import (
	"fmt"
	"strings"
	"testing"
)

// stripeBody is a Stripe-like event of about 1 KiB.
var stripeBody = []byte(`{
  "id": "evt_3PqRsT2eZvKYlo2C0x8bFz1a",
  "object": "event",
  "api_version": "2024-06-20",
  "created": 1718000000,
  "type": "payment_intent.succeeded",
  "livemode": false,
  "pending_webhooks": 2,
  "request": {"id": "req_a1B2c3D4e5F6g7", "idempotency_key": "8d3c1f0e-5b7a-4c2d-9e1f-0a2b3c4d5e6f"},
  "data": {
    "object": {
      "id": "pi_3PqRsT2eZvKYlo2C0abcdefg",
      "object": "payment_intent",
      "amount": 2000,
      "amount_received": 2000,
      "capture_method": "automatic",
      "client_secret": "pi_3PqRsT2eZvKYlo2C0abcdefg_secret_xyz",
      "confirmation_method": "automatic",
      "created": 1717999990,
      "currency": "usd",
      "customer": "cus_Q1w2E3r4T5y6U7",
      "description": "Order #1042",
      "latest_charge": "ch_3PqRsT2eZvKYlo2C0hijklmn",
      "metadata": {"order_id": "1042", "cart": "c_88"},
      "payment_method": "pm_1PqRsT2eZvKYlo2CabcDEF",
      "payment_method_types": ["card", "link"],
      "receipt_email": "jenny@example.com",
      "shipping": {"name": "Jenny Rosen", "address": {"city": "Berlin", "country": "DE", "line1": "Unter den Linden 1", "postal_code": "10117"}},
      "status": "succeeded"
    }
  }
}`)

// BenchmarkRoutes routes a Stripe-like 1 KiB event with a match and an
// order_by rule, reporting allocations.
func BenchmarkRoutes(b *testing.B) {
	tab := New([]Rule{
		{Target: "billing", Types: []string{"payment_intent.*"}, OrderBy: "data.object.customer"},
		{Target: "fulfil", Match: map[string][]string{"data.object.status": {"succeeded"}}, OrderBy: "data.object.metadata.order_id"},
		{Target: "audit"},
	})
	b.ReportAllocs()
	b.SetBytes(int64(len(stripeBody)))
	for b.Loop() {
		if rs := tab.Routes("payment_intent.succeeded", "evt_1", nil, stripeBody); len(rs) != 3 || rs[0].OrderKey != "cus_Q1w2E3r4T5y6U7" || rs[1].OrderKey != "1042" {
			b.Fatalf("routes %v", rs)
		}
	}
}

// BenchmarkRepeatedNames routes a megabyte whose object at a match path
// names 2,400 members, then repeats one of them: each member is looked up
// among the names seen by a map (a walk over them took seconds).
func BenchmarkRepeatedNames(b *testing.B) {
	tab := New([]Rule{{Target: "a", Match: map[string][]string{"s": {strings.Repeat("w", 20000)}}}})
	var sb strings.Builder
	sb.WriteString(`{"s":{`)
	for i := range 2400 {
		fmt.Fprintf(&sb, `"%03x":1,`, i)
	}
	for sb.Len() < 1<<20 {
		sb.WriteString(`"95f":1,`)
	}
	sb.WriteString(`"z":1}}`)
	body := []byte(sb.String())
	b.SetBytes(int64(len(body)))
	for range b.N {
		tab.Routes("", "d", nil, body)
	}
}
