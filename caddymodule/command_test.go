package caddymodule

import (
	"os"
	"path/filepath"
	"testing"
)

func TestShellQuote(t *testing.T) {
	tests := []struct{ in, want string }{
		{"slow_compute", "slow_compute"},
		{"localhost:2019", "localhost:2019"},
		{"unix//run/caddy-admin.sock", "unix//run/caddy-admin.sock"},
		{"abc-DEF_123", "abc-DEF_123"},
		{"", "''"},
		{"alice smith", "'alice smith'"},
		{"o'brien", `'o'\''brien'`},
		{"$(rm -rf /)", "'$(rm -rf /)'"},
	}
	for _, tt := range tests {
		if got := shellQuote(tt.in); got != tt.want {
			t.Errorf("shellQuote(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestStoreParam(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "file"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	t.Chdir(dir)
	tests := []struct{ in, want string }{
		{"data", filepath.Join(dir, "data")},
		{"./data/", filepath.Join(dir, "data")},
		{filepath.Join(dir, "data"), filepath.Join(dir, "data")},
		{"/var/lib/caddy/other", "/var/lib/caddy/other"},
		{"missing", "missing"},
		{"file", "file"},
		{"postgres:mcp_tasks@db.internal:5432/tasks", "postgres:mcp_tasks@db.internal:5432/tasks"},
	}
	for _, tt := range tests {
		if got := storeParam(tt.in); got != tt.want {
			t.Errorf("storeParam(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
