package v2025on2026

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// answeringWriter is a client that answers each input request of the
// bridge's the moment it is written to its stream, from the same session,
// as a fast client on a fast network can.
type answeringWriter struct {
	*httptest.ResponseRecorder
	b   *Bridge
	sid string
}

func (w *answeringWriter) Write(p []byte) (int, error) {
	n, err := w.ResponseRecorder.Write(p)
	for line := range bytes.SplitSeq(p, []byte("\n")) {
		data, ok := bytes.CutPrefix(line, []byte("data: "))
		if !ok {
			continue
		}
		var req jsonrpc.Message
		if json.Unmarshal(data, &req) != nil || req.Method == "" {
			continue
		}
		answer := &jsonrpc.Message{JSONRPC: "2.0", ID: req.ID, Result: json.RawMessage(`{"action":"accept","for":` + string(req.ID) + `}`)}
		r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
		(&call{Exchange: &wire.Exchange{Env: w.b.Env, R: r, Msg: answer}, b: w.b, sid: w.sid}).serveInputAnswer()
	}
	return n, err
}

// A round of input requests is whole before its first request goes out: a
// client answering that one at once gets the round of all the upstream's
// keys, which ends with every answer, not after the first (the round used
// to be stored before its keys were added: it ended with one answer of
// two, and the second answer closed it again, a panic).
func TestInputRoundWholeBeforeItsRequests(t *testing.T) {
	t.Parallel()
	b := New(&wire.Env{Log: zap.NewNop()})
	const sid = SessionPrefix + "s"
	r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader("{}"))
	r.Header.Set("Accept", "application/json, text/event-stream")
	w := &answeringWriter{ResponseRecorder: httptest.NewRecorder(), b: b, sid: sid}
	c := &call{Exchange: &wire.Exchange{Env: b.Env, W: w, R: r, Msg: &jsonrpc.Message{JSONRPC: "2.0", ID: json.RawMessage("1"), Method: "tools/call"}}, b: b, sid: sid}
	requests := map[string]json.RawMessage{
		"a": json.RawMessage(`{"method":"elicitation/create","params":{"message":"first?"}}`),
		"b": json.RawMessage(`{"method":"elicitation/create","params":{"message":"second?"}}`),
	}
	got, e := c.ask(context.Background(), newReply(c.Exchange), requests)
	if e != nil {
		t.Fatalf("ask: %v", e)
	}
	if len(got) != 2 || got["a"] == nil || got["b"] == nil {
		t.Errorf("answers %s, want both keys answered", got)
	}
}
