package effect_test

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/effect"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/postgres/pgtest"
)

// TestLongKeys: on both stores, a key of any length is claimed once and
// then refused, by ClaimKey and by RecordSend. PostgreSQL's btree holds
// at most about 2.7 KB per index row, so a long key that does not
// compress used to fail every attempt (and its event went dead). Two long
// keys that differ only at the end are two keys, and a long key that was
// claimed as it is (it compressed below the limit) is still found.
func TestLongKeys(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		random := randomText(t, 6000)
		other := random[:len(random)-1] + "!"
		repeated := strings.Repeat("ab", 5000) // compresses: always storable as it is
		for _, key := range []string{random, other, repeated, "é" + random} {
			if !claimKey(t, s, "order", key) {
				t.Errorf("first claim of a %d-byte key refused", len(key))
			}
			if claimKey(t, s, "order", key) {
				t.Errorf("second claim of a %d-byte key accepted", len(key))
			}
			if !recordSend(t, s, "email", key) {
				t.Errorf("first send for a %d-byte key refused", len(key))
			}
			if recordSend(t, s, "email", key) {
				t.Errorf("second send for a %d-byte key recorded", len(key))
			}
		}
		evs, err := s.Events(context.Background(), hookbox.Filter{Source: effect.SendSource("email")})
		if err != nil || len(evs) != 4 {
			t.Fatalf("email sends: %d, %v; want 4", len(evs), err)
		}
	})
}

// TestLongScopeRefused: a scope (or send kind) over 1,024 bytes is a
// programming error, refused with an error that says so on both stores.
func TestLongScopeRefused(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		err := s.InTx(context.Background(), func(ctx context.Context, tx *hookbox.Tx) error {
			_, err := effect.ClaimKey(ctx, tx, nil, strings.Repeat("s", 1025), "k")
			return err
		})
		if err == nil || !strings.Contains(err.Error(), "1024") {
			t.Errorf("claim with a 1,025-byte scope: %v; want an error naming the limit", err)
		}
	})
}

func claimKey(t *testing.T, s dbtest.Store, scope, key string) bool {
	t.Helper()
	var first bool
	err := s.InTx(context.Background(), func(ctx context.Context, tx *hookbox.Tx) error {
		var err error
		first, err = effect.ClaimKey(ctx, tx, nil, scope, key)
		return err
	})
	if err != nil {
		t.Fatalf("claim of a %d-byte key: %.300v", len(key), err)
	}
	return first
}

func randomText(t *testing.T, n int) string {
	b := make([]byte, n*3/4)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return base64.StdEncoding.EncodeToString(b)
}

// TestLongKeyOfASendRecordedBeforeKeys: on PostgreSQL, a send an older
// hookbox recorded without claiming a key, under a long key that
// compressed below the index's limit (so its row holds the key as it
// is), still keeps RecordSend from recording that key again under the
// shortened id.
func TestLongKeyOfASendRecordedBeforeKeys(t *testing.T) {
	s := dbtest.Open(t, pgtest.URL(t))
	key := strings.Repeat("ab", 2000) // 4,000 bytes that compress
	err := s.InTx(context.Background(), func(ctx context.Context, tx *hookbox.Tx) error {
		// What an older hookbox's RecordSend wrote: the event, no key.
		_, err := tx.ExecContext(ctx, `WITH d AS (INSERT INTO event_data (source, delivery_id, payload, created_at)
            VALUES ($1, $2, '{}', $3) RETURNING id)
        INSERT INTO queue (id, source, next_attempt_at, updated_at) SELECT id, $1, $3, $3 FROM d`,
			effect.SendSource("email"), key, time.Now())
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if recordSend(t, s, "email", key) {
		evs, _ := s.Events(context.Background(), hookbox.Filter{Source: effect.SendSource("email")})
		t.Errorf("the send recorded before keys for this %d-byte key was recorded again: %d sends queued", len(key), len(evs))
	}
}

// TestKeysNotText: keys with a NUL byte or bytes that are not UTF-8 (a key
// built from a payload's "\u0000") are claimed and recorded once, on both
// stores, and keys that differ only in those bytes are told apart. On
// PostgreSQL, whose text holds neither, every such claim failed, and the
// event went dead after its attempts.
func TestKeysNotText(t *testing.T) {
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		s := dbtest.Open(t, dbURL)
		long := randomText(t, 6000)
		for _, key := range []string{"ord\x00_1", "ord_\xff", "ord_\xfe", "\xff" + long, "\xfe" + long} {
			if !claimKey(t, s, "order", key) {
				t.Errorf("first claim of %.20q refused", key)
			}
			if claimKey(t, s, "order", key) {
				t.Errorf("second claim of %.20q accepted", key)
			}
			if !recordSend(t, s, "email", key) {
				t.Errorf("first send for %.20q refused", key)
			}
			if recordSend(t, s, "email", key) {
				t.Errorf("second send for %.20q recorded", key)
			}
		}
	})
}
