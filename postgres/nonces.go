package postgres

import (
	"context"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/hookbox/hookbox"
)

var _ hookbox.NonceStore = (*Store)(nil)

// useNonces remembers nonces, or leaves the rows they conflict with as
// they are (the update changes nothing; it makes RETURNING give the row),
// and returns the body each is remembered with. The input comes sorted by
// key, so concurrent uses lock rows in one order. Under READ COMMITTED
// (UseNonces asks for it), ON CONFLICT DO UPDATE locks and reads a row's
// latest version, committed by any transaction, so a use that waited for
// another's insert of the same nonce judges against it. The same statement
// forgets a few old rows that are not among its own (skipping rows another
// use holds), so no row is changed twice. Its cut-off ($5, fromNow) is on
// the database's clock: a host whose clock is ahead of the others' would
// otherwise forget nonces they still accept, and let a replay through.
// (statement_timestamp, not clock_timestamp: the cut-off is one value, and
// the index on signed_at can serve the comparison.)
const useNonces = `WITH input AS (
    SELECT * FROM unnest($1::bytea[], $2::bytea[], $3::text[], $4::timestamptz[])
        WITH ORDINALITY AS i(nonce_sha256, body_sha256, source, signed_at, n)
), used AS (
    INSERT INTO nonces (nonce_sha256, body_sha256, source, signed_at)
    SELECT nonce_sha256, body_sha256, source, signed_at FROM input ORDER BY n
    ON CONFLICT (nonce_sha256) DO UPDATE SET signed_at = nonces.signed_at
    RETURNING nonce_sha256, body_sha256
), old AS (
    SELECT o.nonce_sha256 FROM nonces o
    WHERE o.signed_at < statement_timestamp() + $5::bigint * interval '1 microsecond' AND NOT EXISTS (SELECT 1 FROM input i WHERE i.nonce_sha256 = o.nonce_sha256)
    LIMIT $6 FOR UPDATE SKIP LOCKED
), forgotten AS (
    DELETE FROM nonces o USING old WHERE o.nonce_sha256 = old.nonce_sha256
)
SELECT nonce_sha256, body_sha256 FROM used`

// UseNonces judges ns in one statement, in a READ COMMITTED transaction
// whatever the server's default; see hookbox.NonceStore. Its commit waits
// for the WAL flush like ingest's: a delivery that turns out a duplicate
// commits no WAL of its own, so its acknowledgement would not flush an
// earlier asynchronous commit of its nonce.
func (s *Store) UseNonces(ctx context.Context, ns []hookbox.Nonce) ([]bool, error) {
	ok, err := hookbox.JudgeNonces(ns, func(first []int, keys []hookbox.NonceKey) ([][]byte, error) {
		sums, bodies, sources, signed := make([][]byte, len(first)), make([][]byte, len(first)), make([]string, len(first)), make([]time.Time, len(first))
		for j, i := range first {
			sums[j], bodies[j], sources[j], signed[j] = keys[j][:], ns[i].BodySHA256, ns[i].Source, ns[i].Signed
		}
		before, most := hookbox.NonceSweep(ns)
		kept := map[hookbox.NonceKey][]byte{}
		err := pgx.BeginTxFunc(ctx, s.pool, pgx.TxOptions{IsoLevel: pgx.ReadCommitted}, func(tx pgx.Tx) error {
			b := &pgx.Batch{}
			// A row another process holds (its connection stalled before
			// its commit) fails this batch after a while, rather than every
			// delivery with a nonce waiting behind it; and a transaction of
			// ours that stalls so ends itself, releasing what it holds.
			b.Queue(`SET LOCAL lock_timeout = '5s'`)
			b.Queue(`SET LOCAL idle_in_transaction_session_timeout = '10s'`)
			b.Queue(useNonces, sums, bodies, sources, signed, fromNow(before), most).Query(func(rows pgx.Rows) error {
				for rows.Next() {
					var k hookbox.NonceKey
					var sum, body []byte
					if err := rows.Scan(&sum, &body); err != nil {
						return err
					}
					copy(k[:], sum)
					kept[k] = body
				}
				return rows.Err()
			})
			return tx.SendBatch(ctx, b).Close()
		})
		out := make([][]byte, len(first))
		for j := range first {
			out[j] = kept[keys[j]]
		}
		return out, err
	})
	if err != nil {
		return nil, opError(ctx, "use nonces", err)
	}
	return ok, nil
}
