package taskproxy

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.uber.org/zap"
	"go.uber.org/zap/zaptest/observer"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/gate"
)

// The log of an opened upstream session names the principal, not the
// digest that tells anonymous callers' sessions apart: an unsalted SHA-256
// of "Basic base64(user:password)" in a log is a password hash anyone
// reading the log can guess offline.
func TestBridgeSessionLogHoldsNoCredentialDigest(t *testing.T) {
	t.Parallel()
	core, logs := observer.New(zap.DebugLevel)
	up := &v2025Upstream{}
	g := testGateway(t, Config{Logger: zap.New(core)})
	g.bridge.ForgetProbe()
	const auth = "Basic YWxpY2U6aHVudGVyMg==" // alice:hunter2
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/list","params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`
	w := httptest.NewRecorder()
	if err := g.ServeHTTP(w, post(body, "MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tools/list", "Authorization", auth), up); err != nil {
		t.Fatal(err)
	}
	if w.Code != http.StatusOK {
		t.Fatalf("tools/list: HTTP %d %s", w.Code, w.Body)
	}
	if logs.FilterMessage("version bridge: upstream session opened").Len() != 1 {
		t.Fatalf("no session opened: %v", logs.All())
	}
	digest := gate.HashHex(auth)
	for _, e := range logs.All() {
		for k, v := range e.ContextMap() {
			if strings.Contains(fmt.Sprint(v), digest) {
				t.Errorf("log %q: %s = %q holds the digest of the caller's Authorization", e.Message, k, v)
			}
		}
	}
}
