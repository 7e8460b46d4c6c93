package taskproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runtime"
	v2026 "github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire/v2026"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// countingStore counts the lookups made through it.
type countingStore struct {
	task.Store
	gets atomic.Int64
}

func (s *countingStore) Get(ctx context.Context, owner, id string) (*task.Task, error) {
	s.gets.Add(1)
	return s.Store.Get(ctx, owner, id)
}

func idList(n int) string {
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("%q", fmt.Sprint("t", i%(n/2+1)))
	}
	return "[" + strings.Join(ids, ",") + "]"
}

func answerObject(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`"k%d":{"action":"accept"}`, i)
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// Oversized id and answer lists are refused with -32602 naming the limit,
// before the store is asked anything.
func TestOversizedListsRefused(t *testing.T) {
	t.Parallel()
	store := &countingStore{Store: newMemStore(t)}
	g, err := New(Config{DefaultTTL: 60e9, MaxTTL: 3600e9, MaxBody: 64 << 20}, NewRuntime(store))
	if err != nil {
		t.Fatal(err)
	}
	hdr := func(method, name string) []string {
		h := []string{"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", method}
		if name != "" {
			h = append(h, "Mcp-Name", name)
		}
		return h
	}
	tests := []struct {
		name    string
		body    string
		headers []string
	}{
		{"listen with 1001 ids", `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"taskIds":` + idList(1001) + `},` + declaring + `}}`,
			hdr("subscriptions/listen", "")},
		{"listen with 200000 ids", `{"jsonrpc":"2.0","id":1,"method":"subscriptions/listen","params":{"notifications":{"taskIds":` + idList(200000) + `},` + declaring + `}}`,
			hdr("subscriptions/listen", "")},
		{"update with 1001 answers", `{"jsonrpc":"2.0","id":1,"method":"tasks/update","params":{"taskId":"a","inputResponses":` + answerObject(1001) + `,` + declaring + `}}`,
			hdr("tasks/update", "a")},
		{"update with 200000 answers", `{"jsonrpc":"2.0","id":1,"method":"tasks/update","params":{"taskId":"a","inputResponses":` + answerObject(200000) + `,` + declaring + `}}`,
			hdr("tasks/update", "a")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			before := store.gets.Load()
			next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("the upstream was called") })
			rec := httptest.NewRecorder()
			if err := g.ServeHTTP(rec, post(tt.body, tt.headers...), next); err != nil {
				t.Fatal(err)
			}
			var m jsonrpc.Message
			if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil || m.Error == nil {
				t.Fatalf("HTTP %d %.200s: not a JSON-RPC error", rec.Code, rec.Body)
			}
			if rec.Code != http.StatusBadRequest || m.Error.Code != jsonrpc.CodeInvalidParams || !strings.Contains(m.Error.Message, "1000") {
				t.Errorf("HTTP %d %d %q, want 400 -32602 naming the limit 1000", rec.Code, m.Error.Code, m.Error.Message)
			}
			if n := store.gets.Load() - before; n != 0 {
				t.Errorf("%d store lookups before the refusal", n)
			}
		})
	}
}

func TestListenTaskIDs(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		params  string
		want    []string
		present bool
		refused bool
	}{
		{"absent", `{}`, nil, false, false},
		{"no params", ``, nil, false, false},
		{"null", `{"notifications":{"taskIds":null}}`, nil, false, false},
		{"other filters only", `{"notifications":{"tools":{}}}`, nil, false, false},
		{"empty", `{"notifications":{"taskIds":[]}}`, []string{}, true, false},
		{"repeats dropped", `{"notifications":{"taskIds":["a","b","a","b","c"]}}`, []string{"a", "b", "c"}, true, false},
		{"at the limit", `{"notifications":{"taskIds":` + idList(1000) + `}}`, nil, true, false},
		{"over the limit", `{"notifications":{"taskIds":` + idList(1001) + `}}`, nil, true, true},
		{"not strings", `{"notifications":{"taskIds":[1,2]}}`, nil, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ids, present, e := v2026.ListenTaskIDs(json.RawMessage(tt.params))
			if present != tt.present || (e != nil) != tt.refused {
				t.Fatalf("present %v, error %v; want %v, refused %v", present, e, tt.present, tt.refused)
			}
			if tt.want != nil && fmt.Sprint(ids) != fmt.Sprint(tt.want) {
				t.Errorf("ids = %v, want %v", ids, tt.want)
			}
			if tt.name == "at the limit" && len(ids) != 501 {
				t.Errorf("%d ids, want 501 distinct", len(ids))
			}
		})
	}
}

// answerInputs applies the answers to the task's own outstanding inputs and
// ignores the rest, however many.
func TestAnswerInputsIgnoresUnknownKeys(t *testing.T) {
	t.Parallel()
	g := testGateway(t, Config{})
	ctx := context.Background()
	tk := &task.Task{ID: task.NewTaskID(), Owner: "o", Status: task.StatusWorking, CreatedAt: runtime.Now(), UpdatedAt: runtime.Now(), TTL: 60e9, Era: task.Era2026, Round: 1}
	k1 := tk.AddInput(task.InputRequest{Method: "elicitation/create", UpstreamKey: "u1", Round: 1})
	k2 := tk.AddInput(task.InputRequest{Method: "elicitation/create", UpstreamKey: "u2", Round: 1})
	tk.Status = task.StatusInputRequired
	if err := g.rt.Store.Create(ctx, tk); err != nil {
		t.Fatal(err)
	}
	answers := map[string]runtime.InputAnswer{}
	for i := range runtime.MaxInputResponses {
		answers[fmt.Sprint("x", i)] = runtime.InputAnswer{Result: json.RawMessage(`1`)}
	}
	answers[k1] = runtime.InputAnswer{Result: json.RawMessage(`{"a":1}`)}
	got, err := g.env.Route.AnswerInputs(ctx, "o", tk.ID, answers, post(`{}`), http.NotFoundHandler())
	if err != nil {
		t.Fatal(err)
	}
	if in, _ := got.Input(k1); !in.Answered || string(in.Response) != `{"a":1}` {
		t.Errorf("input %s = %+v, want answered", k1, in)
	}
	if in, _ := got.Input(k2); in.Answered || got.Status != task.StatusInputRequired {
		t.Errorf("input %s = %+v, status %s: want still outstanding", k2, in, got.Status)
	}
	if len(got.Inputs) != 2 {
		t.Errorf("%d inputs recorded, want 2", len(got.Inputs))
	}
}
