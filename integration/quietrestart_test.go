package integration

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/integration/upstream"
)

// quietDirectives declare slow_echo retry_on_restart, with the shortest
// lease so that a replica takes a killed one's tasks over soon.
const quietDirectives = v2025Tools + "task_after 200ms\ntool slow_echo optional retry_on_restart\nlease 2s"

// TestRecoveredTasksRunWithoutTraffic kills a gateway while a 2025-11-25
// and a 2026-07-28 task of a retry_on_restart tool run, and sends no
// request to the MCP route afterwards: the gateway started again on the
// Badger store, or the other replica on the PostgreSQL database, re-runs
// both at once, as the upstream's calls and the admin API (not the route)
// show. The gateway's own request that gives the re-runs their route
// never reaches the upstream. Once completed, tasks/get shows each as a
// task that ran once shows (no status message: the note that the call is
// being re-run is gone), and the admin API's history keeps the re-run.
func TestRecoveredTasksRunWithoutTraffic(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// start starts the first gateway and returns its MCP URL, and
		// a function that, once the first is killed, returns the
		// gateway that recovers its tasks.
		start func(t *testing.T, upAddr string) (*gateway, func() *gateway)
		// why begins the status message of the re-runs.
		why string
	}{
		{"badger, restarted", func(t *testing.T, upAddr string) (*gateway, func() *gateway) {
			opts := gatewayOptions{Upstream: upAddr, Directives: quietDirectives, StorageDir: t.TempDir() + "/store"}
			gw := startGateway(t, opts)
			return gw, func() *gateway { return startGateway(t, opts) }
		}, rerunAfterRestart},
		{"postgres, taken over", func(t *testing.T, upAddr string) (*gateway, func() *gateway) {
			dsn, _ := testDatabase(t)
			a := startPostgresGateway(t, upAddr, dsn, quietDirectives)
			b := startPostgresGateway(t, upAddr, dsn, quietDirectives)
			a.healthy("replica a's store to open")
			b.healthy("replica b's store to open")
			return a.gateway, func() *gateway { return b.gateway }
		}, rerunAfterTakeover},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			up, rec, upAddr := recordedUpstream(t)
			gw, recoverer := tt.start(t, upAddr)

			v2025 := newRPCClient(t, gw.URL)
			v2025.initialize("")
			ids := []string{v2025.createTask("slow_echo", map[string]any{"seconds": 2, "label": "quiet-v2025"}, 600000).TaskID}
			res := newV2026Client(t, gw.URL, true).ok("tools/call", map[string]any{"name": "slow_echo", "arguments": map[string]any{"seconds": 2, "label": "quiet-v2026"}})
			if str(res["resultType"]) != "task" {
				t.Fatalf("the 2026-07-28 call answered %v, want a task", res)
			}
			ids = append(ids, str(res["taskId"]))
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := up.WaitCalls(ctx, "slow_echo", 2); err != nil {
				t.Fatal(err)
			}
			killGateway(t, gw)
			pings := rec.count("ping")

			gw2 := recoverer() // no MCP request from here on
			admin := gw2.adminAddr
			for _, id := range ids {
				var v replicaTask
				waitFor(t, 90*time.Second, "task "+id+" to end without a request to the route", func() bool {
					code, _ := adminDo(t, admin, "GET", "/mcp_tasks/tasks/"+id, &v)
					return code == http.StatusOK && v.Status != "working"
				})
				if err := rerunCompleted(t, admin, id, tt.why); err != nil {
					t.Error(err)
				}
			}
			if n := up.Calls("slow_echo"); n != 4 {
				t.Errorf("slow_echo ran %d times upstream, want 4 (two before the kill, one re-run each)", n)
			}
			if n := rec.count("ping"); n != pings {
				t.Errorf("the upstream got %d pings after the kill, want none: the gateway's own request reached it", n-pings)
			}

			// What the owner reads: the completed task and its result,
			// without the re-run's working-time message.
			c2025 := newRPCClient(t, gw2.URL)
			c2025.initialize("")
			if got := c2025.getTask(ids[0]); got.Status != "completed" || got.StatusMessage != "" {
				t.Errorf("2025-11-25 tasks/get of the re-run task: %s %q, want completed without a status message", got.Status, got.StatusMessage)
			}
			got := newV2026Client(t, gw2.URL, true).get(ids[1])
			if _, has := got["statusMessage"]; str(got["status"]) != "completed" || has || !strings.Contains(string(got["result"]), "quiet-v2026") {
				b, _ := json.Marshal(got)
				t.Errorf("2026-07-28 tasks/get of the re-run task: %s, want completed with its result and no statusMessage", b)
			}
		})
	}
}

// quietBasicAuth puts Caddy's basic_auth before mcp_tasks: user quiet,
// password quiet-secret (bcrypt at the lowest cost, to keep the test fast).
const quietBasicAuth = "basic_auth /mcp* {\n\tquiet $2a$04$hm/c1CVFZ4fWKAuy1uI5Q.pYMVR6wIiw2XoQzMIT8g5cHpop/zyxu\n}"

// TestRecoveredTaskBehindBasicAuthWaitsForClient: where the gateway's
// own request cannot reach the route (basic_auth before mcp_tasks refuses
// it, since it carries no credentials), the restarted gateway says so in
// a warning, the task waits without reaching the upstream, and the first
// client request to the route starts its re-run.
func TestRecoveredTaskBehindBasicAuthWaitsForClient(t *testing.T) {
	t.Parallel()
	up, rec, upAddr := recordedUpstream(t)
	opts := gatewayOptions{Upstream: upAddr, Directives: quietDirectives, SiteDirectives: quietBasicAuth, StorageDir: t.TempDir() + "/store"}
	gw := startGateway(t, opts)
	client := func(url string) *rpcClient {
		c := newRPCClient(t, url)
		c.header.Set("Authorization", "Basic "+base64.StdEncoding.EncodeToString([]byte("quiet:quiet-secret")))
		c.initialize("")
		return c
	}
	id := client(gw.URL).createTask("slow_echo", map[string]any{"seconds": 2, "label": "behind-basic-auth"}, 600000).TaskID
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := up.WaitCalls(ctx, "slow_echo", 1); err != nil {
		t.Fatal(err)
	}
	killGateway(t, gw)
	pings := rec.count("ping")

	gw2 := startGateway(t, opts)
	waitFor(t, 60*time.Second, "the warning that the gateway's own request did not reach the route", func() bool {
		return strings.Contains(gw2.logs(), "the gateway's own request to the task's endpoint did not reach the route")
	})
	var v replicaTask
	if code, body := adminDo(t, gw2.adminAddr, "GET", "/mcp_tasks/tasks/"+id, &v); code != http.StatusOK || v.Status != "working" {
		t.Fatalf("before a client's request: HTTP %d %s, want the task working", code, body)
	}
	if n := up.Calls("slow_echo"); n != 1 {
		t.Errorf("slow_echo ran %d times before a client's request, want 1 (before the kill)", n)
	}

	client(gw2.URL) // a client's request to the route
	waitFor(t, 60*time.Second, "the task to end after a client's request", func() bool {
		code, _ := adminDo(t, gw2.adminAddr, "GET", "/mcp_tasks/tasks/"+id, &v)
		return code == http.StatusOK && v.Status != "working"
	})
	if err := rerunCompleted(t, gw2.adminAddr, id, rerunAfterRestart); err != nil || up.Calls("slow_echo") != 2 {
		t.Errorf("after %d calls: %v; want completed by a re-run, the second call", up.Calls("slow_echo"), err)
	}
	if n := rec.count("ping"); n != pings {
		t.Errorf("the upstream got %d pings after the kill, want none", n-pings)
	}
}

// methodRecorder counts the JSON-RPC methods of the requests an upstream
// gets.
type methodRecorder struct {
	mu      sync.Mutex
	methods map[string]int
}

func (m *methodRecorder) count(method string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.methods[method]
}

// recordedUpstream runs the go-sdk fixture server behind a methodRecorder.
func recordedUpstream(t *testing.T) (*upstream.Server, *methodRecorder, string) {
	t.Helper()
	up := upstream.New(upstream.Options{})
	rec := &methodRecorder{methods: map[string]int{}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		var m struct{ Method string }
		if json.Unmarshal(body, &m) == nil && m.Method != "" {
			rec.mu.Lock()
			rec.methods[m.Method]++
			rec.mu.Unlock()
		}
		r.Body = io.NopCloser(bytes.NewReader(body))
		up.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return up, rec, strings.TrimPrefix(srv.URL, "http://")
}
