package service_test

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hookbox/hookbox"
	"github.com/hookbox/hookbox/config"
	"github.com/hookbox/hookbox/effect"
	"github.com/hookbox/hookbox/internal/dbtest"
	"github.com/hookbox/hookbox/service"
	"github.com/hookbox/hookbox/verify"
)

// The test binary doubles as the server process: with HOOKBOX_CRASH_CHILD
// set it runs a hookbox service (the code `hookbox serve` runs) with a Go
// handler, so the parent can SIGKILL a real process mid-work.
func TestMain(m *testing.M) {
	if os.Getenv("HOOKBOX_CRASH_CHILD") != "" {
		os.Exit(crashChild())
	}
	os.Exit(m.Run())
}

// crashChild serves until SIGTERM. Its handler claims a licence per
// delivery id (business key) and notes every run in a file outside the
// database, so the parent can see handlers that ran more than once.
func crashChild() int {
	cfg, err := config.Parse([]byte(testConfig))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cfg.DB = os.Getenv("HOOKBOX_CRASH_DB")
	for i := range cfg.Sources {
		// A short attempt timeout makes a killed process's leases end
		// within seconds.
		cfg.Sources[i].Timeout = config.Duration(time.Second)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	svc, err := service.New(ctx, cfg, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	runs, err := os.OpenFile(os.Getenv("HOOKBOX_CRASH_RUNS"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	svc.Pool.Handle("polar", "", func(ctx context.Context, tx *hookbox.Tx, ev *hookbox.Event) error {
		fmt.Fprintln(runs, ev.DeliveryID)
		time.Sleep(200 * time.Microsecond) // widen the window for a kill mid-handler
		_, err := effect.ClaimKey(ctx, tx, ev, "licence", ev.DeliveryID)
		return err
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	if err := os.WriteFile(os.Getenv("HOOKBOX_CRASH_ADDR"), []byte(ln.Addr().String()), 0o644); err != nil {
		return 2
	}
	if err := svc.Serve(ctx, ln); err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

type child struct {
	cmd  *exec.Cmd
	addr string
}

func startChild(t *testing.T, dir, dbURL string) *child {
	t.Helper()
	addrFile := filepath.Join(dir, fmt.Sprint("addr-", time.Now().UnixNano()))
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(),
		"HOOKBOX_CRASH_CHILD=1",
		"HOOKBOX_CRASH_DB="+dbURL,
		"HOOKBOX_CRASH_RUNS="+filepath.Join(dir, "runs"),
		"HOOKBOX_CRASH_ADDR="+addrFile,
	)
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if b, err := os.ReadFile(addrFile); err == nil && len(b) > 0 {
			return &child{cmd: cmd, addr: string(b)}
		}
		if time.Now().After(deadline) {
			cmd.Process.Kill()
			t.Fatal("child did not start listening within 30s")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestSIGKILLMidWork kills the server process while handlers run, several
// times, and restarts it: every delivery that got a 202 ends done, and each
// one's business-keyed effect exists exactly once.
func TestSIGKILLMidWork(t *testing.T) {
	if testing.Short() {
		t.Skip("process-level crash test")
	}
	dbtest.Each(t, func(t *testing.T, dbURL string) {
		dir := t.TempDir()
		vc := verify.Config{Scheme: "standard-webhooks", Secrets: []string{"whsec_dGVzdC1zZWNyZXQtZm9yLWhvb2tib3g="}}
		var mu sync.Mutex
		acked := map[string]bool{}
		var seq atomic.Int64
		const kills = 3
		for round := 0; round <= kills; round++ {
			c := startChild(t, dir, dbURL)
			url := "http://" + c.addr + "/webhooks/polar"
			var wg sync.WaitGroup
			stopSending := make(chan struct{})
			for range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					client := &http.Client{Timeout: 5 * time.Second}
					for {
						select {
						case <-stopSending:
							return
						default:
						}
						n := seq.Add(1)
						// Every third delivery repeats an earlier id, as a sender's retry would.
						id := fmt.Sprint("msg_", n)
						if n%3 == 0 {
							id = fmt.Sprint("msg_", n-1)
						}
						body := []byte(fmt.Sprintf(`{"type":"order.paid","n":%d}`, n))
						if n%3 == 0 {
							body = []byte(fmt.Sprintf(`{"type":"order.paid","n":%d}`, n-1))
						}
						hdr, _ := verify.Sign(vc, body, id, time.Now())
						req, _ := http.NewRequest(http.MethodPost, url, bytes.NewReader(body))
						req.Header = hdr
						resp, err := client.Do(req)
						if err != nil {
							continue // the server died under us: not acknowledged
						}
						resp.Body.Close()
						if resp.StatusCode == http.StatusAccepted {
							mu.Lock()
							acked[id] = true
							mu.Unlock()
						}
					}
				}()
			}
			if round < kills {
				time.Sleep(time.Duration(300+100*round) * time.Millisecond)
				c.cmd.Process.Signal(syscall.SIGKILL)
				c.cmd.Wait()
				close(stopSending)
				wg.Wait()
				continue
			}
			// Last round: stop sending, let the queue drain, stop cleanly.
			time.Sleep(300 * time.Millisecond)
			close(stopSending)
			wg.Wait()
			s := dbtest.Open(t, dbURL)
			waitDrained(t, s, len(acked))
			c.cmd.Process.Signal(syscall.SIGTERM)
			if err := c.cmd.Wait(); err != nil {
				t.Errorf("clean stop: %v", err)
			}
			checkEffects(t, s, dir, acked)
		}
	})
}

// waitDrained waits until no event is unfinished.
func waitDrained(t *testing.T, s dbtest.Store, acked int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		pending, err := s.Events(context.Background(), hookbox.Filter{Status: hookbox.StatusPending, Limit: 1})
		if err != nil {
			t.Fatal(err) // not drained: an error lists no event
		}
		processing, err := s.Events(context.Background(), hookbox.Filter{Status: hookbox.StatusProcessing, Limit: 1})
		if err != nil {
			t.Fatal(err)
		}
		if len(pending) == 0 && len(processing) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("queue not drained after 60s (%d acknowledged)", acked)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func checkEffects(t *testing.T, s dbtest.Store, dir string, acked map[string]bool) {
	t.Helper()
	all, err := s.Events(context.Background(), hookbox.Filter{Source: "polar", Limit: 1 << 30})
	if err != nil {
		t.Fatal(err)
	}
	stored := map[string]hookbox.Event{}
	for _, e := range all {
		stored[e.DeliveryID] = e
	}
	missing, notDone := 0, 0
	for id := range acked {
		e, ok := stored[id]
		if !ok {
			missing++
			continue
		}
		if e.Status != hookbox.StatusDone {
			notDone++
		}
	}
	runs, _ := os.ReadFile(filepath.Join(dir, "runs"))
	reruns := bytes.Count(runs, []byte("\n")) - len(stored)
	t.Logf("acknowledged %d, stored %d, handler runs beyond one per event %d", len(acked), len(stored), reruns)
	if len(acked) == 0 {
		t.Fatal("no delivery was acknowledged")
	}
	if missing != 0 || notDone != 0 {
		t.Fatalf("%d acknowledged deliveries missing, %d not done", missing, notDone)
	}
	// Exactly one licence per stored event, however often its handler ran.
	licences := countKeys(t, s, "licence")
	if licences != len(stored) {
		t.Fatalf("%d licences for %d events, want exactly one each", licences, len(stored))
	}
}

// countKeys counts business keys of scope.
func countKeys(t *testing.T, s dbtest.Store, scope string) int {
	t.Helper()
	n := -1
	err := s.InTx(context.Background(), func(ctx context.Context, tx *hookbox.Tx) error {
		return tx.QueryRowContext(ctx, `SELECT count(*) FROM effect_keys WHERE scope = $1`, scope).Scan(&n)
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}
