package taskproxy

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/bridge"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/sse"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// askUpstream is a 2025-11-25 server with sessions whose tools ask the
// client for input: tools/call of "ask" or "other" sends elicitation/create
// on the call's stream and holds the call open until the answer comes (the
// result then names the tool and the answer) or the call is given up; "echo"
// answers at once.
type askUpstream struct {
	mu      sync.Mutex
	inits   int
	waiting map[string]chan json.RawMessage // by elicitation id
	next    int
}

func newAskUpstream() *askUpstream { return &askUpstream{waiting: map[string]chan json.RawMessage{}} }

func (u *askUpstream) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method == http.MethodDelete {
		w.WriteHeader(http.StatusOK)
		return
	}
	body, _ := io.ReadAll(r.Body)
	m, err := jsonrpc.Parse(body)
	if err != nil {
		w.WriteHeader(http.StatusBadRequest)
		return
	}
	switch {
	case m.Method == "initialize":
		u.mu.Lock()
		u.inits++
		id := fmt.Sprintf("s-%d", u.inits)
		u.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set(upstream.HeaderSessionID, id)
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":` + string(m.ID) + `,"result":{"protocolVersion":"2025-11-25","capabilities":{"tools":{}},"serverInfo":{"name":"ask","version":"1"}}}`))
	case m.Method == "server/discover":
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Bad Request: Server not initialized"}}`))
	case m.IsResponse():
		u.mu.Lock()
		var key string
		_ = json.Unmarshal(m.ID, &key)
		ch := u.waiting[key]
		delete(u.waiting, key)
		u.mu.Unlock()
		if ch != nil {
			ch <- m.Result
		}
		w.WriteHeader(http.StatusAccepted)
	case m.Method == "tools/call":
		name, _ := wire.StringParam(m.Params, "name")
		w.Header().Set("Content-Type", "text/event-stream")
		if name == "echo" {
			_, _ = io.WriteString(w, "data: "+`{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"content":[{"type":"text","text":"echo"}]}}`+"\n\n")
			return
		}
		u.mu.Lock()
		u.next++
		key := fmt.Sprintf("e-%d", u.next)
		ch := make(chan json.RawMessage, 1)
		u.waiting[key] = ch
		u.mu.Unlock()
		_, _ = io.WriteString(w, "data: "+`{"jsonrpc":"2.0","id":"`+key+`","method":"elicitation/create","params":{"message":"?"}}`+"\n\n")
		w.(http.Flusher).Flush()
		select {
		case answer := <-ch:
			text, _ := json.Marshal(name + " " + string(answer))
			_, _ = io.WriteString(w, "data: "+`{"jsonrpc":"2.0","id":`+string(m.ID)+`,"result":{"content":[{"type":"text","text":`+string(text)+`}]}}`+"\n\n")
		case <-r.Context().Done():
		}
	default: // notifications
		w.WriteHeader(http.StatusAccepted)
	}
}

const askCaps = `"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}`

// bridgedCallOf sends who's bridged tools/call with params (a JSON object's
// members without braces) and returns the answer and its HTTP status.
func bridgedCallOf(t *testing.T, g *Gateway, next http.Handler, who, params string) (*jsonrpc.Message, int) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + params + `,` + askCaps + `}}`
	name, _ := wire.StringParam(json.RawMessage(`{`+params+`}`), "name")
	r := WithCaller(post(body, "MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", name), task.Caller{Owner: who, Principal: who})
	w := httptest.NewRecorder()
	if err := g.ServeHTTP(w, r, next); err != nil {
		t.Fatal(err)
	}
	text := w.Body.String()
	if strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") {
		events := sse.NewReader(strings.NewReader(text))
		for {
			ev, err := events.Next()
			if err != nil {
				break
			}
			text = ev.Data
		}
	}
	m, err := jsonrpc.Parse([]byte(text))
	if err != nil {
		t.Fatalf("HTTP %d %q: %v", w.Code, w.Body.String(), err)
	}
	return m, w.Code
}

// bridgeGateway is a gateway whose upstream speaks 2025-11-25 only.
func bridgeGateway(t *testing.T, cfg Config) *Gateway {
	t.Helper()
	g := testGateway(t, cfg)
	g.bridge.ForgetProbe()
	t.Cleanup(g.bridge.Close)
	return g
}

// parkedState returns the requestState of an input_required answer.
func parkedState(t *testing.T, m *jsonrpc.Message) string {
	t.Helper()
	var res struct {
		ResultType   string `json:"resultType"`
		RequestState string `json:"requestState"`
	}
	if m.Error != nil || json.Unmarshal(m.Result, &res) != nil || res.ResultType != "input_required" || res.RequestState == "" {
		t.Fatalf("answer = %s %v, want input_required with a requestState", m.Result, m.Error)
	}
	return res.RequestState
}

// A retry names the parked call's tool: another name is refused with
// -32602 and leaves the call parked for the right retry (the retry's name
// decides whether the call may become a task, so it must be the call's).
func TestBridgeRetryOtherTool(t *testing.T) {
	t.Parallel()
	up := newAskUpstream()
	g := bridgeGateway(t, Config{Tools: map[string]task.Support{"ask": task.SupportForbidden, "other": task.SupportOptional}})
	state := parkedState(t, first(bridgedCallOf(t, g, up, "alice", `"name":"ask"`)))
	retry := func(name string) (*jsonrpc.Message, int) {
		return bridgedCallOf(t, g, up, "alice", `"name":"`+name+`","inputResponses":{"input-1":{"action":"accept","content":{}}},"requestState":"`+state+`"`)
	}
	m, status := retry("other")
	if m.Error == nil || m.Error.Code != jsonrpc.CodeInvalidParams || status != http.StatusBadRequest {
		t.Fatalf("retry naming another tool: HTTP %d %s %v, want 400 -32602", status, m.Result, m.Error)
	}
	m, _ = retry("ask")
	if m.Error != nil || !strings.Contains(string(m.Result), `ask {\"action\":\"accept\"`) {
		t.Errorf("retry of the call: %s %v, want ask's result", m.Result, m.Error)
	}
}

func first(m *jsonrpc.Message, _ int) *jsonrpc.Message { return m }

// refusals is a task.Observer counting the refusals by reason.
type refusals struct {
	mu sync.Mutex
	n  map[string]int
}

func (r *refusals) TaskCreated(task.Era)                           {}
func (r *refusals) TaskEnded(task.Era, task.Status, time.Duration) {}
func (r *refusals) Refused(reason string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.n == nil {
		r.n = map[string]int{}
	}
	r.n[reason]++
}

func (r *refusals) of(reason string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.n[reason]
}

// One principal's calls waiting for input are bounded by
// max_active_per_principal (else 16), refused with -32000 over it, and do
// not take the room of another principal's.
func TestBridgeParkedPerOwner(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		maxActive int
		limit     int
	}{
		{"max_active_per_principal", 3, 3},
		{"default", 0, bridge.DefaultParkedPerOwner},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			up := newAskUpstream()
			obs := &refusals{}
			g := bridgeGateway(t, Config{MaxActivePerOwner: tt.maxActive, Observer: obs})
			for range tt.limit {
				parkedState(t, first(bridgedCallOf(t, g, up, "bob", `"name":"ask"`)))
			}
			m, _ := bridgedCallOf(t, g, up, "bob", `"name":"ask"`)
			if m.Error == nil || m.Error.Code != jsonrpc.CodeTooManyTasks || !strings.Contains(m.Error.Message, fmt.Sprintf("limit %d", tt.limit)) {
				t.Fatalf("bob's call over the bound: %s %v, want -32000 naming the limit", m.Result, m.Error)
			}
			if obs.of("bridge_input") != 1 {
				t.Errorf("refusals counted %d, want 1", obs.of("bridge_input"))
			}
			// Alice's call still waits for input, and answering it frees
			// nothing of bob's but ends hers.
			state := parkedState(t, first(bridgedCallOf(t, g, up, "alice", `"name":"ask"`)))
			m, _ = bridgedCallOf(t, g, up, "alice", `"name":"ask","inputResponses":{"input-1":{"action":"decline"}},"requestState":"`+state+`"`)
			if m.Error != nil || !strings.Contains(string(m.Result), "decline") {
				t.Errorf("alice's retry: %s %v", m.Result, m.Error)
			}
			n, a := g.bridge.Parked("bob"), g.bridge.Parked("alice")
			if n != tt.limit || a != 0 {
				t.Errorf("parked calls counted bob %d alice %d, want %d and 0", n, a, tt.limit)
			}
		})
	}
}

// The rate limit applies to bridged calls that cannot become tasks too.
func TestBridgeRateLimitsPlainCalls(t *testing.T) {
	t.Parallel()
	up := newAskUpstream()
	g := bridgeGateway(t, Config{RateLimit: 1}) // bursts of 2
	codes := []int{}
	for range 3 {
		_, status := bridgedCallOf(t, g, up, "bob", `"name":"echo"`)
		codes = append(codes, status)
	}
	if codes[0] != http.StatusOK || codes[2] != http.StatusTooManyRequests {
		t.Errorf("statuses %v, want the third refused with 429", codes)
	}
}

// Each initialize counts against the caller's rate: it costs a durable
// session binding, and through the reverse bridge a kept session, so one
// principal's stream of them must not be free.
func TestInitializeRateLimited(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		upstream func() http.Handler
	}{
		{"2025-11-25 upstream", initAnswer},
		{"reverse bridge", func() http.Handler { return &v2026OnlyUpstream{} }},
	}
	const initialize = `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"c","version":"1"}}}`
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			g := testGateway(t, Config{RateLimit: 1}) // bursts of 2
			up := tt.upstream()
			status := func(owner string) int {
				w := httptest.NewRecorder()
				if err := g.ServeHTTP(w, WithCaller(post(initialize), task.Caller{Owner: owner, Principal: owner}), up); err != nil {
					t.Fatal(err)
				}
				return w.Code
			}
			got := []int{status("alice"), status("alice"), status("alice"), status("bob")}
			if got[0] != http.StatusOK || got[2] != http.StatusTooManyRequests || got[3] != http.StatusOK {
				t.Errorf("statuses %v, want alice's third refused with 429 and bob served", got)
			}
		})
	}
}
