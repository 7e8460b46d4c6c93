package integration

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestTSEverythingThroughGateway is the baseline in front of the official
// TypeScript everything server: a 2025-11-25 session through the gateway
// lists its tools and calls one, and the server's own task tool is listed.
func TestTSEverythingThroughGateway(t *testing.T) {
	t.Parallel()
	upstreamURL := startTSEverything(t)
	gw := startGateway(t, gatewayOptions{Upstream: strings.TrimSuffix(strings.TrimPrefix(upstreamURL, "http://"), "/mcp")})

	c := newRPCClient(t, gw.URL)
	c.initialize(`{"elicitation":{},"sampling":{}}`)
	var list struct {
		Tools []struct {
			Name      string          `json:"name"`
			Execution json.RawMessage `json:"execution"`
		} `json:"tools"`
	}
	c.result("tools/list", map[string]any{}, &list)
	names := map[string]bool{}
	for _, tool := range list.Tools {
		names[tool.Name] = true
	}
	for _, want := range []string{"echo", "trigger-long-running-operation", "simulate-research-query"} {
		if !names[want] {
			t.Errorf("tools/list through the gateway lacks %q (has %v)", want, names)
		}
	}
	var echo struct {
		Content []struct{ Text string } `json:"content"`
	}
	c.result("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"message": "hi there"}}, &echo)
	if len(echo.Content) == 0 || !strings.Contains(echo.Content[0].Text, "hi there") {
		t.Errorf("echo through the gateway = %+v, want the message back", echo)
	}
}
