package caddymodule

import (
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"
)

// run_timeout per route and per tool, in the Caddyfile, reaches the core's
// config: a tool's own limit, "off" for a tool (none), the route's for the
// rest.
func TestRunTimeoutCaddyfile(t *testing.T) {
	tests := []struct {
		name      string
		input     string
		wantRoute time.Duration
		wantTools map[string]time.Duration
		wantRetry map[string]bool
	}{
		{"none", "mcp_tasks {\n tool a optional\n}", 0, map[string]time.Duration{}, map[string]bool{}},
		{"route", "mcp_tasks {\n run_timeout 10m\n}", 10 * time.Minute, map[string]time.Duration{}, map[string]bool{}},
		{"route off", "mcp_tasks {\n run_timeout off\n}", 0, map[string]time.Duration{}, map[string]bool{}},
		{"tool", "mcp_tasks {\n run_timeout 10m\n tool a optional run_timeout 30s\n}", 10 * time.Minute, map[string]time.Duration{"a": 30 * time.Second}, map[string]bool{}},
		{"tool off", "mcp_tasks {\n run_timeout 10m\n tool a required run_timeout off\n}", 10 * time.Minute, map[string]time.Duration{"a": 0}, map[string]bool{}},
		{"with retry, either order", "mcp_tasks {\n tool a optional retry_on_restart run_timeout 1h\n tool b optional run_timeout 2h retry_on_restart\n}", 0,
			map[string]time.Duration{"a": time.Hour, "b": 2 * time.Hour}, map[string]bool{"a": true, "b": true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h Handler
			if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tt.input)); err != nil {
				t.Fatal(err)
			}
			h.applyDefaults()
			h.logger = zap.NewNop()
			if err := h.Validate(); err != nil {
				t.Fatal(err)
			}
			cfg, err := h.gatewayConfig()
			if err != nil {
				t.Fatal(err)
			}
			if cfg.RunTimeout != tt.wantRoute {
				t.Errorf("route run_timeout %s, want %s", cfg.RunTimeout, tt.wantRoute)
			}
			if len(cfg.ToolRunTimeouts) != len(tt.wantTools) {
				t.Errorf("tool run_timeouts %v, want %v", cfg.ToolRunTimeouts, tt.wantTools)
			}
			for tool, want := range tt.wantTools {
				if got, ok := cfg.ToolRunTimeouts[tool]; !ok || got != want {
					t.Errorf("tool %s run_timeout %s (set %v), want %s", tool, got, ok, want)
				}
			}
			for tool, want := range tt.wantRetry {
				if cfg.RetryOnRestart[tool] != want {
					t.Errorf("tool %s retry_on_restart %v, want %v", tool, cfg.RetryOnRestart[tool], want)
				}
			}
		})
	}
}

func TestRunTimeoutCaddyfileErrors(t *testing.T) {
	tests := []struct{ name, input, wantErr string }{
		{"route zero", "mcp_tasks {\n run_timeout 0s\n}", "run_timeout: want a positive duration or off"},
		{"route negative", "mcp_tasks {\n run_timeout -1m\n}", "run_timeout: want a positive duration or off"},
		{"route bad", "mcp_tasks {\n run_timeout soon\n}", "run_timeout"},
		{"route without value", "mcp_tasks {\n run_timeout\n}", "wrong argument count"},
		{"tool without value", "mcp_tasks {\n tool a optional run_timeout\n}", "tool a: run_timeout needs a duration or off"},
		{"tool bad", "mcp_tasks {\n tool a optional run_timeout later\n}", "tool a: run_timeout"},
		{"tool zero", "mcp_tasks {\n tool a optional run_timeout 0s\n}", "want a positive duration or off"},
		{"tool twice", "mcp_tasks {\n tool a optional run_timeout 1m run_timeout 2m\n}", "run_timeout given twice"},
		{"tool unknown option", "mcp_tasks {\n tool a optional run_timeout 1m forever\n}", "[retry_on_restart] [run_timeout <duration>|off]"},
	}
	checkCaddyfileErrors(t, tests)
}

// A negative route run_timeout in JSON is refused with the option's name.
func TestRunTimeoutValidate(t *testing.T) {
	h := Handler{DefaultTTL: caddy.Duration(time.Minute), MaxTTL: caddy.Duration(time.Hour), RunTimeout: caddy.Duration(-time.Second)}
	if err := h.Validate(); err == nil || !strings.Contains(err.Error(), "run_timeout: must not be negative") {
		t.Errorf("Validate() = %v, want run_timeout refused", err)
	}
}
