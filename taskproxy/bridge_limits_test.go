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
	m, err := ParseMessage(body)
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
		w.Header().Set(headerSessionID, id)
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
		name, _ := stringParam(m.Params, "name")
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
func bridgedCallOf(t *testing.T, g *Gateway, next http.Handler, who, params string) (*Message, int) {
	t.Helper()
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{` + params + `,` + askCaps + `}}`
	name, _ := stringParam(json.RawMessage(`{`+params+`}`), "name")
	r := WithCaller(post(body, "MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/call", "Mcp-Name", name), Caller{Owner: who, Principal: who})
	w := httptest.NewRecorder()
	if err := g.ServeHTTP(w, r, next); err != nil {
		t.Fatal(err)
	}
	text := w.Body.String()
	if strings.HasPrefix(w.Header().Get("Content-Type"), "text/event-stream") {
		events := NewSSEReader(strings.NewReader(text))
		for {
			ev, err := events.Next()
			if err != nil {
				break
			}
			text = ev.Data
		}
	}
	m, err := ParseMessage([]byte(text))
	if err != nil {
		t.Fatalf("HTTP %d %q: %v", w.Code, w.Body.String(), err)
	}
	return m, w.Code
}

// bridgeGateway is a gateway whose upstream speaks 2025-11-25 only.
func bridgeGateway(t *testing.T, cfg Config) *Gateway {
	t.Helper()
	g := testGateway(t, cfg)
	g.bridge.forgetProbe()
	t.Cleanup(g.bridge.close)
	return g
}

// parkedState returns the requestState of an input_required answer.
func parkedState(t *testing.T, m *Message) string {
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
	up := newAskUpstream()
	g := bridgeGateway(t, Config{Tools: map[string]TaskSupport{"ask": TaskForbidden, "other": TaskOptional}})
	state := parkedState(t, first(bridgedCallOf(t, g, up, "alice", `"name":"ask"`)))
	retry := func(name string) (*Message, int) {
		return bridgedCallOf(t, g, up, "alice", `"name":"`+name+`","inputResponses":{"input-1":{"action":"accept","content":{}}},"requestState":"`+state+`"`)
	}
	m, status := retry("other")
	if m.Error == nil || m.Error.Code != CodeInvalidParams || status != http.StatusBadRequest {
		t.Fatalf("retry naming another tool: HTTP %d %s %v, want 400 -32602", status, m.Result, m.Error)
	}
	m, _ = retry("ask")
	if m.Error != nil || !strings.Contains(string(m.Result), `ask {\"action\":\"accept\"`) {
		t.Errorf("retry of the call: %s %v, want ask's result", m.Result, m.Error)
	}
}

func first(m *Message, _ int) *Message { return m }
