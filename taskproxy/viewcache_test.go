package taskproxy

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"testing/synctest"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runtime"
	v2025 "github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire/v2025"
	v2026 "github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/wire/v2026"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// getTask sends a tasks/get for id as owner on wire and returns the answer.
func getTask(t *testing.T, g *Gateway, owner string, wire runtime.Wire, id string) string {
	t.Helper()
	var r *http.Request
	if wire == runtime.WireV2026 {
		r = post(`{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"taskId":"`+id+`",`+declaring+`}}`,
			"MCP-Protocol-Version", "2026-07-28", "Mcp-Method", "tasks/get", "Mcp-Name", id)
	} else {
		r = post(`{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"taskId":"`+id+`"}}`, "MCP-Protocol-Version", "2025-11-25")
	}
	r = WithCaller(r, task.Caller{Owner: owner, Principal: owner})
	rec := httptest.NewRecorder()
	if err := g.ServeHTTP(rec, r, http.NotFoundHandler()); err != nil {
		t.Fatal(err)
	}
	return rec.Body.String()
}

// storeFinished stores a completed task of owner, created at created.
func storeFinished(t *testing.T, g *Gateway, owner string, created time.Time, ttl time.Duration) *task.Task {
	t.Helper()
	tk := testTask(owner, created)
	tk.TTL = ttl
	tk.Status, tk.Result = task.StatusCompleted, json.RawMessage(`{"content":[{"type":"text","text":"done"}]}`)
	if err := g.rt.Store.Create(context.Background(), tk); err != nil {
		t.Fatal(err)
	}
	return tk
}

// A finished task's cached view reaches its owner only: another owner, on
// either wire, gets the answer of an unknown task, before and after the
// owner's reads filled the cache.
func TestViewCacheOwnerOnly(t *testing.T) {
	t.Parallel()
	g := testGateway(t, Config{})
	mustStart(t, g)
	tk := storeFinished(t, g, "alice", runtime.Now(), time.Hour)
	for _, wire := range []runtime.Wire{runtime.WireV2025, runtime.WireV2026} {
		for i := range 3 {
			if got := getTask(t, g, "alice", wire, tk.ID); !strings.Contains(got, `"status":"completed"`) {
				t.Fatalf("wire %d, read %d by the owner: %s", wire, i, got)
			}
			if _, _, ok := g.rt.CachedView("alice", []byte(tk.ID), wire, runtime.Now()); !ok {
				t.Fatalf("wire %d: the owner's read left nothing in the cache", wire)
			}
			if got := getTask(t, g, "bob", wire, tk.ID); !strings.Contains(got, "Task not found") || strings.Contains(got, "completed") {
				t.Fatalf("wire %d, read %d by another owner: %s", wire, i, got)
			}
		}
	}
}

// The two wires render a finished task differently, and a cached view of
// one is never served on the other; cached answers are byte for byte the
// uncached ones.
func TestViewCacheWires(t *testing.T) {
	t.Parallel()
	g := testGateway(t, Config{})
	mustStart(t, g)
	tk := storeFinished(t, g, "alice", runtime.Now(), time.Hour)
	rec, err := g.rt.Store.Get(context.Background(), "alice", tk.ID)
	if err != nil {
		t.Fatal(err)
	}
	want := map[runtime.Wire]string{}
	for wire, result := range map[runtime.Wire]any{runtime.WireV2025: v2025.Render(rec), runtime.WireV2026: v2026.Detail(rec, "complete")} {
		data, err := jsonrpc.ResponseBytes(json.RawMessage("7"), result)
		if err != nil {
			t.Fatal(err)
		}
		want[wire] = string(data)
	}
	for _, wire := range []runtime.Wire{runtime.WireV2025, runtime.WireV2026, runtime.WireV2025, runtime.WireV2026} {
		if got := getTask(t, g, "alice", wire, tk.ID); got != want[wire] {
			t.Errorf("wire %d:\n got %s\nwant %s", wire, got, want[wire])
		}
	}
}

// A task is read with its current status: one still working is never
// cached, so its completion, a cancellation and a worker's outcome show at
// the next read.
func TestViewCacheStatusChanges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	g := testGateway(t, Config{})
	mustStart(t, g)

	// Leased to this process, so that recovery leaves them alone.
	lease := task.Lease{Holder: g.rt.Store.Holder(), Expires: runtime.Now().Add(time.Hour)}
	working := testTask("alice", runtime.Now())
	working.Lease = lease
	if err := g.rt.Store.Create(ctx, working); err != nil {
		t.Fatal(err)
	}
	cancelled := testTask("alice", runtime.Now())
	cancelled.Lease = lease
	if err := g.rt.Store.Create(ctx, cancelled); err != nil {
		t.Fatal(err)
	}
	for _, wire := range []runtime.Wire{runtime.WireV2025, runtime.WireV2026} {
		for _, id := range []string{working.ID, cancelled.ID} {
			if got := getTask(t, g, "alice", wire, id); !strings.Contains(got, `"status":"working"`) {
				t.Fatalf("before the change: %s", got)
			}
		}
	}
	if _, err := g.rt.Store.Update(ctx, "alice", working.ID, func(rec *task.Task) error {
		rec.Result = json.RawMessage(`{"content":[]}`)
		return rec.SetStatus(task.StatusCompleted, "", runtime.Now())
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := g.env.Route.CancelTask(ctx, "alice", cancelled.ID, http.NotFoundHandler()); err != nil {
		t.Fatal(err)
	}
	for _, wire := range []runtime.Wire{runtime.WireV2025, runtime.WireV2026} {
		if got := getTask(t, g, "alice", wire, working.ID); !strings.Contains(got, `"status":"completed"`) {
			t.Errorf("wire %d after completion: %s", wire, got)
		}
		if got := getTask(t, g, "alice", wire, cancelled.ID); !strings.Contains(got, `"status":"cancelled"`) {
			t.Errorf("wire %d after cancellation: %s", wire, got)
		}
	}

	// A task run by a worker: read while it runs, then after its outcome,
	// which the worker puts in the cache.
	release := make(chan struct{})
	next := answeringToolsList(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
		body, _ := io.ReadAll(r.Body)
		m, err := jsonrpc.Parse(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"late"}]}}`, m.ID)
	}))
	id := createV2025(t, g, next)
	if got := getTask(t, g, task.Anonymous, runtime.WireV2025, id); !strings.Contains(got, `"status":"working"`) {
		t.Fatalf("while running: %s", got)
	}
	close(release)
	waitEnded(t, g, task.Anonymous, id)
	// The worker caches the outcome after the store has it: wait for it.
	waitFor(t, "the worker's outcome in the cache", func() bool {
		_, _, ok := g.rt.CachedView(task.Anonymous, []byte(id), runtime.WireV2025, runtime.Now())
		return ok
	})
	if got := getTask(t, g, task.Anonymous, runtime.WireV2025, id); !strings.Contains(got, `"status":"completed"`) {
		t.Errorf("after the outcome: %s", got)
	}
}

// A cached task that comes near the end of its ttl is answered by the store:
// once swept, as expired, never from the cache.
func TestViewCacheExpiry(t *testing.T) {
	t.Parallel()
	// In a bubble: the ttl runs out on the bubble's clock, without waiting.
	synctest.Test(t, func(t *testing.T) {
		g := testGateway(t, Config{})
		mustStart(t, g)
		t.Cleanup(func() {
			g.Close()
			_ = g.rt.Close(0)
		})
		const ttl, left = 20 * time.Second, runtime.ViewExpiryMargin + 2*time.Second
		tk := storeFinished(t, g, "alice", runtime.Now().Add(left-ttl), ttl)
		if got := getTask(t, g, "alice", runtime.WireV2025, tk.ID); !strings.Contains(got, `"status":"completed"`) {
			t.Fatalf("before expiry: %s", got)
		}
		if _, _, ok := g.rt.CachedView("alice", []byte(tk.ID), runtime.WireV2025, runtime.Now()); !ok {
			t.Fatal("the read left nothing in the cache")
		}
		time.Sleep(left + time.Second)
		if !runtime.Now().After(tk.ExpiresAt()) {
			t.Fatalf("now %s, the task expires at %s", runtime.Now(), tk.ExpiresAt())
		}
		if n, err := g.rt.Store.Sweep(context.Background(), runtime.Now(), 100); err != nil || n != 1 {
			t.Fatalf("Sweep = %d, %v", n, err)
		}
		if got := getTask(t, g, "alice", runtime.WireV2025, tk.ID); !strings.Contains(got, "Task has expired") {
			t.Errorf("after the sweep: %s", got)
		}
	})
}

// The cache is looked up by the task id as the request spells it; every
// spelling that decodes to the id of a cached task gets the answer the
// store gives, and one that does not name a string id is refused as
// before.
func TestViewCacheTaskIDSpellings(t *testing.T) {
	t.Parallel()
	g := testGateway(t, Config{})
	mustStart(t, g)
	tk := storeFinished(t, g, "alice", runtime.Now(), time.Hour)
	want := getTask(t, g, "alice", runtime.WireV2025, tk.ID) // fills the cache
	if _, _, ok := g.rt.CachedView("alice", []byte(tk.ID), runtime.WireV2025, runtime.Now()); !ok || !strings.Contains(want, `"status":"completed"`) {
		t.Fatalf("first read: %s (cached %v)", want, ok)
	}
	escaped := fmt.Sprintf(`\u%04x`, tk.ID[0]) + tk.ID[1:]
	for _, tc := range []struct{ name, params, want string }{
		{"plain", `{"taskId":"` + tk.ID + `"}`, want},
		{"spaced", ` { "taskId" : "` + tk.ID + `" } `, want},
		{"escaped id", `{"taskId":"` + escaped + `"}`, want},
		{"escaped key", `{"task\u0049d":"` + tk.ID + `"}`, want},
		{"other members", `{"_meta":{"progressToken":1},"taskId":"` + tk.ID + `"}`, want},
		{"a number", `{"taskId":1}`, `"code":-32602`},
		{"empty", `{"taskId":""}`, `"code":-32602`},
		{"none", `{}`, `"code":-32602`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := WithCaller(post(`{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":`+tc.params+`}`, "MCP-Protocol-Version", "2025-11-25"),
				task.Caller{Owner: "alice", Principal: "alice"})
			rec := httptest.NewRecorder()
			if err := g.ServeHTTP(rec, r, http.NotFoundHandler()); err != nil {
				t.Fatal(err)
			}
			if got := rec.Body.String(); got != tc.want && (tc.want == want || !strings.Contains(got, tc.want)) {
				t.Errorf("params %s: got %s, want %s", tc.params, got, tc.want)
			}
		})
	}
}
