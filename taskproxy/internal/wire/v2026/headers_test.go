package v2026

import (
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
)

func TestEncodeHeaderValue(t *testing.T) {
	t.Parallel()
	for _, v := range []string{"abc", "a b", " lead", "trail ", "ünï", "tab\there", "=?base64?x?=", ""} {
		got, ok := decodeHeaderValue(upstream.EncodeHeaderValue(v))
		if !ok || got != v {
			t.Errorf("%q: encoded %q decodes to %q, %v", v, upstream.EncodeHeaderValue(v), got, ok)
		}
	}
	if got := upstream.EncodeHeaderValue("plain-id_1"); got != "plain-id_1" {
		t.Errorf("plain value encoded as %q", got)
	}
}
