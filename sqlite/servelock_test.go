//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package sqlite

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// TestServingRefusesASecondServer: a store opened to serve a file
// (Options.Serving) refuses a second one, in this process or another,
// naming the process that serves it, while stores that only read or change
// events open beside it; once the server closes, or its process dies, the
// next one serves. Before, two `hookbox serve` processes ran on one file
// without a word, each waking only its own workers.
func TestServingRefusesASecondServer(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "hookbox.db")
	first, err := Open(ctx, path, Options{Serving: true})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()

	_, err = Open(ctx, path, Options{Serving: true})
	if err == nil {
		t.Fatal("a second store served the file beside the first, in one process")
	}
	for _, want := range []string{"another store of this process already serves " + path, "one hookbox serve per SQLite file", "PostgreSQL"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refusal %q does not say %q", err, want)
		}
	}
	side, err := Open(ctx, path, Options{Existing: true})
	if err != nil {
		t.Fatalf("a command's store beside the server: %v", err)
	}
	side.Close()

	// Another process: it names the pid.
	child := exec.Command(os.Args[0], "-test.run=^TestServingLockHelper$")
	child.Env = append(os.Environ(), "HOOKBOX_SERVE_LOCK_HELPER="+path)
	child.Stderr = os.Stderr
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	// Its stdin stays open: it waits on it once it serves.
	if _, err := child.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	defer child.Process.Kill()
	lines := bufio.NewScanner(out)
	next := func() string {
		if !lines.Scan() {
			t.Fatalf("the helper process ended: %v", lines.Err())
		}
		return lines.Text()
	}
	if got, want := next(), fmt.Sprintf("process %d already serves %s", os.Getpid(), path); !strings.Contains(got, want) {
		t.Fatalf("the helper, while this process serves the file: %q, want %q", got, want)
	}
	first.Close()
	if got := next(); got != "serving" {
		t.Fatalf("helper, after this process closed its store: %s", got)
	}
	_, err = Open(ctx, path, Options{Serving: true})
	if want := fmt.Sprintf("process %d already serves %s", child.Process.Pid, path); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("while the helper serves: %v, want %q", err, want)
	}
	// The helper dies without closing anything (it waits on its stdin,
	// still open): its lock goes with it.
	child.Process.Kill()
	child.Wait()
	again, err := Open(ctx, path, Options{Serving: true})
	if err != nil {
		t.Fatalf("after the serving process died: %v", err)
	}
	again.Close()
}

// TestServingLockHelper is TestServingRefusesASecondServer's other
// process: it tries to serve the file, prints the refusal, waits for a
// for the lock to be let go, then serves it and prints "serving", and waits
// to be killed.
func TestServingLockHelper(t *testing.T) {
	path := os.Getenv("HOOKBOX_SERVE_LOCK_HELPER")
	if path == "" {
		t.Skip("the other process of TestServingRefusesASecondServer")
	}
	ctx := context.Background()
	_, err := Open(ctx, path, Options{Serving: true})
	fmt.Println(strings.ReplaceAll(fmt.Sprint(err), "\n", " "))
	for {
		s, err := Open(ctx, path, Options{Serving: true})
		if err == nil {
			defer s.Close()
			break
		}
		if !strings.Contains(err.Error(), "already serves") {
			fmt.Println(err)
			return
		}
		waitForLock(path)
	}
	fmt.Println("serving")
	bufio.NewReader(os.Stdin).ReadString('\n')
}

// waitForLock returns once no store serves path: it waits for the serve
// lock on a descriptor of its own, and lets it go.
func waitForLock(path string) {
	f, err := os.OpenFile(path+"-serve.lock", os.O_RDWR, 0)
	if err != nil {
		return
	}
	defer f.Close()
	for syscall.Flock(int(f.Fd()), syscall.LOCK_EX) == syscall.EINTR {
	}
}
