package daemon

import (
	"strings"
	"testing"
)

func TestConfigReachability(t *testing.T) {
	for _, r := range []string{"", "auto", "public", "private"} {
		cfg := Default()
		cfg.Home = t.TempDir()
		cfg.Reachability = r
		if err := cfg.Validate(); err != nil {
			t.Errorf("reachability %q: %v", r, err)
		}
	}
	cfg := Default()
	cfg.Home = t.TempDir()
	cfg.Reachability = "behind-nat"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), `reachability "behind-nat"`) {
		t.Fatalf("reachability behind-nat: %v, want an error naming it", err)
	}
}
