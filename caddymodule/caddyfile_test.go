package caddymodule

import (
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
)

func TestUnmarshalCaddyfile(t *testing.T) {
	input := `mcp_tasks {
		storage_dir   /var/lib/mcp
		task_after    1500ms
		default_ttl   15m
		max_ttl       1d
		poll_interval 2s
		max_active_per_principal 7
		default_task_support forbidden
		max_body      512KiB
		tool slow_compute optional
		tool failing_job  required
		tool slow_echo    optional retry_on_restart
		sync_writes off
		sweep_interval 30s
		rate_limit 12.5
		auth jwt {
			hmac_secret     {env.MCP_JWT_SECRET}
			issuer          https://idp.example.com
			audience        mcp-gateway
			principal_claim uid
			tenant_claim    org
			leeway          10s
			resource_metadata_url https://gw.example.com/.well-known/oauth-protected-resource
		}
	}`
	var h Handler
	if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(input)); err != nil {
		t.Fatal(err)
	}
	checks := []struct {
		name      string
		got, want any
	}{
		{"storage_dir", h.StorageDir, "/var/lib/mcp"},
		{"task_after", time.Duration(h.TaskAfter), 1500 * time.Millisecond},
		{"default_ttl", time.Duration(h.DefaultTTL), 15 * time.Minute},
		{"max_ttl", time.Duration(h.MaxTTL), 24 * time.Hour},
		{"poll_interval", time.Duration(h.PollInterval), 2 * time.Second},
		{"max_active_per_principal", h.MaxActivePerPrincipal, 7},
		{"default_task_support", h.DefaultTaskSupport, "forbidden"},
		{"max_body", h.MaxBody, int64(512 << 10)},
		{"tool slow_compute", h.Tools["slow_compute"].TaskSupport, "optional"},
		{"tool failing_job", h.Tools["failing_job"].TaskSupport, "required"},
		{"rate_limit", h.RateLimit, 12.5},
		{"retry_on_restart", h.Tools["slow_echo"].RetryOnRestart, true},
		{"no retry_on_restart", h.Tools["failing_job"].RetryOnRestart, false},
		{"sync_writes", *h.SyncWrites, false},
		{"sweep_interval", time.Duration(h.SweepInterval), 30 * time.Second},
		{"hmac_secret", h.Auth.JWT.HMACSecret, "{env.MCP_JWT_SECRET}"},
		{"issuer", h.Auth.JWT.Issuer, "https://idp.example.com"},
		{"audience", h.Auth.JWT.Audience, "mcp-gateway"},
		{"principal_claim", h.Auth.JWT.PrincipalClaim, "uid"},
		{"tenant_claim", h.Auth.JWT.TenantClaim, "org"},
		{"leeway", time.Duration(h.Auth.JWT.Leeway), 10 * time.Second},
	}
	for _, c := range checks {
		if c.got != c.want {
			t.Errorf("%s = %v, want %v", c.name, c.got, c.want)
		}
	}
}

func TestUnmarshalCaddyfileErrors(t *testing.T) {
	tests := []struct{ name, input, wantErr string }{
		{"unknown subdirective", "mcp_tasks {\n bogus 1\n}", "unrecognized"},
		{"inline argument", "mcp_tasks foo", "wrong argument count"},
		{"bad duration", "mcp_tasks {\n task_after soon\n}", "task_after"},
		{"bad size", "mcp_tasks {\n max_body lots\n}", "max_body"},
		{"bad count", "mcp_tasks {\n max_active_per_principal many\n}", "max_active_per_principal"},
		{"bad mode", "mcp_tasks {\n tool x sometimes\n}", "unknown task support"},
		{"tool without mode", "mcp_tasks {\n tool x\n}", "tool"},
		{"tool twice", "mcp_tasks {\n tool x optional\n tool x required\n}", "twice"},
		{"bad default mode", "mcp_tasks {\n default_task_support maybe\n}", "default_task_support"},
		{"unknown auth method", "mcp_tasks {\n auth basic\n}", "unknown method"},
		{"unknown auth option", "mcp_tasks {\n auth jwt {\n  algorithm none\n }\n}", "unrecognized"},
		{"missing argument", "mcp_tasks {\n storage_dir\n}", "wrong argument count"},
		{"bad rate", "mcp_tasks {\n rate_limit fast\n}", "rate_limit"},
		{"bad tool flag", "mcp_tasks {\n tool x optional retry\n}", "retry_on_restart"},
		{"bad sync_writes", "mcp_tasks {\n sync_writes maybe\n}", "sync_writes"},
		{"auth twice", "mcp_tasks {\n auth jwt {\n }\n auth jwt {\n }\n}", "twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var h Handler
			err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(tt.input))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name string
		h    Handler
		ok   bool
	}{
		{"defaults", Handler{DefaultTTL: caddy.Duration(time.Minute), MaxTTL: caddy.Duration(time.Hour)}, true},
		{"default above max", Handler{DefaultTTL: caddy.Duration(2 * time.Hour), MaxTTL: caddy.Duration(time.Hour)}, false},
		{"negative", Handler{TaskAfter: -1, MaxTTL: caddy.Duration(time.Hour)}, false},
		{"negative body", Handler{MaxBody: -1, MaxTTL: caddy.Duration(time.Hour)}, false},
	}
	for _, tt := range tests {
		if err := tt.h.Validate(); (err == nil) != tt.ok {
			t.Errorf("%s: Validate() = %v", tt.name, err)
		}
	}
}

func TestUnmarshalPrincipal(t *testing.T) {
	var h Handler
	if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser("mcp_tasks {\n principal {http.auth.user.id}\n}")); err != nil {
		t.Fatal(err)
	}
	if h.Principal != "{http.auth.user.id}" {
		t.Errorf("principal = %q", h.Principal)
	}
}
