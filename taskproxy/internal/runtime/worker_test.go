package runtime

import (
	"encoding/json"
	"testing"
)

// plainIsError answers only where it agrees with the decoder applyOutcome
// used alone.
func TestPlainIsErrorAgreesWithDecoder(t *testing.T) {
	tests := []struct {
		result   string
		wantFast bool
	}{
		{`{"content":[{"type":"text","text":"ok"}]}`, true},
		{`{"content":[],"isError":true}`, true},
		{`{"isError":false}`, true},
		{`{"isError": true , "x":{"isError":false}}`, true},
		{`{"isError":true,"isError":null}`, true},
		{`{"isError":true,"isError":false}`, true},
		{`{"x":"isError","isError":true}`, true},
		{`not json`, true},
		{`{"isError":true`, true},
		{`{"isError":"true"}`, false},
		{`{"isError":1}`, false},
		{`{"IsError":true}`, false},
		{`{"is\u0045rror":true}`, false},
		{`[{"isError":true}]`, false},
		{`null`, false},
	}
	for _, tt := range tests {
		t.Run(tt.result, func(t *testing.T) {
			got, ok := plainIsError([]byte(tt.result))
			if ok != tt.wantFast {
				t.Fatalf("fast path answered = %v, want %v", ok, tt.wantFast)
			}
			var r struct {
				IsError bool `json:"isError"`
			}
			_ = json.Unmarshal([]byte(tt.result), &r)
			if ok && got != r.IsError {
				t.Fatalf("isError = %v, decoder %v", got, r.IsError)
			}
		})
	}
}
