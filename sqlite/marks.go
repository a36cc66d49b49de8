package sqlite

import (
	"bufio"
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hookbox/hookbox"
)

// Marks (hookbox.Mark) are files in a directory beside the database
// (path + "-marks"), one per key, not rows: a work transaction marks while
// it holds SQLite's only write lock, so a row could not be committed before
// its handlers run. A file written without fsync outlives a crash of the
// process, which is all a mark is for: a machine that loses power loses
// the uncommitted transaction with it, and no handler caused that.
//
// A mark file holds the key and the worker, each quoted on a line of its
// own, then one line per event: its id and the attempt count it was picked
// with.

func (s *Store) marksDir() string { return s.path + "-marks" }

func (s *Store) markPath(key string) string {
	return filepath.Join(s.marksDir(), hex.EncodeToString([]byte(key)))
}

// Mark writes m's file; see hookbox.WorkTx.
func (w *workTx) Mark(_ context.Context, m hookbox.Mark) error {
	var b bytes.Buffer
	b.WriteString(strconv.Quote(m.Key) + "\n" + strconv.Quote(m.Worker) + "\n")
	for _, ev := range m.Events {
		b.WriteString(strconv.FormatInt(ev.ID, 10) + " " + strconv.Itoa(ev.Attempts) + "\n")
	}
	path := w.s.markPath(m.Key)
	err := os.WriteFile(path, b.Bytes(), 0o600)
	if errors.Is(err, fs.ErrNotExist) {
		if err = os.MkdirAll(w.s.marksDir(), 0o700); err == nil {
			err = os.WriteFile(path, b.Bytes(), 0o600)
		}
	}
	if err != nil {
		return fmt.Errorf("sqlite: mark: %w", err)
	}
	w.marked = m.Key
	return nil
}

// DropMark removes key's file (a missing one is already forgotten); see
// hookbox.Queue.
func (s *Store) DropMark(_ context.Context, key string) error {
	if err := os.Remove(s.markPath(key)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("sqlite: drop mark: %w", err)
	}
	return nil
}

// OrphanMarks reads the marks whose pool has no record; see hookbox.Queue.
func (s *Store) OrphanMarks(ctx context.Context) ([]hookbox.Mark, error) {
	files, err := os.ReadDir(s.marksDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("sqlite: marks: %w", err)
	}
	if len(files) == 0 {
		return nil, nil
	}
	live := map[string]bool{}
	rows, err := s.reader.QueryContext(ctx, `SELECT name FROM workers`)
	if err != nil {
		return nil, fmt.Errorf("sqlite: marks: %w", err)
	}
	for rows.Next() {
		var name string
		if err := rows.Scan(&name); err != nil {
			rows.Close()
			return nil, fmt.Errorf("sqlite: marks: %w", err)
		}
		live[name] = true
	}
	if err := closeRows(rows); err != nil {
		return nil, fmt.Errorf("sqlite: marks: %w", err)
	}
	var out []hookbox.Mark
	for _, f := range files {
		data, err := os.ReadFile(filepath.Join(s.marksDir(), f.Name()))
		if err != nil {
			return nil, fmt.Errorf("sqlite: marks: %w", err)
		}
		m, picked, ok := parseMark(data)
		if !ok {
			// A file cut short or not ours: nothing in it can be charged.
			os.Remove(filepath.Join(s.marksDir(), f.Name()))
			continue
		}
		if live[m.Worker] {
			continue
		}
		if m.Events, err = s.stillAsPicked(ctx, picked); err != nil {
			return nil, err
		}
		out = append(out, m)
	}
	return out, nil
}

// parseMark reads a mark file: the mark without events, and the attempt
// count each event was picked with.
func parseMark(data []byte) (hookbox.Mark, map[int64]int, bool) {
	var m hookbox.Mark
	sc := bufio.NewScanner(bytes.NewReader(data))
	var err error
	if !sc.Scan() {
		return m, nil, false
	}
	if m.Key, err = strconv.Unquote(sc.Text()); err != nil || !sc.Scan() {
		return m, nil, false
	}
	if m.Worker, err = strconv.Unquote(sc.Text()); err != nil {
		return m, nil, false
	}
	picked := map[int64]int{}
	for sc.Scan() {
		id, attempts, ok := strings.Cut(sc.Text(), " ")
		i, err1 := strconv.ParseInt(id, 10, 64)
		a, err2 := strconv.Atoi(attempts)
		if !ok || err1 != nil || err2 != nil {
			return m, nil, false
		}
		picked[i] = a
	}
	return m, picked, sc.Err() == nil
}

// markedColumns are a queued row's columns (scanQueuedEvent) with NULL in
// the payload's place, as leasedColumns are: a mark's events are read
// without their payloads (see hookbox.Queue.OrphanMarks), and whether the
// payload was cleared is still read.
var markedColumns = strings.TrimSuffix(eventColumns, ", payload") + `, NULL, length(payload) IS NULL`

// stillAsPicked reads the events of picked that are unfinished and still
// have the attempt count they were picked with.
func (s *Store) stillAsPicked(ctx context.Context, picked map[int64]int) ([]hookbox.Event, error) {
	if len(picked) == 0 {
		return nil, nil
	}
	args := make([]any, 0, len(picked))
	for id := range picked {
		args = append(args, id)
	}
	rows, err := s.reader.QueryContext(ctx, `SELECT `+markedColumns+` FROM events
        WHERE status IN ('pending', 'processing') AND id IN (`+placeholders(len(args))+`)`, args...)
	if err != nil {
		return nil, fmt.Errorf("sqlite: marks: %w", err)
	}
	defer rows.Close()
	var out []hookbox.Event
	for rows.Next() {
		e, err := scanListedEvent(rows)
		if err != nil {
			return nil, fmt.Errorf("sqlite: marks: %w", err)
		}
		if picked[e.ID] == e.Attempts {
			out = append(out, e)
		}
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sqlite: marks: %w", err)
	}
	return out, nil
}
