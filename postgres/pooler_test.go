package postgres_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/postgres/pgtest"
)

// strictPooler stands in for a connection pooler such as PgBouncer in
// front of the server at upstream: it refuses a connection whose startup
// message carries a parameter it does not know, as PgBouncer does unless
// configured with ignore_startup_parameters, and otherwise relays the
// bytes both ways. It returns its address and the parameters it refused.
func strictPooler(t *testing.T, upstream string) (addr string, refused func() []string) {
	t.Helper()
	known := map[string]bool{"user": true, "database": true, "application_name": true, "client_encoding": true,
		"datestyle": true, "timezone": true, "standard_conforming_strings": true,
		"search_path": true} // the tests' own schema; PgBouncer can track it (track_extra_parameters)
	var mu sync.Mutex
	var bad []string
	addr = pgtest.ServeConns(t, func(c net.Conn) {
		var n uint32
		if binary.Read(c, binary.BigEndian, &n) != nil || n < 8 || n > 10000 {
			return
		}
		msg := make([]byte, n-4)
		if _, err := io.ReadFull(c, msg); err != nil {
			return
		}
		fields := bytes.Split(bytes.TrimRight(msg[4:], "\x00"), []byte{0})
		for i := 0; i+1 < len(fields); i += 2 {
			if name := string(fields[i]); !known[name] {
				mu.Lock()
				bad = append(bad, name)
				mu.Unlock()
				e := []byte("SFATAL\x00C08P01\x00Munsupported startup parameter: " + name + "\x00\x00")
				reply := binary.BigEndian.AppendUint32([]byte{'E'}, uint32(4+len(e)))
				c.Write(append(reply, e...))
				return
			}
		}
		up, err := net.Dial("tcp", upstream)
		if err != nil {
			return
		}
		defer up.Close()
		up.Write(binary.BigEndian.AppendUint32(nil, n))
		up.Write(msg)
		go io.Copy(up, c)
		io.Copy(c, up)
	})
	return addr, func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), bad...)
	}
}

// TestConnectsThroughStrictPooler: hookbox's session settings (synchronous
// commits, no JIT, custom plans) are made by statements once connected, so
// a pooler that refuses unknown startup parameters lets it in, and the
// settings hold in its sessions. A jit or plan_cache_mode in the URL is
// the operator's own choice, sent as they wrote it, and kept.
func TestConnectsThroughStrictPooler(t *testing.T) {
	t.Parallel()
	direct := pgtest.URL(t)
	u, err := url.Parse(direct)
	if err != nil {
		t.Fatal(err)
	}
	addr, refused := strictPooler(t, u.Host)
	u.Host = addr
	s := open(t, u.String())
	ctx := context.Background()
	if _, err := s.Ingest(ctx, []hookbox.Delivery{{Source: "s", DeliveryID: "1", Payload: []byte(`{}`)}}); err != nil {
		t.Fatalf("ingest through the pooler: %v", err)
	}
	if jit, sync, plans := settings(t, s); jit != "off" || sync != "on" || plans != "force_custom_plan" {
		t.Errorf("session settings jit=%s synchronous_commit=%s plan_cache_mode=%s, want off, on and force_custom_plan", jit, sync, plans)
	}
	if r := refused(); len(r) > 0 {
		t.Errorf("the pooler refused startup parameters %v", r)
	}

	if jit, _, plans := settings(t, open(t, direct+"&jit=on&plan_cache_mode=auto")); jit != "on" || plans != "auto" {
		t.Errorf("jit=on and plan_cache_mode=auto in the URL: session has jit=%s plan_cache_mode=%s", jit, plans)
	}
}

// settings returns jit, synchronous_commit and plan_cache_mode as a
// session of s has them.
func settings(t *testing.T, s interface {
	InTx(context.Context, func(context.Context, *hookbox.Tx) error) error
}) (jit, sync, plans string) {
	t.Helper()
	if err := s.InTx(context.Background(), func(ctx context.Context, tx *hookbox.Tx) error {
		return tx.QueryRowContext(ctx, `SELECT current_setting('jit'), current_setting('synchronous_commit'),
			current_setting('plan_cache_mode')`).Scan(&jit, &sync, &plans)
	}); err != nil {
		t.Fatal(err)
	}
	return jit, sync, plans
}
