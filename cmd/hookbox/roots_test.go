package main

import (
	"crypto/x509"
	"os"
	"os/exec"
	"testing"
)

// TestFallbackRoots: on a machine with no CA certificates (the container
// image is built FROM scratch), hookbox still has the public roots to
// check an HTTPS forward target or an OTLP collector against. The test
// runs itself again with the system's certificate file and directory
// pointed at nothing.
func TestFallbackRoots(t *testing.T) {
	if os.Getenv("HOOKBOX_TEST_NO_SYSTEM_ROOTS") == "1" {
		pool, err := x509.SystemCertPool()
		if err != nil {
			t.Fatalf("no certificate pool: %v", err)
		}
		if pool.Equal(x509.NewCertPool()) {
			t.Fatal("the certificate pool is empty: HTTPS to any public server fails (x509: certificate signed by unknown authority)")
		}
		return
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFallbackRoots$", "-test.count=1")
	cmd.Env = append(os.Environ(), "HOOKBOX_TEST_NO_SYSTEM_ROOTS=1",
		"SSL_CERT_FILE="+t.TempDir()+"/none.pem", "SSL_CERT_DIR="+t.TempDir())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("without the system's roots: %v\n%s", err, out)
	}
}
