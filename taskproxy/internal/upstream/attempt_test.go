package upstream

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
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

func TestReadAnswer(t *testing.T) {
	sse := func(body string) *Response {
		return &Response{Status: 200, Header: http.Header{"Content-Type": {"text/event-stream"}}, Body: io.NopCloser(strings.NewReader(body))}
	}
	const note = `{"jsonrpc":"2.0","method":"notifications/progress","params":{}}`
	tests := []struct {
		name    string
		resp    *Response
		id      json.RawMessage
		want    string // the answer's id; "" for none
		wantEOF bool
	}{
		{"json", &Response{Status: 200, Header: http.Header{"Content-Type": {"application/json"}}, Body: io.NopCloser(strings.NewReader(`{"jsonrpc":"2.0","id":"g:1","result":{}}`))}, json.RawMessage(`"g:1"`), `"g:1"`, false},
		{"stream, after a notification and another response", sse("data: " + note + "\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":\"g:1\",\"result\":{}}\n\n"), json.RawMessage(`"g:1"`), `"g:1"`, false},
		{"any response", sse("data: " + note + "\n\ndata: {\"jsonrpc\":\"2.0\",\"id\":7,\"result\":{}}\n\n"), nil, `7`, false},
		{"ended without it", sse("data: " + note + "\n\n"), json.RawMessage(`"g:1"`), "", true},
	}
	for _, tt := range tests {
		got, err := ReadAnswer(tt.resp, tt.id, 1<<20)
		switch {
		case tt.want != "" && (got == nil || string(got.ID) != tt.want):
			t.Errorf("%s: answer %v, %v; want id %s", tt.name, got, err, tt.want)
		case tt.want == "" && (got != nil || !errors.Is(err, io.EOF) != !tt.wantEOF):
			t.Errorf("%s: answer %v, %v; want none and io.EOF", tt.name, got, err)
		}
	}
}
