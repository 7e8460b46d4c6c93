package v2025

import (
	"bytes"
	"encoding/json"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire"
)

// plainTTLParam answers only where it agrees with the decoder requestedTTL
// used alone, and leaves every doubtful case to it.
func TestPlainTTLParamAgreesWithDecoder(t *testing.T) {
	t.Parallel()
	tests := []struct {
		meta     string
		wantFast bool
	}{
		{`{}`, true},
		{` { } `, true},
		{`{"ttl":null}`, true},
		{`{"ttl":60000}`, true},
		{`{"ttl": 1500.5 }`, true},
		{`{"ttl":-5}`, true},
		{`{"ttl":-0}`, true},
		{`{"ttl":1e13}`, true},
		{`{"ttl":1E-3}`, true},
		{`{"ttl":1,"ttl":2}`, true},
		{`{"ttl":1,"ttl":null}`, true},
		{`{"other":{"ttl":5},"ttl":7}`, true},
		{`{"x":"\"ttl\"","ttl":7}`, true},
		{`{"ttl":1e400}`, true},
		{`{"ttl":"60000"}`, true},
		{`{"ttl":true}`, true},
		{`{"ttl":{}}`, true},
		{`{"TTL":5}`, false},
		{`{"ttl":5,"Ttl":6}`, false},
		{`{"t\u0074l":5}`, false},
		{`3`, false},
		{`[]`, false},
		{`null`, false},
		{`{"ttl":5`, false},
		{`{"ttl":05}`, false},
		{``, false},
	}
	for _, tt := range tests {
		t.Run(tt.meta, func(t *testing.T) {
			t.Parallel()
			got, ok := plainTTLParam([]byte(tt.meta))
			if ok != tt.wantFast {
				t.Fatalf("fast path answered = %v, want %v", ok, tt.wantFast)
			}
			if !ok {
				return
			}
			var meta struct {
				TTL json.RawMessage `json:"ttl"`
			}
			if err := json.Unmarshal([]byte(tt.meta), &meta); err != nil {
				t.Fatalf("fast path answered where the decoder fails: %v", err)
			}
			if string(meta.TTL) == "null" {
				meta.TTL = nil
			}
			if !bytes.Equal(got, meta.TTL) {
				t.Fatalf("ttl = %s, decoder %s", got, meta.TTL)
			}
		})
	}
}

func BenchmarkRequestedTTL(b *testing.B) {
	c := &call{&wire.Exchange{Env: &wire.Env{Policy: wire.Policy{DefaultTTL: time.Minute, MaxTTL: time.Hour}}}}
	meta := []byte(`{"ttl":60000}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := c.requestedTTL(meta); err != nil {
			b.Fatal(err)
		}
	}
}
