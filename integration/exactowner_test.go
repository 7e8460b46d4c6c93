package integration

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// rawHMACToken signs an HS256 token whose "sub" and "org" claims are the
// given JSON texts, byte for byte: jwt.MapClaims cannot carry a lone
// surrogate escape or a raw 0xFF byte (encoding/json replaces both with
// U+FFFD when it marshals).
func rawHMACToken(sub, org string) string {
	payload := `{"sub":` + sub + `,"org":` + org + `,"iss":"https://idp.test","aud":"mcp-gateway","exp":` +
		strconv.FormatInt(time.Now().Add(time.Hour).Unix(), 10) + `}`
	enc := base64.RawURLEncoding
	signing := enc.EncodeToString([]byte(`{"alg":"HS256","typ":"JWT"}`)) + "." + enc.EncodeToString([]byte(payload))
	mac := hmac.New(sha256.New, []byte(testHMACSecret))
	mac.Write([]byte(signing))
	return signing + "." + enc.EncodeToString(mac.Sum(nil))
}

// Subjects that decode to the same text are not one owner: "victim\udc80",
// "victim\ud800" and "victim" with a raw 0xFF byte used to decode to
// "victim\ufffd", the name of a genuine principal, and read its tasks.
// Each now gets the gateway's invalid-token 401, while "victim" and
// "victim\ufffd" are two owners that never see each other's tasks.
func TestLossyJWTClaimsAreRefused(t *testing.T) {
	t.Parallel()
	_, addr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: v2025Tools + hmacAuth})

	clientFor := func(sub string) *rpcClient {
		c := newRPCClient(t, gw.URL)
		c.header.Set("Authorization", "Bearer "+rawHMACToken(sub, `"t1"`))
		c.initialize("")
		return c
	}
	replacement, victim := clientFor(`"victim\ufffd"`), clientFor(`"victim"`)
	mine := replacement.createTask("slow_compute", map[string]any{"seconds": 0.01}, 60000)
	theirs := victim.createTask("slow_compute", map[string]any{"seconds": 0.01}, 60000)
	for _, c := range []struct {
		who    *rpcClient
		taskID string
	}{{victim, mine.TaskID}, {replacement, theirs.TaskID}} {
		if m := c.who.call("tasks/get", map[string]string{"taskId": c.taskID}); m.Error == nil || m.Error.Code != -32602 {
			t.Errorf("victim and victim\\ufffd share a task: %s", m.Result)
		}
	}

	for _, tc := range []struct{ name, sub, org string }{
		{"lone low surrogate", `"victim\udc80"`, `"t1"`},
		{"lone high surrogate", `"victim\ud800"`, `"t1"`},
		{"raw 0xFF byte", "\"victim\xff\"", `"t1"`},
		{"tenant with a lone surrogate", `"victim\ufffd"`, `"t1\udc80"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The session of victim\ufffd, which this token decoded to.
			bad := newRPCClient(t, gw.URL)
			bad.session, bad.version = replacement.session, replacement.version
			bad.header.Set("Authorization", "Bearer "+rawHMACToken(tc.sub, tc.org))
			resp := bad.post(context.Background(), []byte(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"`+mine.TaskID+`"}}`))
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized {
				t.Fatalf("HTTP %d, want 401: %s", resp.StatusCode, body)
			}
			if got := resp.Header.Get("WWW-Authenticate"); !strings.HasPrefix(got, `Bearer realm="mcp", error="invalid_token"`) {
				t.Errorf("WWW-Authenticate %q, want the invalid-token challenge", got)
			}
			var m struct {
				Error *struct{ Code int } `json:"error"`
			}
			if err := json.Unmarshal(body, &m); err != nil || m.Error == nil || m.Error.Code != -32600 {
				t.Errorf("body %s, want a JSON-RPC -32600 error", body)
			}
		})
	}
}

// principal {placeholder} holds to the same rule: a name that is not valid
// UTF-8 gets 401, as an empty one does. Task records store the owner as
// JSON text, where a 0xFF byte becomes U+FFFD: the task of "victim\xff"
// would be read back as a task of "victim\ufffd".
func TestPrincipalPlaceholderRefusesInvalidUTF8(t *testing.T) {
	t.Parallel()
	_, addr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{
		Upstream:   addr,
		Directives: v2025Tools + "principal {http.request.header.X-Auth-User}\ntrust_domain front-proxy",
	})
	ok := newRPCClient(t, gw.URL)
	ok.header.Set("X-Auth-User", "victim\ufffd")
	ok.initialize("")

	bad := newRPCClient(t, gw.URL)
	bad.header.Set("X-Auth-User", "victim\xff")
	resp := bad.post(context.Background(), []byte(`{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"e2e","version":"1"}}}`))
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("X-Auth-User victim\\xff: HTTP %d, want 401: %s", resp.StatusCode, body)
	}
	if !strings.Contains(string(body), `"code":-32600`) {
		t.Errorf("body %s, want a JSON-RPC -32600 error", body)
	}
}
