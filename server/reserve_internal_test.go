package server

import (
	"testing"

	"github.com/hookbox/hookbox/config"
)

// TestReserveMatchesConfig keeps the reserve the server adds to the body
// budget equal to the one config check shows in max_inflight_body_bytes.
func TestReserveMatchesConfig(t *testing.T) {
	if requestReserve != config.InflightReserve {
		t.Fatalf("server's requestReserve is %d, config.InflightReserve %d: change both", requestReserve, config.InflightReserve)
	}
}
