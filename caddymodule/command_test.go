package caddymodule

import "testing"

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
