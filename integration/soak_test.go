package integration

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestSoakSmoke runs the soak (./xcaddy.sh soak, integration/bench) for a
// few seconds on Badger, so that it stays compiled and working: it must
// exit 0 and print its summary with no unexpected error. The soak's goals
// on growth need minutes and are not judged in so short a run; the settle
// wait and slack are loosened here for the same reason (the gateway keeps
// idle runner goroutines 20 s), so the real run is what checks them.
func TestSoakSmoke(t *testing.T) {
	t.Parallel()
	bin := filepath.Join(t.TempDir(), "bench")
	if out, err := exec.Command("go", "build", "-o", bin, "./bench").CombinedOutput(); err != nil {
		t.Fatalf("building the soak: %v\n%s", err, out)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-caddy", caddyBinary, "-soak", "10s", "-soak-store", "badger",
		"-soak-rate", "20", "-soak-peers", "4", "-soak-sample", "2s", "-soak-quiet", "0s",
		"-soak-settle", "5s", "-soak-slack", "100", "-soak-out", t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the soak failed: %v\n%s", err, out)
	}
	for _, want := range []string{"soak summary (badger)", "unexpected errors 0 (goal 0: MET)", "v2025 elicitation answer", "v2026 subscriptions/listen", "soak badger: PASS"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("the soak's output lacks %q:\n%s", want, out)
		}
	}
	if !strings.Contains(string(out), "[badger] load") {
		t.Errorf("the soak printed no sample:\n%s", out)
	}
}
