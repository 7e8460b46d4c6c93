package taskproxy

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runtime"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// A task method without Mcp-Name, as FastMCP's tasks client sends it, is
// served with the name taken from params.taskId; a name that disagrees is
// refused either way, and StrictRoutingHeaders refuses the missing one.
//
//nolint:paralleltest,tparallel // each case checks the task its subtest left
func TestTaskMethodsWithoutMcpName(t *testing.T) {
	t.Parallel()
	for _, strict := range []bool{false, true} {
		g := testGateway(t, Config{StrictRoutingHeaders: strict})
		mustStart(t, g)
		now := runtime.Now()
		// Leased to this process, as a running task's is: recovery, which
		// runs after the start, leaves it alone.
		tk := &task.Task{ID: task.NewTaskID(), Owner: task.Anonymous, Status: task.StatusWorking, Era: task.Era2026,
			CreatedAt: now, UpdatedAt: now, TTL: time.Hour, Tool: "slow",
			Lease: task.Lease{Holder: g.rt.Store.Holder(), Expires: now.Add(time.Hour)}}
		if err := g.rt.Store.Create(context.Background(), tk); err != nil {
			t.Fatal(err)
		}
		tests := []struct {
			name, method, params string
			mcpName              []string // nil: no header
			wantStatus, wantCode int      // wantCode 0: a result
			wantName             string   // the Mcp-Name the request carries afterwards
		}{
			{"get without Mcp-Name", "tasks/get", `"taskId":"` + tk.ID + `"`, nil, 200, 0, tk.ID},
			{"get with a mismatching Mcp-Name", "tasks/get", `"taskId":"` + tk.ID + `"`, []string{"other"}, 400, jsonrpc.CodeHeaderMismatch, "other"},
			{"update without Mcp-Name", "tasks/update", `"taskId":"` + tk.ID + `","inputResponses":{}`, nil, 200, 0, tk.ID},
			{"cancel without Mcp-Name", "tasks/cancel", `"taskId":"` + tk.ID + `"`, nil, 200, 0, tk.ID},
		}
		for _, tt := range tests {
			t.Run(tt.name+map[bool]string{true: " (strict)", false: ""}[strict], func(t *testing.T) {
				headers := []string{"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", tt.method}
				for _, v := range tt.mcpName {
					headers = append(headers, "Mcp-Name", v)
				}
				r := post(`{"jsonrpc":"2.0","id":1,"method":"`+tt.method+`","params":{`+tt.params+`,`+declaring+`}}`, headers...)
				rec := httptest.NewRecorder()
				next := http.HandlerFunc(func(http.ResponseWriter, *http.Request) { t.Error("the upstream was called") })
				if err := g.ServeHTTP(rec, r, next); err != nil {
					t.Fatal(err)
				}
				status, code, name := tt.wantStatus, tt.wantCode, tt.wantName
				if strict && tt.mcpName == nil {
					status, code, name = 400, jsonrpc.CodeHeaderMismatch, ""
				}
				var m jsonrpc.Message
				if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
					t.Fatalf("answer %s: %v", rec.Body, err)
				}
				switch {
				case rec.Code != status:
					t.Errorf("HTTP %d, want %d: %s", rec.Code, status, rec.Body)
				case code == 0 && (m.Error != nil || m.Result == nil):
					t.Errorf("want a result, got %s", rec.Body)
				case code == 0 && tt.method == "tasks/get" && !strings.Contains(string(m.Result), tk.ID):
					t.Errorf("want the task, got %s", rec.Body)
				case code != 0 && (m.Error == nil || m.Error.Code != code):
					t.Errorf("want error %d, got %s", code, rec.Body)
				}
				if got := r.Header.Get("Mcp-Name"); got != name {
					t.Errorf("Mcp-Name afterwards %q, want %q", got, name)
				}
			})
		}
		rec, err := g.rt.Store.Get(context.Background(), task.Anonymous, tk.ID)
		if want := map[bool]task.Status{false: task.StatusCancelled, true: task.StatusWorking}[strict]; err != nil || rec.Status != want {
			t.Errorf("strict %v: task %v, %v; want %s", strict, rec.Status, err, want)
		}
	}
}

// A tools/call the gateway passes on (a client without the tasks
// extension, a tool forbidden as a task, params the gateway leaves to the
// upstream) never leaves it with an Mcp-Name or Mcp-Method that disagrees
// with the body: the gateway decided mode, quota and audit by params.name,
// and whatever routes by the header would run another tool. A missing
// header is passed on, as before.
func TestPassedOnToolsCallRoutingHeaders(t *testing.T) {
	t.Parallel()
	g := testGateway(t, Config{Tools: map[string]task.Support{"never": task.SupportForbidden}})
	mustStart(t, g)
	tests := []struct {
		name, params string
		headers      []string
		wantPassed   bool
		wantCode     int
	}{
		{"plain client, no Mcp-Name", `"name":"greet",` + plainCaps, nil, true, 0},
		{"plain client, matching Mcp-Name", `"name":"greet",` + plainCaps, []string{"Mcp-Name", "greet"}, true, 0},
		{"plain client, base64 Mcp-Name", `"name":"grüß",` + plainCaps, []string{"Mcp-Name", "=?base64?Z3LDvMOf?="}, true, 0},
		{"plain client, mismatching Mcp-Name", `"name":"greet",` + plainCaps, []string{"Mcp-Name", "delete_everything"}, false, jsonrpc.CodeHeaderMismatch},
		{"forbidden tool, mismatching Mcp-Name", `"name":"never",` + declaring, []string{"Mcp-Name", "greet"}, false, jsonrpc.CodeHeaderMismatch},
		{"no _meta, mismatching Mcp-Name", `"name":"greet"`, []string{"Mcp-Name", "other"}, false, jsonrpc.CodeHeaderMismatch},
		{"no _meta, mismatching Mcp-Method", `"name":"greet"`, []string{"Mcp-Method", "tools/list"}, false, jsonrpc.CodeHeaderMismatch},
		{"Mcp-Name without a name", `"arguments":{},` + plainCaps, []string{"Mcp-Name", "greet"}, false, jsonrpc.CodeInvalidParams},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			headers := append([]string{"MCP-Protocol-Version", "2026-07-28"}, tt.headers...)
			r := post(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{`+tt.params+`}}`, headers...)
			rec := httptest.NewRecorder()
			passed := false
			next := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				passed = true
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":1,"result":{"content":[]}}`))
			})
			if err := g.ServeHTTP(rec, r, next); err != nil {
				t.Fatal(err)
			}
			if passed != tt.wantPassed {
				t.Fatalf("passed on %v, want %v: HTTP %d %s", passed, tt.wantPassed, rec.Code, rec.Body)
			}
			if tt.wantCode == 0 {
				return
			}
			var m jsonrpc.Message
			if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil {
				t.Fatalf("answer %s: %v", rec.Body, err)
			}
			if rec.Code != http.StatusBadRequest || m.Error == nil || m.Error.Code != tt.wantCode {
				t.Errorf("HTTP %d %s, want 400 with error %d", rec.Code, rec.Body, tt.wantCode)
			}
		})
	}
}
