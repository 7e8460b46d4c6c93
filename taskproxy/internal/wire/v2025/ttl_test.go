package v2025

import (
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire"
)

// params.task.ttl is an integer as JSON Schema reads one, clamped before it
// becomes a Duration: a huge ttl must not wrap into a negative duration, a
// fraction and a ttl that is not positive are refused.
func TestRequestedTTL(t *testing.T) {
	t.Parallel()
	c := &call{&wire.Exchange{Env: &wire.Env{Policy: wire.Policy{DefaultTTL: time.Minute, MaxTTL: time.Hour}}}}
	tests := []struct {
		name    string
		meta    string
		want    time.Duration
		wantErr bool
	}{
		{"absent", `{}`, time.Minute, false},
		{"null", `{"ttl":null}`, time.Minute, false},
		{"in range", `{"ttl":60000}`, time.Minute, false},
		{"integral float", `{"ttl":60000.0}`, time.Minute, false},
		{"exponent", `{"ttl":6e4}`, time.Minute, false},
		{"integral fraction digits", `{"ttl":1500.000}`, 1500 * time.Millisecond, false},
		{"fractional", `{"ttl":1500.5}`, 0, true},
		{"absurdly small", `{"ttl":0.001}`, 0, true},
		{"above max", `{"ttl":86400000}`, time.Hour, false},
		{"overflows a Duration", `{"ttl":1e13}`, time.Hour, false},
		{"int64's largest", `{"ttl":9223372036854775807}`, time.Hour, false},
		{"far beyond int64", `{"ttl":1e300}`, time.Hour, false},
		{"beyond float64", `{"ttl":1e400}`, time.Hour, false},
		{"smallest", `{"ttl":1}`, time.Second, false},
		{"below the minimum", `{"ttl":999}`, time.Second, false},
		{"zero", `{"ttl":0}`, 0, true},
		{"negative", `{"ttl":-5}`, 0, true},
		{"negative huge", `{"ttl":-1e300}`, 0, true},
		{"negative zero", `{"ttl":-0.0}`, 0, true},
		{"key in another case", `{"TTL":60000.0}`, time.Minute, false},
		{"not an object", `3`, 0, true},
		{"not a number", `{"ttl":"60000"}`, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := c.requestedTTL([]byte(tt.meta))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tt.wantErr)
			}
			if !tt.wantErr && got != tt.want {
				t.Errorf("ttl = %v, want %v", got, tt.want)
			}
		})
	}
}
