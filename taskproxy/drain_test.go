package taskproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runtime"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// A process that drains takes no new tasks: a call that would become one
// gets HTTP 503 with Retry-After and a JSON-RPC error saying to retry, on
// both wires, and never reaches the upstream; a call of a tool that never
// becomes a task passes as before.
func TestDrainingRefusesNewTasks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, body string
		headers    []string
		refused    bool
	}{
		{"2025-11-25 task-augmented call",
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"job","task":{"ttl":60000}}}`, nil, true},
		{"2026-07-28 call that may become a task",
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"job","arguments":{},` + declaring + `}}`,
			[]string{"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "job"}, true},
		{"2026-07-28 call of a forbidden tool",
			`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"plain","arguments":{},` + declaring + `}}`,
			[]string{"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", "plain"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := testGateway(t, Config{Tools: map[string]task.Support{"plain": task.SupportForbidden}})
			defer g.rt.Close(time.Second)
			mustStart(t, g)
			g.rt.Drain.Begin()
			var calls atomic.Int32
			up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				calls.Add(1)
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`))
			})
			rec := httptest.NewRecorder()
			if err := g.ServeHTTP(rec, post(tt.body, tt.headers...), up); err != nil {
				t.Fatal(err)
			}
			if !tt.refused {
				if rec.Code != http.StatusOK || calls.Load() != 1 {
					t.Errorf("answered %d %s after %d upstream calls, want the upstream's answer", rec.Code, rec.Body, calls.Load())
				}
				return
			}
			var m jsonrpc.Message
			_ = json.Unmarshal(rec.Body.Bytes(), &m)
			if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") == "" ||
				m.Error == nil || m.Error.Message != wire.MsgDraining || string(m.ID) != "1" {
				t.Errorf("answered %d (Retry-After %q) %s, want 503 with Retry-After and %q", rec.Code, rec.Header().Get("Retry-After"), rec.Body, wire.MsgDraining)
			}
			if n := calls.Load(); n != 0 {
				t.Errorf("the upstream was called %d times", n)
			}
			if n, _ := g.rt.Store.CountActive(context.Background(), task.Anonymous); n != 0 {
				t.Errorf("%d tasks were created", n)
			}
		})
	}
}

// A process that drains takes no task over from other replicas: it is
// about to stop, and the others take them.
func TestDrainingTakesNothingOver(t *testing.T) {
	t.Parallel()
	store := newMemStore(t)
	ctx := t.Context()
	rt := NewRuntime(store)
	defer rt.Close(time.Second)
	g := mustNew(t, Config{DefaultTTL: time.Minute, MaxTTL: time.Hour, MaxBody: 1 << 20, Route: "a"}, rt)
	mustStart(t, g)
	// The start's recovery pass would take the orphan itself.
	waitFor(t, "the recovery pass", func() bool { return rt.Health(ctx).Recovered })
	past := runtime.Now().Add(-time.Hour)
	id := task.NewTaskID()
	if err := store.Create(ctx, &task.Task{ID: id, Owner: "o", Status: task.StatusWorking, CreatedAt: past, UpdatedAt: past,
		TTL: 24 * time.Hour, Era: task.Era2025, Tool: "echo", Params: json.RawMessage(`{"name":"echo"}`),
		Lease: task.Lease{Holder: "another-replica", Expires: past}, Endpoint: "/mcp", Route: "a"}); err != nil {
		t.Fatal(err)
	}
	rt.Drain.Begin()
	if n, err := rt.TakeOver(runtime.Now()); n != 0 || err != nil {
		t.Fatalf("a draining process took over %d tasks (%v), want none", n, err)
	}
	if got, err := store.Get(ctx, "o", id); err != nil || got.Lease.Holder != "another-replica" {
		t.Errorf("the task's lease: %+v, %v; want it left alone", got, err)
	}
}

// The lease ttl is configuration: new tasks are leased for it, and it is
// refused out of its bounds.
func TestLeaseTTLConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name  string
		lease time.Duration
		want  time.Duration // 0: refused
	}{
		{"default", 0, DefaultLeaseTTL},
		{"smallest", MinLeaseTTL, MinLeaseTTL},
		{"largest", MaxLeaseTTL, MaxLeaseTTL},
		{"too short", MinLeaseTTL - time.Millisecond, 0},
		{"too long", MaxLeaseTTL + time.Second, 0},
		{"negative", -time.Second, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rt := NewRuntime(newMemStore(t))
			defer rt.Close(time.Second)
			g, err := New(Config{DefaultTTL: time.Minute, MaxTTL: time.Hour, MaxBody: 1 << 20, LeaseTTL: tt.lease}, rt)
			if tt.want == 0 {
				if err == nil || !strings.Contains(err.Error(), "lease ttl") {
					t.Fatalf("New with lease %s: %v, want refused", tt.lease, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			mustStart(t, g)
			before := runtime.Now()
			id := createV2025(t, g, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if body, _ := io.ReadAll(r.Body); bytes.Contains(body, []byte(`"tools/list"`)) {
					m, _ := jsonrpc.Parse(body)
					w.Header().Set("Content-Type", "application/json") // the tool declares nothing: the gateway makes the task
					_, _ = w.Write(jsonrpc.ResponseRaw(m.ID, []byte(`{"tools":[{"name":"job","inputSchema":{"type":"object"}}]}`)))
					return
				}
				<-r.Context().Done() // the call runs until the runtime closes
			}))
			got, err := rt.Store.Get(context.Background(), task.Anonymous, id)
			if err != nil {
				t.Fatal(err)
			}
			if d := got.Lease.Expires.Sub(before); d < tt.want-time.Millisecond || d > tt.want+10*time.Second {
				t.Errorf("a new task's lease runs %s from its creation, want %s", d, tt.want)
			}
			if rt.Leases.TTL() != tt.want || rt.Leases.Renew() != tt.want/3 {
				t.Errorf("leases %s renewed every %s, want %s and a third of it", rt.Leases.TTL(), rt.Leases.Renew(), tt.want)
			}
		})
	}
}
