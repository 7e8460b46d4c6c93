package v2025on2026

import (
	"encoding/json"
	"net/http"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

func TestNeedsTasksExtension(t *testing.T) {
	t.Parallel()
	final := func(code int, data string) upstream.Event {
		e := jsonrpc.Errorf(code, "x")
		if data != "" {
			e.Data = json.RawMessage(data)
		}
		return upstream.Event{Final: &jsonrpc.Message{JSONRPC: "2.0", Error: e}}
	}
	tests := []struct {
		name string
		ev   upstream.Event
		want bool
	}{
		{"the tasks extension required", final(-32021, `{"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`), true},
		{"another capability required", final(-32021, `{"requiredCapabilities":{"elicitation":{}}}`), false},
		{"no data", final(-32021, ""), false},
		{"another error", final(-32602, `{"requiredCapabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`), false},
		{"a result", upstream.Event{Final: &jsonrpc.Message{JSONRPC: "2.0", Result: json.RawMessage(`{}`)}}, false},
		{"no answer", upstream.Event{Err: http.ErrHandlerTimeout}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := needsTasksExtension(tt.ev); got != tt.want {
				t.Errorf("needsTasksExtension = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRoutingName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		method, params string
		want           string
		ok             bool
	}{
		{"tools/call", `{"name":"echo"}`, "echo", true},
		{"prompts/get", `{"name":"p"}`, "p", true},
		{"resources/read", `{"uri":"file:///a"}`, "file:///a", true},
		{"tools/list", `{"name":"x"}`, "", false},
		{"tools/call", `{}`, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.method+tt.params, func(t *testing.T) {
			t.Parallel()
			got, ok := routingName(tt.method, json.RawMessage(tt.params))
			if got != tt.want || ok != tt.ok {
				t.Errorf("routingName = %q %v, want %q %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func TestOwns(t *testing.T) {
	t.Parallel()
	tests := []struct {
		session string
		want    bool
	}{
		{SessionPrefix + "abc", true},
		{"upstream-session", false},
		{"", false},
	}
	for _, tt := range tests {
		r, _ := http.NewRequest(http.MethodPost, "http://x/mcp", nil)
		if tt.session != "" {
			r.Header.Set(upstream.HeaderSessionID, tt.session)
		}
		if got := Owns(r); got != tt.want {
			t.Errorf("Owns(%q) = %v, want %v", tt.session, got, tt.want)
		}
	}
}

func TestInputRoundAnswer(t *testing.T) {
	t.Parallel()
	res := func(s string) *jsonrpc.Message {
		return &jsonrpc.Message{JSONRPC: "2.0", ID: json.RawMessage("1"), Result: json.RawMessage(s)}
	}
	tests := []struct {
		name    string
		answers []int
		msgs    []*jsonrpc.Message
		known   []bool
		done    bool
		err     bool
	}{
		{"both answered", []int{0, 1}, []*jsonrpc.Message{res(`{"a":1}`), res(`{"b":2}`)}, []bool{true, true}, true, false},
		{"one of two", []int{1}, []*jsonrpc.Message{res(`{}`)}, []bool{true}, false, false},
		{"unknown index", []int{2, -1}, []*jsonrpc.Message{res(`{}`), res(`{}`)}, []bool{false, false}, false, false},
		{"an error ends the round", []int{0}, []*jsonrpc.Message{{JSONRPC: "2.0", ID: json.RawMessage("1"), Error: jsonrpc.Errorf(-1, "no")}}, []bool{true}, true, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			r := &inputRound{keys: []string{"a", "b"}, got: map[string]json.RawMessage{}, done: make(chan struct{})}
			for i, idx := range tt.answers {
				if got := r.answer(idx, tt.msgs[i]); got != tt.known[i] {
					t.Errorf("answer(%d) = %v, want %v", idx, got, tt.known[i])
				}
			}
			select {
			case <-r.done:
				if !tt.done {
					t.Error("the round ended")
				}
			default:
				if tt.done {
					t.Error("the round did not end")
				}
			}
			if (r.err != nil) != tt.err {
				t.Errorf("round error %v, want one: %v", r.err, tt.err)
			}
		})
	}
}
