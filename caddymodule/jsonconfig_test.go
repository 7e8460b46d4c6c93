package caddymodule

import (
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	_ "github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
)

// jsonConfig is a JSON-only configuration (no Caddyfile) with the handler
// in front of reverse_proxy, storing tasks in dir, with handler options
// extra merged in.
func jsonConfig(t *testing.T, dir string, extra map[string]any) *caddy.Config {
	t.Helper()
	handler := map[string]any{
		"handler":                  "mcp_tasks",
		"storage_dir":              dir,
		"default_ttl":              "10m",
		"max_ttl":                  "1h",
		"max_active_per_principal": 5,
		"tools":                    map[string]any{"slow_compute": map[string]any{"task_support": "required", "retry_on_restart": true}},
		"auth":                     map[string]any{"jwt": map[string]any{"hmac_secret": strings.Repeat("s", 32)}},
	}
	maps.Copy(handler, extra)
	raw, err := json.Marshal(map[string]any{
		"admin": map[string]any{"disabled": true},
		"apps": map[string]any{"http": map[string]any{"servers": map[string]any{"mcp": map[string]any{
			"listen":          []string{"127.0.0.1:0"},
			"automatic_https": map[string]any{"disable": true},
			"routes": []any{map[string]any{"handle": []any{
				handler,
				map[string]any{"handler": "reverse_proxy", "upstreams": []any{map[string]any{"dial": "127.0.0.1:1"}}},
			}}},
		}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var cfg caddy.Config
	if err := json.Unmarshal(raw, &cfg); err != nil {
		t.Fatal(err)
	}
	return &cfg
}

// A JSON configuration with the handler, written without the Caddyfile,
// provisions and validates (durations as strings, as JSON configs often
// spell them); validating opens nothing: the store directory is not even
// created, so caddy validate next to a running Caddy never touches its
// store. Bad values are refused with the option's name.
func TestJSONConfigValidates(t *testing.T) {
	tests := []struct {
		name    string
		extra   map[string]any
		wantErr string
	}{
		{"valid", nil, ""},
		{"default_ttl over max_ttl", map[string]any{"default_ttl": "2h"}, "default ttl (2h0m0s) <= max ttl (1h0m0s)"},
		{"max_result too large", map[string]any{"max_result": 32 << 20}, "max_result"},
		{"unknown option", map[string]any{"bogus": 1}, "unknown field"},
		{"auth and principal", map[string]any{"principal": "{http.auth.user.id}"}, "auth and principal exclude each other"},
		{"bad tool mode", map[string]any{"tools": map[string]any{"x": map[string]any{"task_support": "sometimes"}}}, "tool x"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "tasks")
			err := caddy.Validate(jsonConfig(t, dir, tt.extra))
			switch {
			case tt.wantErr == "" && err != nil:
				t.Fatalf("validate: %v", err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Fatalf("validate: got %v, want an error containing %q", err, tt.wantErr)
			}
			if _, err := os.Stat(dir); !os.IsNotExist(err) {
				t.Errorf("validating created or opened the store directory %s (stat: %v)", dir, err)
			}
		})
	}
}
