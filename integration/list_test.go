package integration

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

const testHMACSecret = "an-hmac-secret-of-at-least-32-bytes!!"

// hmacToken mints an HS256 token for subject in tenant.
func hmacToken(t testing.TB, subject, tenant string) string {
	t.Helper()
	claims := jwt.MapClaims{"sub": subject, "iss": "https://idp.test", "aud": "mcp-gateway", "exp": time.Now().Add(time.Hour).Unix()}
	if tenant != "" {
		claims["org"] = tenant
	}
	s, err := jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString([]byte(testHMACSecret))
	if err != nil {
		t.Fatal(err)
	}
	return s
}

const hmacAuth = `
auth jwt {
	hmac_secret ` + testHMACSecret + `
	issuer https://idp.test
	audience mcp-gateway
	tenant_claim org
}
`

// tasks/list pages through the caller's tasks, and only the caller's.
func TestV2025ListPaging(t *testing.T) {
	t.Parallel()
	_, addr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: v2025Tools + hmacAuth})

	alice := newRPCClient(t, gw.URL)
	alice.header.Set("Authorization", "Bearer "+hmacToken(t, "alice", "t1"))
	init := alice.initialize("")
	if !strings.Contains(string(init.Result), `"list":{}`) {
		t.Errorf("tasks.list not advertised with auth: %s", init.Result)
	}
	const n = 57 // more than one page of 50
	created := map[string]bool{}
	var order []string
	for range n {
		task := alice.createTask("slow_compute", map[string]any{"seconds": 0.01}, 60000)
		created[task.TaskID] = true
		order = append(order, task.TaskID)
	}

	var listed []string
	cursor, pages, issued := "", 0, ""
	for {
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		var page struct {
			Tasks      []v2025Task `json:"tasks"`
			NextCursor string      `json:"nextCursor"`
		}
		alice.result("tasks/list", params, &page)
		pages++
		for _, task := range page.Tasks {
			if task.CreatedAt == "" || task.TTL == nil {
				t.Errorf("listed task lacks fields: %+v", task)
			}
			listed = append(listed, task.TaskID)
		}
		if page.NextCursor == "" {
			break
		}
		cursor = page.NextCursor
		issued = cursor
		if pages > 10 {
			t.Fatal("paging does not end")
		}
	}
	if pages != 2 || len(listed) != n {
		t.Fatalf("listed %d tasks in %d pages, want %d in 2", len(listed), pages, n)
	}
	for i, id := range listed {
		if !created[id] || id != order[i] {
			t.Fatalf("listing out of creation order at %d: %s", i, id)
		}
	}

	if m := alice.call("tasks/list", map[string]any{"cursor": "not-a-cursor"}); m.Error == nil || m.Error.Code != -32602 {
		t.Errorf("invalid cursor answered %s / %+v, want -32602", m.Result, m.Error)
	}

	bob := newRPCClient(t, gw.URL)
	bob.header.Set("Authorization", "Bearer "+hmacToken(t, "bob", "t1"))
	bob.initialize("")
	var bobs struct {
		Tasks []json.RawMessage `json:"tasks"`
	}
	bob.result("tasks/list", nil, &bobs)
	if len(bobs.Tasks) != 0 {
		t.Errorf("bob lists %d of alice's tasks", len(bobs.Tasks))
	}
	// Only cursors the gateway issued, to that caller, are accepted: alice's
	// own cursor in bob's hands, or a well-formed position it never issued
	// (base64 of "<16 hex>/<id>"), is refused like any invalid cursor.
	for _, foreign := range []string{issued, "MDAwMDAwMDAwMDAwMDAwMC9h"} {
		if m := bob.call("tasks/list", map[string]any{"cursor": foreign}); m.Error == nil || m.Error.Code != -32602 {
			t.Errorf("cursor %q not issued to bob answered %s / %+v, want -32602", foreign, m.Result, m.Error)
		}
	}
	if m := bob.call("tasks/get", map[string]string{"taskId": order[0]}); m.Error == nil || m.Error.Code != -32602 {
		t.Errorf("bob reads alice's task: %s", m.Result)
	}

	anonymous := newRPCClient(t, gw.URL)
	resp := anonymous.post(t.Context(), []byte(`{"jsonrpc":"2.0","id":1,"method":"tasks/list"}`))
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized || !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("no token: HTTP %d %q, want 401 with a Bearer challenge", resp.StatusCode, resp.Header.Get("WWW-Authenticate"))
	}
}
