package caddymodule

import (
	"math"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"
)

func TestUnmarshalCaddyfile(t *testing.T) {
	input := `mcp_tasks {
		storage_dir   /var/lib/mcp
		task_after    1500ms
		default_ttl   15m
		max_ttl       1d
		poll_interval 2s
		max_active_per_principal 7
		max_finished_per_principal 250
		max_watched_tasks_per_principal 400
		default_task_support forbidden
		max_body      512KiB
		pass_unreadable
		allow_auth_bypass
		routing_headers strict
		max_result    2MiB
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
		{"max_finished_per_principal", h.MaxFinishedPerPrincipal, 250},
		{"max_watched_tasks_per_principal", h.MaxWatchedTasksPerPrincipal, 400},
		{"default_task_support", h.DefaultTaskSupport, "forbidden"},
		{"max_body", h.MaxBody, int64(512 << 10)},
		{"pass_unreadable", h.PassUnreadable, true},
		{"allow_auth_bypass", h.AllowAuthBypass, true},
		{"routing_headers", h.RoutingHeaders, "strict"},
		{"max_result", h.MaxResult, int64(2 << 20)},
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
		{"pass_unreadable with an argument", "mcp_tasks {\n pass_unreadable on\n}", "wrong argument count"},
		{"allow_auth_bypass with an argument", "mcp_tasks {\n allow_auth_bypass on\n}", "wrong argument count"},
		{"auth twice", "mcp_tasks {\n auth jwt {\n  jwks_url https://idp/jwks\n }\n auth jwt {\n }\n}", "twice"},
		{"auth without key", "mcp_tasks {\n auth jwt {\n  issuer https://idp\n }\n}", "auth jwt: want exactly one key source (hmac_secret, public_key or jwks_url), got 0"},
		{"auth with two keys", "mcp_tasks {\n auth jwt {\n  hmac_secret x\n  jwks_url https://idp/jwks\n }\n}", "got 2"},
		{"negative max_body", "mcp_tasks {\n max_body -1\n}", "max_body: want a positive size"},
		{"zero max_body", "mcp_tasks {\n max_body 0\n}", "max_body: want a positive size"},
		{"negative max_result", "mcp_tasks {\n max_result -1\n}", "max_result: want a positive size"},
		{"negative sweep_interval", "mcp_tasks {\n sweep_interval -1s\n}", "sweep_interval: want a positive duration"},
		{"zero task_after", "mcp_tasks {\n task_after 0s\n}", "task_after: want a positive duration"},
		{"negative default_ttl", "mcp_tasks {\n default_ttl -5m\n}", "default_ttl: want a positive duration"},
		{"zero rate_limit", "mcp_tasks {\n rate_limit 0\n}", "rate_limit: want a positive number"},
		{"NaN rate_limit", "mcp_tasks {\n rate_limit NaN\n}", "rate_limit: want a positive number"},
		{"zero max_active", "mcp_tasks {\n max_active_per_principal 0\n}", "max_active_per_principal: want a positive number"},
		{"zero max_finished", "mcp_tasks {\n max_finished_per_principal 0\n}", "max_finished_per_principal: want a positive number"},
		{"bad max_finished", "mcp_tasks {\n max_finished_per_principal lots\n}", "max_finished_per_principal: want a positive number"},
		{"zero max_watched", "mcp_tasks {\n max_watched_tasks_per_principal 0\n}", "max_watched_tasks_per_principal: want a positive number"},
		{"off max_watched", "mcp_tasks {\n max_watched_tasks_per_principal off\n}", "max_watched_tasks_per_principal: want a positive number"},
		{"bad rebinding mode", "mcp_tasks {\n dns_rebinding_protection sometimes\n}", "dns_rebinding_protection: unknown mode"},
		{"bad routing_headers mode", "mcp_tasks {\n routing_headers loose\n}", "routing_headers: unknown mode"},
		{"routing_headers without a mode", "mcp_tasks {\n routing_headers\n}", "wrong argument count"},
		{"zero drain", "mcp_tasks {\n drain 0s\n}", "drain: want a positive duration"},
		{"negative lease", "mcp_tasks {\n lease -3s\n}", "lease: want a positive duration"},
		{"lease without a duration", "mcp_tasks {\n lease\n}", "wrong argument count"},
	}
	checkCaddyfileErrors(t, tests)
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

// Options that switch a limit off, and repeated hmac_secret lines (a key
// rotation) accumulate instead of the last one silently winning.
func TestUnmarshalOffAndRotation(t *testing.T) {
	input := `mcp_tasks {
		rate_limit off
		max_active_per_principal off
		max_finished_per_principal off
		dns_rebinding_protection off
		auth jwt {
			hmac_secret {env.OLD_SECRET}
			hmac_secret {env.NEW_SECRET}
			hmac_secret {env.NEXT_SECRET}
		}
	}`
	var h Handler
	if err := h.UnmarshalCaddyfile(caddyfile.NewTestDispenser(input)); err != nil {
		t.Fatal(err)
	}
	if h.RateLimit >= 0 || h.MaxActivePerPrincipal >= 0 || h.MaxFinishedPerPrincipal >= 0 || h.DNSRebindingProtection != "off" {
		t.Errorf("rate_limit %v, max_active_per_principal %d, max_finished_per_principal %d, dns_rebinding_protection %q: want off",
			h.RateLimit, h.MaxActivePerPrincipal, h.MaxFinishedPerPrincipal, h.DNSRebindingProtection)
	}
	j := h.Auth.JWT
	if j.HMACSecret != "{env.OLD_SECRET}" || len(j.HMACSecrets) != 2 || j.HMACSecrets[0] != "{env.NEW_SECRET}" || j.HMACSecrets[1] != "{env.NEXT_SECRET}" {
		t.Errorf("secrets %q + %q, want all three", j.HMACSecret, j.HMACSecrets)
	}
}

// JSON configurations are checked too, with the option's JSON name.
func TestValidateNamesOption(t *testing.T) {
	base := func() Handler {
		return Handler{DefaultTTL: caddy.Duration(time.Minute), MaxTTL: caddy.Duration(time.Hour)}
	}
	tests := []struct {
		name, want string
		edit       func(*Handler)
	}{
		{"sweep_interval", "sweep_interval: must not be negative", func(h *Handler) { h.SweepInterval = caddy.Duration(-time.Second) }},
		{"poll_interval", "poll_interval: must not be negative", func(h *Handler) { h.PollInterval = -1 }},
		{"max_body", "max_body: must not be negative", func(h *Handler) { h.MaxBody = -1 }},
		{"max_result", "max_result: must be between", func(h *Handler) { h.MaxResult = 17 << 20 }},
		{"rate_limit", "rate_limit: must be a finite number", func(h *Handler) { h.RateLimit = math.Inf(1) }},
		{"dns_rebinding_protection", "dns_rebinding_protection", func(h *Handler) { h.DNSRebindingProtection = "maybe" }},
		{"routing_headers", "routing_headers: unknown mode", func(h *Handler) { h.RoutingHeaders = "loose" }},
		{"drain", "drain: must not be negative", func(h *Handler) { h.Drain = caddy.Duration(-time.Second) }},
		{"lease too short", "lease: must be between 2s and 10m0s, got 1s", func(h *Handler) { h.Lease = caddy.Duration(time.Second) }},
		{"lease too long", "lease: must be between 2s and 10m0s, got 11m0s", func(h *Handler) { h.Lease = caddy.Duration(11 * time.Minute) }},
		{"negative lease", "lease: must be between", func(h *Handler) { h.Lease = caddy.Duration(-time.Second) }},
	}
	for _, tt := range tests {
		h := base()
		tt.edit(&h)
		if err := h.Validate(); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: Validate() = %v, want %q", tt.name, err, tt.want)
		}
	}
}

// A global order that puts routing directives before mcp_tasks is found,
// naming the blocks it puts first, and invoke only when the order put
// mcp_tasks right after it.
func TestOrderSkipsGateway(t *testing.T) {
	tests := []struct {
		name  string
		order []string
		want  []string
	}{
		{"module's own order", []string{"basic_auth", "mcp_tasks", "invoke", "handle", "route", "reverse_proxy"}, nil},
		{"before reverse_proxy", []string{"basic_auth", "invoke", "handle", "handle_path", "route", "mcp_tasks", "reverse_proxy"}, []string{"handle", "handle_path", "route"}},
		{"after handle", []string{"invoke", "handle", "mcp_tasks", "handle_path", "route"}, []string{"handle"}},
		{"after invoke", []string{"invoke", "mcp_tasks", "handle", "route"}, []string{"invoke"}},
		{"not ordered", []string{"handle", "reverse_proxy"}, nil},
	}
	for _, tt := range tests {
		if got := orderSkipsGateway(tt.order); !slices.Equal(got, tt.want) {
			t.Errorf("%s: %q, want %q", tt.name, got, tt.want)
		}
	}
}

// max_finished_per_principal reaches the gateway: 100,000 unless set, and a
// negative value (off) is no cap.
func TestMaxFinishedPerPrincipalConfig(t *testing.T) {
	tests := []struct {
		name      string
		set, want int
	}{
		{"absent", 0, 100_000},
		{"set", 25, 25},
		{"off", -1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := Handler{MaxFinishedPerPrincipal: tt.set, logger: zap.NewNop()}
			h.applyDefaults()
			cfg, err := h.gatewayConfig()
			if err != nil {
				t.Fatal(err)
			}
			if cfg.MaxFinishedPerOwner != tt.want {
				t.Errorf("MaxFinishedPerOwner = %d, want %d", cfg.MaxFinishedPerOwner, tt.want)
			}
		})
	}
}

// max_watched_tasks_per_principal reaches the gateway; unset, the gateway
// applies its default.
func TestMaxWatchedTasksPerPrincipalConfig(t *testing.T) {
	for _, n := range []int{0, 25} {
		h := Handler{MaxWatchedTasksPerPrincipal: n, logger: zap.NewNop()}
		h.applyDefaults()
		cfg, err := h.gatewayConfig()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.MaxWatchedPerOwner != n {
			t.Errorf("set to %d: MaxWatchedPerOwner = %d", n, cfg.MaxWatchedPerOwner)
		}
	}
}

// checkCaddyfileErrors unmarshals each input into a Handler and wants an
// error containing wantErr.
func checkCaddyfileErrors(t *testing.T, tests []struct{ name, input, wantErr string }) {
	t.Helper()
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
