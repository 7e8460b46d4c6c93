package wire

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// A JSON answer carries Content-Type application/json and no
// Content-Length an earlier handler set for another body; each answer's
// header value is its own, so a handler that edits one in place (Caddy's
// header handler replaces within values) leaves every other answer alone.
func TestReplyRawHeader(t *testing.T) {
	t.Parallel()
	answer := func() *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		w.Header().Set("Content-Length", "3")
		x := &Exchange{W: w, Msg: &jsonrpc.Message{JSONRPC: "2.0", ID: json.RawMessage("1")}}
		x.ReplyRaw([]byte(`{"ok":true}`))
		return w
	}
	first := answer()
	if got := first.Header()["Content-Type"]; len(got) != 1 || got[0] != "application/json" {
		t.Fatalf("Content-Type %q, want application/json", got)
	}
	if got := first.Header().Values("Content-Length"); len(got) != 0 {
		t.Errorf("Content-Length %q kept from before the answer", got)
	}
	first.Header()["Content-Type"][0] = "text/plain" // as an in-place edit does
	if got := answer().Header().Get("Content-Type"); got != "application/json" {
		t.Errorf("the next answer's Content-Type is %q: answers share a header value", got)
	}
	w := httptest.NewRecorder()
	WriteJSON(w, http.StatusAccepted, []byte(`{}`))
	if got := w.Header().Get("Content-Type"); got != "application/json" || w.Code != http.StatusAccepted {
		t.Errorf("WriteJSON: status %d, Content-Type %q", w.Code, got)
	}
}
