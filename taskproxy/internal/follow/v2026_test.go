package follow

import (
	"encoding/json"
	"errors"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

func TestReadV2026Created(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, result string
		ok           bool
		want         V2026Created
	}{
		{"created", `{"resultType":"task","taskId":"t1","status":"working","statusMessage":"step 1 of 3","pollIntervalMs":20}`, true,
			V2026Created{TaskID: "t1", Status: task.StatusWorking, StatusMessage: "step 1 of 3", PollIntervalMs: 20}},
		// Numbers as JSON Schema reads them: fastmcp-tasks writes floats.
		{"integral floats", `{"resultType":"task","taskId":"t1","status":"working","ttlMs":900000.0,"pollIntervalMs":5000.0}`, true,
			V2026Created{TaskID: "t1", Status: task.StatusWorking, PollIntervalMs: 5000}},
		{"exponent", `{"resultType":"task","taskId":"t1","status":"working","pollIntervalMs":5e3}`, true,
			V2026Created{TaskID: "t1", Status: task.StatusWorking, PollIntervalMs: 5000}},
		{"fraction ignored", `{"resultType":"task","taskId":"t1","status":"working","pollIntervalMs":2.5}`, true,
			V2026Created{TaskID: "t1", Status: task.StatusWorking, PollIntervalErr: jsonx.ErrNotIntegral}},
		{"string ignored", `{"resultType":"task","taskId":"t1","status":"working","pollIntervalMs":"5000"}`, true,
			V2026Created{TaskID: "t1", Status: task.StatusWorking, PollIntervalErr: jsonx.ErrNotNumber}},
		{"beyond int64 clamped", `{"resultType":"task","taskId":"t1","status":"working","pollIntervalMs":1e400}`, true,
			V2026Created{TaskID: "t1", Status: task.StatusWorking, PollIntervalMs: math.MaxInt64, PollIntervalErr: jsonx.ErrIntRange}},
		{"tool result", `{"resultType":"complete","content":[]}`, false, V2026Created{}},
		{"2025-11-25 shape", `{"task":{"taskId":"t1","status":"working"}}`, false, V2026Created{}},
		{"no id", `{"resultType":"task","status":"working"}`, false, V2026Created{}},
		{"input required", `{"resultType":"input_required","inputRequests":{}}`, false, V2026Created{}},
		{"empty", ``, false, V2026Created{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, ok := ReadV2026Created(json.RawMessage(tt.result))
			gotErr, wantErr := got.PollIntervalErr, tt.want.PollIntervalErr
			got.PollIntervalErr, tt.want.PollIntervalErr = nil, nil
			if ok != tt.ok || got != tt.want || !errors.Is(gotErr, wantErr) || (wantErr == nil) != (gotErr == nil) {
				t.Errorf("ReadV2026Created(%s) = %+v, %v; want %+v, %v", tt.result, got, ok, tt.want, tt.ok)
			}
		})
	}
}

// An odd number of an upstream's answer is noted at debug level, and the
// rest of the answer still read: a client's call awaiting the upstream's
// task gets its result.
func TestV2026UpstreamNumbersLogged(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zap.DebugLevel)
	log := zap.New(core)
	created, ok := ReadV2026Created(json.RawMessage(`{"resultType":"task","taskId":"t1","ttlMs":900000.0,"pollIntervalMs":0.5}`))
	if !ok || created.TaskID != "t1" {
		t.Fatalf("ReadV2026Created = %+v, %v", created, ok)
	}
	gets := 0
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		m, err := jsonrpc.Parse(body)
		if err != nil || m.Method != "tasks/get" {
			http.Error(w, "want tasks/get", http.StatusBadRequest)
			return
		}
		gets++
		result := `{"taskId":"t1","status":"working","ttlMs":900000.0,"pollIntervalMs":{"ms":1}}`
		if gets > 1 {
			result = `{"taskId":"t1","status":"completed","ttlMs":900000.0,"pollIntervalMs":50.0,"result":{"content":[]}}`
		}
		out, _ := jsonrpc.ResponseBytes(m.ID, json.RawMessage(result))
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(out)
	})
	base := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	out, err := AwaitV2026UpstreamTask(t.Context(), log, base, next, json.RawMessage(`{"name":"x"}`), created, nil)
	if err != nil || string(out.Result) != `{"content":[]}` {
		t.Fatalf("AwaitV2026UpstreamTask = %+v, %v", out, err)
	}
	entries := logs.FilterField(zap.String("field", "pollIntervalMs")).All()
	if len(entries) != 2 || entries[0].Level != zap.DebugLevel || entries[0].ContextMap()["answer"] != "CreateTaskResult" || entries[1].ContextMap()["answer"] != "tasks/get" {
		t.Fatalf("debug entries = %+v, want the CreateTaskResult's and the first tasks/get's pollIntervalMs", entries)
	}
	// An error's code spelled as a float is read too.
	up, err := readV2026UpstreamTask(json.RawMessage(`{"taskId":"t1","status":"failed","pollIntervalMs":5000.0,"error":{"code":-32603.0,"message":"boom"}}`), log)
	if err != nil || up.PollIntervalMs.Value != 5000 || up.Error == nil || up.Error.Code != -32603 {
		t.Fatalf("readV2026UpstreamTask = %+v, %v", up, err)
	}
}

func TestPollEvery(t *testing.T) {
	t.Parallel()
	tests := []struct {
		ms   int64
		want time.Duration
	}{
		{0, minV2026Poll},
		{-5, minV2026Poll},
		{1, minV2026Poll},
		{5000, 5 * time.Second},
		{3600000, maxV2026Poll},
		// Converted before clamping, this overflowed time.Duration into
		// a negative interval: polls as fast as allowed.
		{10_000_000_000_000, maxV2026Poll},
		{math.MaxInt64, maxV2026Poll},
	}
	for _, tt := range tests {
		if got := pollEvery(tt.ms); got != tt.want {
			t.Errorf("pollEvery(%d) = %s, want %s", tt.ms, got, tt.want)
		}
	}
}

func TestClampV2026Poll(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want time.Duration }{
		{0, minV2026Poll},
		{time.Millisecond, minV2026Poll},
		{time.Second, time.Second},
		{time.Hour, maxV2026Poll},
	}
	for _, tt := range tests {
		if got := clampV2026Poll(tt.in); got != tt.want {
			t.Errorf("clampV2026Poll(%s) = %s, want %s", tt.in, got, tt.want)
		}
	}
}

func TestV2026ClientCapabilities(t *testing.T) {
	t.Parallel()
	tests := []struct{ name, params, want string }{
		{"the call's", `{"_meta":{"io.modelcontextprotocol/clientCapabilities":{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}}}`,
			`{"elicitation":{},"extensions":{"io.modelcontextprotocol/tasks":{}}}`},
		{"none recorded", `{"name":"x"}`, `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`},
		{"not an object", `{"_meta":{"io.modelcontextprotocol/clientCapabilities":7}}`, `{"extensions":{"io.modelcontextprotocol/tasks":{}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := string(v2026ClientCapabilities(json.RawMessage(tt.params))); got != tt.want {
				t.Errorf("got %s, want %s", got, tt.want)
			}
		})
	}
}

// A 2025-11-25 task following a 2026-07-28 upstream's (the reverse
// bridge's) records the result in 2025-11-25 form; a 2026-07-28 task keeps
// the upstream's.
func TestV2026ResultFor(t *testing.T) {
	t.Parallel()
	result := json.RawMessage(`{"resultType":"complete","content":[],"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"up"}}}`)
	tests := []struct {
		era  task.Era
		want string
	}{
		{task.Era2025, `{"content":[]}`},
		{task.Era2026, string(result)},
	}
	for _, tt := range tests {
		if got := V2026ResultFor(&task.Task{Era: tt.era}, result); string(got) != tt.want {
			t.Errorf("era %s: %s, want %s", tt.era, got, tt.want)
		}
	}
}
