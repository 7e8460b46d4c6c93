package taskproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// varsKey stands for Caddy's request variables: a map in the request's
// context that handlers (reverse_proxy among them) write to.
type varsKey struct{}

// detachWithVars is what the Caddy glue's Detach does: the copy gets a map
// of its own.
func detachWithVars(r *http.Request) *http.Request {
	vars := map[string]any{}
	if v, ok := r.Context().Value(varsKey{}).(map[string]any); ok {
		maps.Copy(vars, v)
	}
	return r.Clone(context.WithValue(context.WithoutCancel(r.Context()), varsKey{}, vars))
}

// Two upstream requests of one task in flight at once (the call's stream
// and the answers to two pings the upstream sends on it) must not share the
// variables map: the next handler writes to it, and concurrent map writes
// kill the process. Run with -race.
func TestUpstreamRequestsHaveOwnVars(t *testing.T) {
	t.Parallel()
	g := testGateway(t, Config{Detach: detachWithVars})
	var pinged sync.WaitGroup
	pinged.Add(2)
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		vars := r.Context().Value(varsKey{}).(map[string]any)
		for i := range 100 { // as reverse_proxy sets its upstream placeholders
			vars[fmt.Sprint("k", i)] = i
		}
		body, _ := io.ReadAll(r.Body)
		msg, err := jsonrpc.Parse(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if msg.Method == "tools/list" { // the gateway learns what the upstream declares of the tool first
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"slow","inputSchema":{"type":"object"}}]}}`, msg.ID)
			return
		}
		if msg.IsResponse() { // an answer to a ping
			pinged.Done()
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for _, id := range []string{`"p1"`, `"p2"`} {
			fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"ping\"}\n\n", id)
			w.(http.Flusher).Flush()
		}
		pinged.Wait()
		for i := range 100 {
			vars[fmt.Sprint("k", i)] = -i
		}
		fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[]}}\n\n", msg.ID)
	})
	req := post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","task":{"ttl":60000}}}`)
	req = req.WithContext(context.WithValue(req.Context(), varsKey{}, map[string]any{}))
	rec := httptest.NewRecorder()
	if err := g.ServeHTTP(rec, req, next); err != nil {
		t.Fatal(err)
	}
	var created struct {
		Result struct {
			Task struct{ TaskID string } `json:"task"`
		} `json:"result"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &created); err != nil || created.Result.Task.TaskID == "" {
		t.Fatalf("create answer %s", rec.Body)
	}
	waitStatus(t, g, task.Anonymous, created.Result.Task.TaskID, task.StatusCompleted)
}
