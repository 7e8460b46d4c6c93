package taskproxy

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runtime"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// recordingUpstream is a next handler that keeps the bodies it is sent and
// answers each with an empty JSON-RPC result.
type recordingUpstream struct{ bodies []string }

func (u *recordingUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	u.bodies = append(u.bodies, string(body))
	if m, err := jsonrpc.Parse(body); err == nil && m.IsRequest() {
		data, _ := jsonrpc.ResponseBytes(m.ID, json.RawMessage(`{"content":[]}`))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(data)
		return
	}
	w.WriteHeader(http.StatusAccepted)
}

// The gateway is fail-closed: a POST body it cannot read exactly as an
// upstream's JSON reader will (Go's encoding/json matches keys under Unicode
// case folding and takes the last duplicate; readers that stop after the
// first value ignore what follows; SDKs that still run batches run each
// element) is refused with HTTP 400, -32700 for what is not one JSON value
// and -32600 for the rest, and never reaches the upstream.
func TestMalformedRequests(t *testing.T) {
	t.Parallel()
	g := testGateway(t, Config{})
	const call = `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{}}}`
	tests := []struct {
		name     string
		body     string
		wantCode int    // 0: passed through
		wantID   string // the id echoed in the error; "" means null
	}{
		{"unparseable id", `{"jsonrpc":"2.0","id":01x,"method":"ping"}`, jsonrpc.CodeParseError, ""},
		{"unparseable string id", `{"jsonrpc":"2.0","id":"a\q","method":"ping"}`, jsonrpc.CodeParseError, ""},
		{"unparseable id of a response", `{"jsonrpc":"2.0","id":1.2.3,"result":{}}`, jsonrpc.CodeParseError, ""},
		{"object id", `{"jsonrpc":"2.0","id":{"a":1},"method":"tools/call","params":{"name":"x"}}`, jsonrpc.CodeInvalidRequest, ""},
		{"array id", `{"jsonrpc":"2.0","id":[1],"method":"ping"}`, jsonrpc.CodeInvalidRequest, ""},
		{"boolean id", `{"jsonrpc":"2.0","id":true,"method":"ping"}`, jsonrpc.CodeInvalidRequest, ""},
		{"object id on 2026-07-28", `{"jsonrpc":"2.0","id":{},"method":"tasks/get","params":{"taskId":"a",` + declaring + `}}`, jsonrpc.CodeInvalidRequest, ""},
		{"method in another case too", `{"jsonrpc":"2.0","id":1,"method":"ping","Method":"tools/call","params":{"name":"x"}}`, jsonrpc.CodeInvalidRequest, ""},
		{"method twice", `{"jsonrpc":"2.0","id":1,"method":"ping","method":"tools/call"}`, jsonrpc.CodeInvalidRequest, ""},
		{"escaped method twice", `{"jsonrpc":"2.0","id":1,"method":"ping","\u006dethod":"tools/call"}`, jsonrpc.CodeInvalidRequest, ""},
		{"params in another case only", `{"jsonrpc":"2.0","id":1,"method":"tools/call","PARAMS":{"name":"x"}}`, jsonrpc.CodeInvalidRequest, ""},
		// U+017F (long s) folds to "s", U+212A (Kelvin) to "k": the length
		// of such a key is not the length of the name it stands for.
		{"version key with a long s", `{"j\u017fonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"}}`, jsonrpc.CodeInvalidRequest, ""},
		{"raw long s", "{\"j\u017fonrpc\":\"2.0\",\"id\":1,\"method\":\"tools/call\",\"params\":{\"name\":\"x\"}}", jsonrpc.CodeInvalidRequest, ""},
		{"tool name in another case", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"safe","NAME":"dangerous"}}`, jsonrpc.CodeInvalidRequest, "7"},
		{"tool name only in another case", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"Name":"dangerous"}}`, jsonrpc.CodeInvalidRequest, "7"},
		{"tool name twice", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"safe","name":"dangerous"}}`, jsonrpc.CodeInvalidRequest, "7"},
		{"task twice", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","task":{},"task":{"ttl":1000}}}`, jsonrpc.CodeInvalidRequest, "7"},
		{"ttl in another case", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","task":{"ttl":1000,"TTL":5}}}`, jsonrpc.CodeInvalidRequest, "7"},
		{"task id with a Kelvin sign", `{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"taskId":"a","tas\u212aId":"b"}}`, jsonrpc.CodeInvalidRequest, "7"},
		{"meta twice", `{"jsonrpc":"2.0","id":7,"method":"ping","params":{"_meta":{},"_meta":{"progressToken":1}}}`, jsonrpc.CodeInvalidRequest, "7"},
		{"meta member twice", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":1,"progressToken":2}}}`, jsonrpc.CodeInvalidRequest, "7"},
		{"tasks capability in another case", `{"jsonrpc":"2.0","id":7,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{"tasks":{},"TASKS":{"requests":{}}},"clientInfo":{"name":"c","version":"1"}}}`, jsonrpc.CodeInvalidRequest, "7"},
		{"extension declared twice", `{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"x","_meta":{"io.modelcontextprotocol/clientCapabilities":{"extensions":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}`, jsonrpc.CodeInvalidRequest, "7"},
		{"bytes after the message", call + `x`, jsonrpc.CodeParseError, ""},
		{"a second message", call + call, jsonrpc.CodeParseError, ""},
		{"a stray brace", call + `}`, jsonrpc.CodeParseError, ""},
		{"not JSON", `hello`, jsonrpc.CodeParseError, ""},
		{"empty", ``, jsonrpc.CodeParseError, ""},
		{"truncated", `{"jsonrpc":"2.0","id":1,"method":"ping"`, jsonrpc.CodeParseError, ""},
		{"invalid string inside params", `{"jsonrpc":"2.0","id":1,"method":"ping","params":{"a":"\x"}}`, jsonrpc.CodeParseError, ""},
		{"form feed before the message", "\f" + call, jsonrpc.CodeParseError, ""},
		{"batch", `[{"jsonrpc":"2.0","id":1,"method":"ping"}]`, jsonrpc.CodeInvalidRequest, ""},
		{"empty batch", `[]`, jsonrpc.CodeInvalidRequest, ""},
		{"other JSON", `{"hello":"world"}`, jsonrpc.CodeInvalidRequest, ""},
		{"a string", `"tools/call"`, jsonrpc.CodeInvalidRequest, ""},
		{"no version", `{"id":1,"method":"tools/call","params":{"name":"x"}}`, jsonrpc.CodeInvalidRequest, ""},
		{"other members in any case", `{"jsonrpc":"2.0","id":1,"method":"ping","Extra":1,"meta":{}}`, 0, ""},
		{"other params members in any case", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x","arguments":{"Name":1,"name":2},"Other":1,"other":2}}`, 0, ""},
		{"string id", `{"jsonrpc":"2.0","id":"a","method":"ping"}`, 0, ""},
		{"negative id", `{"jsonrpc":"2.0","id":-3,"method":"ping"}`, 0, ""},
		{"whitespace around", " \t\r\n" + call + "\n ", 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			up := &recordingUpstream{}
			rec := httptest.NewRecorder()
			if err := g.ServeHTTP(rec, post(tt.body), up); err != nil {
				t.Fatal(err)
			}
			if tt.wantCode == 0 {
				if len(up.bodies) != 1 || up.bodies[0] != tt.body {
					t.Errorf("upstream got %q, want the body as is (HTTP %d %s)", up.bodies, rec.Code, rec.Body)
				}
				return
			}
			if len(up.bodies) != 0 {
				t.Errorf("upstream got %q", up.bodies)
			}
			var m struct {
				ID    json.RawMessage `json:"id"`
				Error *jsonrpc.Error  `json:"error"`
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &m); err != nil || m.Error == nil {
				t.Fatalf("HTTP %d %s: not a JSON-RPC error", rec.Code, rec.Body)
			}
			wantID := tt.wantID
			if wantID == "" {
				wantID = "null"
			}
			if rec.Code != http.StatusBadRequest || m.Error.Code != tt.wantCode || string(m.ID) != wantID {
				t.Errorf("HTTP %d, error %d %q, id %s; want 400, %d, id %s", rec.Code, m.Error.Code, m.Error.Message, m.ID, tt.wantCode, wantID)
			}
		})
	}
}

// PassUnreadable hands what the gateway cannot read to the upstream as is.
func TestPassUnreadable(t *testing.T) {
	t.Parallel()
	g := testGateway(t, Config{PassUnreadable: true})
	for _, body := range []string{
		`hello`,
		`[{"jsonrpc":"2.0","id":1,"method":"ping"}]`,
		`{"jsonrpc":"2.0","id":1,"method":"ping"}x`,
		`{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"safe","NAME":"dangerous"}}`,
	} {
		up := &recordingUpstream{}
		rec := httptest.NewRecorder()
		if err := g.ServeHTTP(rec, post(body), up); err != nil {
			t.Fatal(err)
		}
		if len(up.bodies) != 1 || up.bodies[0] != body {
			t.Errorf("%s: upstream got %q, want the body as is (HTTP %d %s)", body, up.bodies, rec.Code, rec.Body)
		}
	}
}

// Plain calls keep the client's ids, so a client's cancellation reaches
// the upstream untouched; the gateway's own ids are not the client's to
// cancel.
func TestClientCancellation(t *testing.T) {
	t.Parallel()
	g := testGateway(t, Config{})
	if err := g.rt.Store.BindSession(context.Background(), "s1", task.Anonymous, time.Hour); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		body      string
		forwarded bool
	}{
		{"plain call", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":7,"reason":"user"}}`, true},
		{"gateway id", `{"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"mcp-tasks:abc:call:1"}}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			up := &recordingUpstream{}
			rec := httptest.NewRecorder()
			if err := g.ServeHTTP(rec, post(tt.body, "Mcp-Session-Id", "s1"), up); err != nil {
				t.Fatal(err)
			}
			if tt.forwarded != (len(up.bodies) == 1 && up.bodies[0] == tt.body) || rec.Code != http.StatusAccepted {
				t.Errorf("HTTP %d, upstream got %q; want 202, forwarded as is: %v", rec.Code, up.bodies, tt.forwarded)
			}
		})
	}
}

// A 2026-07-28 call that will not become a task (a forbidden tool) reaches
// the upstream without the tasks extension in its client capabilities, so
// that the upstream does not make a task of it. A call with no room for a
// task is refused as on the 2025-11-25 wire, and never reaches the upstream.
func TestPassThroughStripsTasksExtension(t *testing.T) {
	t.Parallel()
	g := testGateway(t, Config{Tools: map[string]task.Support{"nope": task.SupportForbidden}, MaxActivePerOwner: 1, TaskAfter: time.Minute})
	now := runtime.Now()
	// Held by this process, as a running worker's task is: without a
	// lease, the recovery that runs at the start could take it for an
	// orphan and fail it, which left room for the call now and then.
	// It counts against the address the test's requests come from
	// (httptest's RemoteAddr), as an anonymous caller's tasks do.
	busy := &task.Task{ID: task.NewTaskID(), Owner: task.Anonymous, QuotaKey: "ip:192.0.2.1", Status: task.StatusWorking, CreatedAt: now, UpdatedAt: now, TTL: time.Hour, Era: task.Era2026,
		Lease: task.Lease{Holder: g.rt.Store.Holder(), Expires: now.Add(time.Hour)}}
	if err := g.rt.Store.Create(context.Background(), busy); err != nil {
		t.Fatal(err)
	}
	call := func(t *testing.T, tool string) (*recordingUpstream, *httptest.ResponseRecorder) {
		t.Helper()
		up := &recordingUpstream{}
		body := `{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"` + tool + `","arguments":{"q":1},` + declaring + `}}`
		rec := httptest.NewRecorder()
		if err := g.ServeHTTP(rec, post(body, "MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", tool), up); err != nil {
			t.Fatal(err)
		}
		return up, rec
	}
	t.Run("over the cap", func(t *testing.T) {
		up, rec := call(t, "any")
		m, err := jsonrpc.Parse(rec.Body.Bytes())
		if len(up.bodies) != 0 || err != nil || m.Error == nil || m.Error.Code != jsonrpc.CodeTooManyTasks {
			t.Errorf("upstream got %d bodies, answer HTTP %d %s; want the quota refusal only", len(up.bodies), rec.Code, rec.Body)
		}
	})
	for _, tool := range []string{"nope"} {
		t.Run(tool, func(t *testing.T) {
			t.Parallel()
			up, rec := call(t, tool)
			if len(up.bodies) != 1 {
				t.Fatalf("upstream got %d bodies; answer HTTP %d %s", len(up.bodies), rec.Code, rec.Body)
			}
			got := up.bodies[0]
			if strings.Contains(got, wire.ExtensionTasks) || !strings.Contains(got, `"arguments":{"q":1}`) || !strings.Contains(got, `"id":5`) {
				t.Errorf("upstream got %s, want the call without the tasks extension", got)
			}
			if m, err := jsonrpc.Parse(rec.Body.Bytes()); err != nil || m.Result == nil {
				t.Errorf("answer HTTP %d %s, want the upstream's result", rec.Code, rec.Body)
			}
		})
	}
}
