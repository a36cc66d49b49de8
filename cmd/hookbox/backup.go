package main

import (
	"context"
	"fmt"
	"io"
	"net/url"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hookbox/hookbox/config"
	"github.com/hookbox/hookbox/service"
	"github.com/hookbox/hookbox/sqlite"
)

func newBackupCmd(g *globalFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "backup FILE",
		Short: "Copy the SQLite database to FILE while hookbox runs (PostgreSQL: says how with pg_dump)",
		Long: `backup writes a consistent copy of the SQLite database, as of the moment it
starts, to FILE, which must be new or empty. It runs VACUUM INTO on a read-only
connection: one read transaction, beside which hookbox goes on storing and
working deliveries, and which no write makes start over (the sqlite3 shell's
.backup starts over after every write to the database, so under steady
traffic it never finishes).

The copy holds every payload and header: FILE is created readable by its
owner only (0600); keep backups in a directory only that user can read. The
copy is one file, synced to disk before backup returns. To restore it, see
docs/deploy.md: stop hookbox, remove the -wal and -shm files, put the copy in
place, run hookbox restore-ids, start hookbox. A database an older hookbox
migrated is copied as it is, at its version: a backup taken after the new
binary was installed, before it migrated the database, is still the way back.

On PostgreSQL, backup prints the pg_dump command that copies the database
and exits with an error: it copies nothing itself.`,
		Example: `  hookbox backup /backup/hookbox-$(date +%F).db --db sqlite:/var/lib/hookbox/hookbox.db
  hookbox backup /backup/hookbox-$(date +%F).dump --db "$HOOKBOX_DB"   # PostgreSQL: prints the pg_dump command`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dbURL, err := checkDBURL(g)
			if err != nil {
				return err
			}
			return backup(cmd.Context(), cmd.OutOrStdout(), dbURL, args[0])
		},
	}
}

// backup copies the SQLite database at dbURL to file and says what it
// wrote; for PostgreSQL it returns the pg_dump command to run instead.
func backup(ctx context.Context, w io.Writer, dbURL, file string) error {
	if service.IsPostgres(dbURL) {
		return fmt.Errorf("backup copies SQLite databases; this one is PostgreSQL, "+
			"whose pg_dump copies a running database consistently:\n\n  %s\n\n%s", pgDumpCommand(dbURL, file), pgDumpNote)
	}
	// A database an older hookbox migrated is copied as it is: the
	// upgrade's backup may come after the new binary was installed.
	res, err := sqlite.BackupFile(ctx, config.SQLitePath(dbURL), file, 0)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "backed up %s to %s: %s in %v\n", config.SQLitePath(dbURL), res.Path, byteSize(res.Bytes),
		res.Took.Round(time.Millisecond))
	return nil
}

// pgDumpNote says how pgDumpCommand's URL differs from hookbox's.
const pgDumpNote = "(The URL without its password, which pg_dump reads from PGPASSWORD or ~/.pgpass, " +
	"and without pgx's pool_* parameters; search_path is --schema.) To restore: pg_restore into an empty " +
	"database, then hookbox restore-ids (docs/deploy.md)."

// pgDumpCommand is the pg_dump command line that copies the PostgreSQL
// database at dbURL to file, in pg_dump's custom format, quoted for a
// POSIX shell: dbURL without its password (in its userinfo or its
// query: password=, sslpassword=), its pool_* parameters (pgx's,
// which libpq refuses) and its search_path (a server setting for pgx,
// --schema for pg_dump).
func pgDumpCommand(dbURL, file string) string {
	args := []string{"pg_dump", "--format=custom", "--file=" + shellQuote(file)}
	u, err := url.Parse(dbURL)
	// A password with an unescaped '/', '?' or '#' ends the authority
	// early: the rest of it, '@' and all, parses as the path, query or
	// fragment, where the userinfo's password is not looked for.
	if err != nil || u.Fragment != "" || u.User == nil && strings.Contains(dbURL, "@") {
		return strings.Join(append(args, `"$HOOKBOX_DB"`), " ")
	}
	if u.User != nil {
		u.User = url.User(u.User.Username())
	}
	q := u.Query()
	for k, vs := range q {
		switch {
		case strings.HasPrefix(k, "pool_"), strings.Contains(strings.ToLower(k), "password"):
			// password and sslpassword in the query are passwords as
			// much as the userinfo's (pgx and libpq read both).
			q.Del(k)
		case k == "search_path":
			for _, v := range vs {
				for _, schema := range strings.Split(v, ",") {
					if schema = strings.TrimSpace(schema); schema != "" {
						args = append(args, "--schema="+shellQuote(schema))
					}
				}
			}
			q.Del(k)
		}
	}
	u.RawQuery = q.Encode()
	return strings.Join(append(args, shellQuote(u.String())), " ")
}

// shellQuote quotes s for a POSIX shell when it needs it.
func shellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:@%+,") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// byteSize is n in bytes, kB, MB or GB (powers of 1000), as ls -lh rounds.
func byteSize(n int64) string {
	switch {
	case n < 1000:
		return fmt.Sprintf("%d bytes", n)
	case n < 1000*1000:
		return fmt.Sprintf("%.1f kB", float64(n)/1000)
	case n < 1000*1000*1000:
		return fmt.Sprintf("%.1f MB", float64(n)/1000/1000)
	}
	return fmt.Sprintf("%.2f GB", float64(n)/1000/1000/1000)
}
