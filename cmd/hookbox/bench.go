package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/hookbox/hookbox/config"
	"github.com/hookbox/hookbox/loadgen"
	"github.com/hookbox/hookbox/service"
	"github.com/hookbox/hookbox/verify"
)

type benchFlags struct {
	targets     []string
	postgres    string
	connections int
	requests    int
	bodySize    int
	jsonOut     bool
	cpuProfile  string
}

func newBenchCmd() *cobra.Command {
	f := &benchFlags{}
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure ingest throughput and latency against a bare net/http baseline",
		Long: `bench starts each target in this process on a loopback port, sends it
unique deliveries signed (Standard Webhooks) before the clock starts, over
--connections keep-alive connections, and prints req/s and latency
percentiles. The "bare" target is net/http reading the body and answering 202:
the machine's own HTTP limit, measured in the same run, so hookbox can be read
as a ratio of it.`,
		Example: `  hookbox bench
  hookbox bench --targets bare,sqlite,postgres --postgres postgres://postgres@127.0.0.1/test`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runBench(cmd, f) },
	}
	cmd.Flags().StringSliceVar(&f.targets, "targets", []string{"bare", "sqlite"}, "what to measure, in order: bare, sqlite, postgres")
	cmd.Flags().StringVar(&f.postgres, "postgres", os.Getenv("HOOKBOX_TEST_POSTGRES"), "PostgreSQL URL for the postgres target")
	cmd.Flags().IntVar(&f.connections, "connections", 64, "concurrent connections")
	cmd.Flags().IntVar(&f.requests, "requests", 200000, "deliveries per target")
	cmd.Flags().IntVar(&f.bodySize, "body-size", 1024, "body size in bytes")
	cmd.Flags().BoolVar(&f.jsonOut, "json", false, "print results as JSON")
	cmd.Flags().StringVar(&f.cpuProfile, "cpuprofile", "", "write a CPU profile of the whole run to this file")
	return cmd
}

// benchSecret signs the benchmark's deliveries; it protects nothing.
const benchSecret = "whsec_YmVuY2htYXJrLXNlY3JldC1ub3QtZm9yLXVzZQ=="

type benchResult struct {
	Target string         `json:"target"`
	Result loadgen.Result `json:"result"`
	Ratio  float64        `json:"ratio_to_bare,omitempty"`
}

func runBench(cmd *cobra.Command, f *benchFlags) error {
	ctx := cmd.Context()
	out := cmd.OutOrStdout()
	if f.cpuProfile != "" {
		pf, err := os.Create(f.cpuProfile)
		if err != nil {
			return err
		}
		defer pf.Close()
		if err := pprof.StartCPUProfile(pf); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	body := benchBody(f.bodySize)
	vc := verify.Config{Scheme: "standard-webhooks", Secrets: []string{benchSecret}}
	if !f.jsonOut {
		fmt.Fprintf(out, "hookbox bench: %d deliveries of %d bytes per target, %d connections\n", f.requests, len(body), f.connections)
	}
	var results []benchResult
	var bare float64
	for _, target := range f.targets {
		url, stop, err := startBenchTarget(ctx, target, f)
		if err != nil {
			return fmt.Errorf("target %s: %w", target, err)
		}
		run := func(n int) (loadgen.Result, error) {
			reqs, err := presign(vc, body, n)
			if err != nil {
				return loadgen.Result{}, err
			}
			return loadgen.Run(ctx, loadgen.Options{URL: url, Connections: f.connections, Requests: reqs, Body: body})
		}
		if _, err := run(min(5000, f.requests)); err != nil { // warm up connections, caches, the JIT-less Go runtime's pools
			stop()
			return err
		}
		res, err := run(f.requests)
		stop()
		if err != nil {
			return err
		}
		r := benchResult{Target: target, Result: res}
		if target == "bare" {
			bare = res.RPS
		} else if bare > 0 {
			r.Ratio = res.RPS / bare
		}
		results = append(results, r)
		if !f.jsonOut {
			line := fmt.Sprintf("%-9s %s", target, res)
			if r.Ratio > 0 {
				line += fmt.Sprintf("  %.2fx bare", r.Ratio)
			}
			fmt.Fprintln(out, line)
		}
	}
	if f.jsonOut {
		enc := json.NewEncoder(out)
		enc.SetIndent("", "  ")
		return enc.Encode(results)
	}
	return nil
}

// startBenchTarget starts one target on a loopback port and returns its
// delivery URL and a function that stops it.
func startBenchTarget(ctx context.Context, target string, f *benchFlags) (string, func(), error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	url := "http://" + ln.Addr().String() + "/webhooks/bench"
	switch target {
	case "bare":
		srv := service.HTTPServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			io.Copy(io.Discard, r.Body)
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusAccepted)
			w.Write([]byte(`{"id":1,"duplicate":false}` + "\n"))
		}))
		go srv.Serve(ln)
		return url, func() { srv.Close() }, nil
	case "sqlite", "postgres":
		dir, err := os.MkdirTemp("", "hookbox-bench-")
		if err != nil {
			return "", nil, err
		}
		db := "sqlite:" + filepath.Join(dir, "bench.db")
		if target == "postgres" {
			if f.postgres == "" {
				return "", nil, fmt.Errorf("--postgres (or HOOKBOX_TEST_POSTGRES) is required")
			}
			db = f.postgres
		}
		cfg := &config.Config{DB: db, Sources: []config.Source{{Name: "bench", Scheme: "standard-webhooks", Secrets: []string{benchSecret}}}}
		svcCtx, cancel := context.WithCancel(ctx)
		svc, err := service.New(svcCtx, cfg, nil)
		if err != nil {
			cancel()
			return "", nil, err
		}
		done := make(chan struct{})
		go func() { svc.Serve(svcCtx, ln); close(done) }()
		return url, func() { cancel(); <-done; os.RemoveAll(dir) }, nil
	}
	ln.Close()
	return "", nil, fmt.Errorf("unknown target %q (want bare, sqlite or postgres)", target)
}

// presign makes n unique deliveries, signed before the clock starts.
func presign(vc verify.Config, body []byte, n int) ([]loadgen.Request, error) {
	var run [6]byte
	rand.Read(run[:])
	prefix := "msg_" + hex.EncodeToString(run[:]) + "_"
	now := time.Now()
	reqs := make([]loadgen.Request, n)
	for i := range reqs {
		h, err := verify.Sign(vc, body, fmt.Sprint(prefix, i), now)
		if err != nil {
			return nil, err
		}
		reqs[i].Header = h
	}
	return reqs, nil
}

// benchBody is a JSON object of about size bytes with a type field.
func benchBody(size int) []byte {
	head := `{"type":"order.paid","data":{"pad":"`
	tail := `"}}`
	pad := max(0, size-len(head)-len(tail))
	return []byte(head + strings.Repeat("x", pad) + tail)
}
