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

func TestConfigDMPolicy(t *testing.T) {
	cfg := Default()
	cfg.Home = t.TempDir()
	if cfg.DM.Policy != "anyone" || cfg.DM.Quota != 1000 {
		t.Fatalf("default DM policy %+v, want anyone with a quota of 1000", cfg.DM)
	}
	cfg.DM.Policy = "nobody"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), `dm policy "nobody"`) {
		t.Fatalf("dm policy nobody: %v, want an error naming it", err)
	}
	cfg.DM.Policy, cfg.DM.Rate = "trusted", -1
	if err := cfg.Validate(); err == nil {
		t.Fatal("a negative DM rate is valid")
	}
}
