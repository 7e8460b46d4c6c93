package v2025

import (
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire"
)

// params.task.ttl is clamped in the float domain: a huge ttl must not wrap
// into a negative duration, and a ttl that is not positive is refused.
func TestRequestedTTL(t *testing.T) {
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
		{"fractional", `{"ttl":1500.5}`, 1500500 * time.Microsecond, false},
		{"above max", `{"ttl":86400000}`, time.Hour, false},
		{"overflows a Duration", `{"ttl":1e13}`, time.Hour, false},
		{"far beyond int64", `{"ttl":1e300}`, time.Hour, false},
		{"absurdly small", `{"ttl":0.001}`, time.Second, false},
		{"below the minimum", `{"ttl":999}`, time.Second, false},
		{"zero", `{"ttl":0}`, 0, true},
		{"negative", `{"ttl":-5}`, 0, true},
		{"negative huge", `{"ttl":-1e300}`, 0, true},
		{"not an object", `3`, 0, true},
		{"not a number", `{"ttl":"60000"}`, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
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
