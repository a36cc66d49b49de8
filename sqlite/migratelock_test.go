//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package sqlite_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hookbox/hookbox/sqlite"
)

// migrateHelperEnv makes the test binary run TestConcurrentMigrateHelper
// for real, on the database file it names.
const migrateHelperEnv = "HOOKBOX_TEST_MIGRATE_HELPER"

// TestConcurrentMigrate starts several processes that open one new
// database file at the same moment, ten times over: every Open must
// succeed. Without the migration lock each process plans every migration,
// and all but one fail with "table events already exists". Processes, not
// goroutines, because the race is between processes, as when several
// hookbox commands start at once.
func TestConcurrentMigrate(t *testing.T) {
	if testing.Short() {
		t.Skip("starts helper processes")
	}
	const rounds, procs = 10, 4
	for round := range rounds {
		path := filepath.Join(t.TempDir(), "hookbox.db")
		cmds := make([]*exec.Cmd, procs)
		outs := make([]*bytes.Buffer, procs) // standard output
		errs := make([]*bytes.Buffer, procs) // standard error
		copied := make([]chan struct{}, procs)
		gos := make([]io.WriteCloser, procs)
		for i := range procs {
			cmd := exec.Command(os.Args[0], "-test.run=^TestConcurrentMigrateHelper$", "-test.count=1")
			cmd.Env = append(os.Environ(), migrateHelperEnv+"="+path)
			stdin, err := cmd.StdinPipe()
			if err != nil {
				t.Fatal(err)
			}
			stdout, err := cmd.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			outs[i], errs[i] = new(bytes.Buffer), new(bytes.Buffer)
			cmd.Stderr = errs[i]
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			cmds[i], gos[i] = cmd, stdin
			// Wait for the helper to be ready, then keep its output.
			r := bufio.NewReader(stdout)
			for {
				line, err := r.ReadString('\n')
				outs[i].WriteString(line)
				if strings.HasPrefix(line, "ready") {
					break
				}
				if err != nil {
					cmd.Wait()
					t.Fatalf("round %d: helper %d ended before it was ready: %v\n%s%s", round, i, err, outs[i], errs[i])
				}
			}
			copied[i] = make(chan struct{})
			go func() {
				defer close(copied[i])
				io.Copy(outs[i], r)
			}()
		}
		// All the helpers are waiting: let them go at once.
		for _, stdin := range gos {
			stdin.Close()
		}
		for i, cmd := range cmds {
			<-copied[i] // all read, as Wait needs
			if err := cmd.Wait(); err != nil {
				t.Errorf("round %d: helper %d: %v\n%s%s", round, i, err, outs[i], errs[i])
			}
		}
		if t.Failed() {
			return
		}
	}
}

// TestConcurrentMigrateHelper is the body of TestConcurrentMigrate; it is
// skipped unless run as its helper. It says "ready", waits for its
// standard input to close, then opens the database.
func TestConcurrentMigrateHelper(t *testing.T) {
	path := os.Getenv(migrateHelperEnv)
	if path == "" {
		t.Skip("run by TestConcurrentMigrate")
	}
	fmt.Println("ready")
	if _, err := io.Copy(io.Discard, os.Stdin); err != nil {
		t.Fatal(err)
	}
	s, err := sqlite.Open(context.Background(), path, sqlite.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
