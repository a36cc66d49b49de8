package service_test

import (
	"context"
	"net"
	"path/filepath"
	"testing"

	"github.com/hookbox/hookbox/config"
	"github.com/hookbox/hookbox/service"
)

// TestFailedStartFreesTheListenAddress: ListenAndServe that fails to
// start (here: admin_listen's address is taken) returns an error and
// closes the service; the webhook address it had bound must be free again,
// so that a program embedding the service can try again or bind it.
func TestFailedStartFreesTheListenAddress(t *testing.T) {
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	free, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	listen := free.Addr().String()
	free.Close()
	cfg, err := config.Parse([]byte("listen: \"" + listen + "\"\nadmin_listen: \"" + taken.Addr().String() + "\"\nadmin_token: \"0123456789abcdef0123456789abcdef\"\n" + testConfig))
	if err != nil {
		t.Fatal(err)
	}
	cfg.DB = "sqlite:" + filepath.Join(t.TempDir(), "hookbox.db")
	svc, err := service.New(context.Background(), cfg, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := svc.ListenAndServe(context.Background()); err == nil {
		t.Fatal("ListenAndServe with admin_listen taken returned nil")
	}
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		t.Fatalf("after a failed start, the webhook address %s is still held: %v", listen, err)
	}
	ln.Close()
}
