package upstream

import (
	"net/http"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

func TestSessionLost(t *testing.T) {
	answer := func(status int, e *jsonrpc.Error) Event {
		return Event{Final: &jsonrpc.Message{JSONRPC: "2.0", Error: e}, Head: &Head{Status: status}}
	}
	tests := []struct {
		name string
		ev   Event
		want bool
	}{
		{"404", answer(http.StatusNotFound, nil), true},
		{"400 naming the session", answer(http.StatusBadRequest, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Bad Request: No valid Session ID provided")), true},
		{"400 for something else", answer(http.StatusBadRequest, jsonrpc.Errorf(jsonrpc.CodeInvalidRequest, "Bad Request: malformed")), false},
		{"200 with an error", answer(http.StatusOK, jsonrpc.Errorf(jsonrpc.CodeInternalError, "session gone")), false},
		{"a transport failure", Event{Err: http.ErrHandlerTimeout}, false},
	}
	for _, tt := range tests {
		if got := SessionLost(tt.ev); got != tt.want {
			t.Errorf("%s: SessionLost = %v, want %v", tt.name, got, tt.want)
		}
	}
}
