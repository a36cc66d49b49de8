package sqlite

import (
	"context"
	"database/sql"
	"fmt"

	"github.com/hookbox/hookbox"
)

var _ hookbox.NonceStore = (*Store)(nil)

// useNonce remembers a nonce, or leaves the row it conflicts with as it
// is (the update changes nothing; it makes RETURNING give the row). It
// returns the body the nonce is remembered with.
const useNonce = `INSERT INTO nonces (nonce_sha256, body_sha256, source, signed_at) VALUES (?1, ?2, ?3, ?4)
    ON CONFLICT (nonce_sha256) DO UPDATE SET signed_at = nonces.signed_at
    RETURNING body_sha256`

// UseNonces judges ns in one transaction on the writer connection; see
// hookbox.NonceStore.
func (s *Store) UseNonces(ctx context.Context, ns []hookbox.Nonce) ([]bool, error) {
	ok, err := hookbox.JudgeNonces(ns, func(first []int, keys []hookbox.NonceKey) ([][]byte, error) {
		kept := make([][]byte, len(first))
		err := s.inTx(ctx, func(tx *sql.Tx) error {
			for j, i := range first {
				n := &ns[i]
				if err := tx.QueryRowContext(ctx, useNonce, keys[j][:], n.BodySHA256, n.Source, millis(n.Signed)).Scan(&kept[j]); err != nil {
					return err
				}
			}
			before, most := hookbox.NonceSweep(ns)
			_, err := tx.ExecContext(ctx, `DELETE FROM nonces WHERE rowid IN
                (SELECT rowid FROM nonces WHERE signed_at < ? LIMIT ?)`, millis(before), most)
			return err
		})
		return kept, err
	})
	if err != nil {
		return nil, fmt.Errorf("sqlite: use nonces: %w", err)
	}
	return ok, nil
}
