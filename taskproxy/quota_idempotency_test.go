package taskproxy

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// At the quota, a repeat of a create (same idempotency key) is answered
// with its task on both wires instead of the quota refusal; a create with a
// new key is refused.
func TestIdempotentRepeatAtQuota(t *testing.T) {
	t.Parallel()
	g := testGateway(t, Config{MaxActivePerOwner: 1})
	release := make(chan struct{})
	t.Cleanup(func() { close(release) })
	slow := answeringToolsList(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { <-release })) // keeps the task active
	create := func(key string) *jsonrpc.Message {
		t.Helper()
		body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","arguments":{"n":9007199254740993},"task":{}}}`
		rec := httptest.NewRecorder()
		if err := g.ServeHTTP(rec, post(body, "Idempotency-Key", key), slow); err != nil {
			t.Fatal(err)
		}
		m, err := jsonrpc.Parse(rec.Body.Bytes())
		if err != nil {
			t.Fatalf("HTTP %d %s", rec.Code, rec.Body)
		}
		return m
	}
	first := create("k1")
	if first.Error != nil {
		t.Fatalf("first create: %v", first.Error)
	}
	if again := create("k1"); again.Error != nil || !sameTask(again.Result, first.Result) {
		t.Errorf("repeat at the quota: %s %v, want the first task %s", again.Result, again.Error, first.Result)
	}
	if other := create("k2"); other.Error == nil || other.Error.Code != jsonrpc.CodeTooManyTasks {
		t.Errorf("new key at the quota: %s %v, want -32000", other.Result, other.Error)
	}
}

// sameTask compares the task ids of two CreateTaskResults.
func sameTask(a, b []byte) bool {
	id := func(raw []byte) string {
		tk, _ := jsonx.Get(raw, "task")
		v, _ := jsonx.Get(tk, "taskId")
		return string(v)
	}
	return id(a) != "" && id(a) == id(b)
}
