package taskproxy

import (
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// A 2025-11-25 client's params.task.ttl is an integer as JSON Schema reads
// one: any integral spelling asks for that many milliseconds, a fraction
// is refused with -32602 naming the field (before the upstream is called),
// and an integer beyond int64 asks for the longest ttl allowed.
func TestTaskTTLSpellings(t *testing.T) {
	t.Parallel()
	g := testGateway(t, Config{}) // default ttl a minute, at most an hour
	tests := []struct {
		ttl     string
		wantTTL int64 // ms; 0: refused
	}{
		{`120000`, 120000},
		{`120000.0`, 120000},
		{`1.2e5`, 120000},
		{`120000.000`, 120000},
		{`1e400`, 3600000},
		{`120000.5`, 0},
		{`0.001`, 0},
		{`"120000"`, 0},
		{`-0.0`, 0},
	}
	for _, tt := range tests {
		up := &recordingUpstream{}
		rec := httptest.NewRecorder()
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"job","task":{"ttl":` + tt.ttl + `}}}`
		if err := g.ServeHTTP(rec, post(body), up); err != nil {
			t.Fatal(err)
		}
		var m struct {
			Result struct {
				Task struct{ TTL int64 } `json:"task"`
			} `json:"result"`
			Error *jsonrpc.Error `json:"error"`
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
			t.Fatalf("ttl %s: HTTP %d %s", tt.ttl, rec.Code, rec.Body)
		}
		switch {
		case tt.wantTTL == 0 && (m.Error == nil || m.Error.Code != jsonrpc.CodeInvalidParams || !strings.Contains(m.Error.Message, "params.task.ttl")):
			t.Errorf("ttl %s: %s, want -32602 naming params.task.ttl", tt.ttl, rec.Body)
		case tt.wantTTL == 0 && len(up.bodies) != 0:
			t.Errorf("ttl %s: refused, yet the upstream got %q", tt.ttl, up.bodies)
		case tt.wantTTL != 0 && (m.Error != nil || m.Result.Task.TTL != tt.wantTTL):
			t.Errorf("ttl %s: %s, want a task with ttl %d", tt.ttl, rec.Body, tt.wantTTL)
		}
	}
}
