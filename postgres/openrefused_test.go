package postgres_test

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/postgres"
	"github.com/hookbox/hookbox/postgres/pgtest"
	"github.com/hookbox/hookbox/storetest"
)

// refusalSpotter relays connections to the server at upstream and closes
// refused once the server has answered one of them with an error before
// it was ready for a query (an ErrorResponse, 'E', before ReadyForQuery:
// a refused connection, such as 53300's). It returns its address.
func refusalSpotter(t *testing.T, upstream string) (addr string, refused <-chan struct{}) {
	t.Helper()
	ch := make(chan struct{})
	var once sync.Once
	addr = pgtest.ServeConns(t, func(c net.Conn) {
		up, err := net.Dial("tcp", upstream)
		if err != nil {
			return
		}
		defer up.Close()
		go io.Copy(up, c)
		// A one-byte answer to an encryption request ('N', or 'S' or
		// 'G') may come first; then messages (a type byte, a length
		// that counts itself), up to ReadyForQuery ('Z') or an error.
		head := make([]byte, 1)
		for {
			if _, err := io.ReadFull(up, head); err != nil {
				return
			}
			if _, err := c.Write(head); err != nil {
				return
			}
			if head[0] != 'N' && head[0] != 'S' && head[0] != 'G' {
				break
			}
		}
		for {
			if head[0] == 'E' {
				once.Do(func() { close(ch) })
			}
			size := make([]byte, 4)
			if _, err := io.ReadFull(up, size); err != nil {
				return
			}
			body := make([]byte, int(binary.BigEndian.Uint32(size))-4)
			if _, err := io.ReadFull(up, body); err != nil {
				return
			}
			if _, err := c.Write(append(size, body...)); err != nil {
				return
			}
			if head[0] == 'Z' || head[0] == 'E' {
				break
			}
			if _, err := io.ReadFull(up, head); err != nil {
				return
			}
			if _, err := c.Write(head); err != nil {
				return
			}
		}
		io.Copy(c, up)
	})
	return addr, ch
}

// TestOpenWaitsOutABriefRefusal: while the server refuses hookbox's role
// a connection (SQLSTATE 53300: its CONNECTION LIMIT is reached), Open
// waits a moment and tries again, and opens the store once a connection
// is free. Before, Open failed at the first refusal, and the role's
// connections hookbox itself had just closed were enough to make one: the
// pooler check's two count until their backends end, and the store's
// first connection came a moment after (CI saw a store refused so at a
// limit of 3, with the schema made).
func TestOpenWaitsOutABriefRefusal(t *testing.T) {
	t.Parallel()
	const limit = 3
	_, dbURL := pgtest.LimitedRole(t, limit)
	u, err := url.Parse(dbURL)
	if err != nil {
		t.Fatal(err)
	}
	addr, refused := refusalSpotter(t, u.Host)
	u.Host = addr
	ctx := context.Background()
	// Another app holds every connection the role may have.
	var held []*pgx.Conn
	for range limit {
		c, err := pgx.Connect(ctx, dbURL)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, c)
	}
	opened := make(chan error, 1)
	go func() {
		s, err := postgres.Open(ctx, u.String(), postgres.Options{})
		if err == nil {
			_, err = s.Ingest(ctx, []hookbox.Delivery{storetest.Delivery("s", "1")})
			s.Close()
		}
		opened <- err
	}()
	select {
	case <-refused:
	case err := <-opened:
		t.Fatalf("Open ended before the server refused it a connection: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("the server refused no connection of Open's in a minute")
	}
	// The other app lets go once Open has been refused.
	for _, c := range held {
		c.Close(ctx)
	}
	if err := <-opened; err != nil {
		t.Fatalf("Open, with the connections freed after it was refused one: %v", err)
	}
}
