package caddymodule

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/badgerstore"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// The upstream requests of one task run at once (the call's stream, and
// the answers to two pings the upstream sends on it). Each must have its
// own Caddy variables: reverse_proxy sets them (caddyhttp.SetVar, as the
// next handler here does), and two requests writing to one map is a
// concurrent map write, which kills the process. Run with -race.
func TestTaskUpstreamRequestsHaveOwnVars(t *testing.T) {
	store, err := badgerstore.Open(badgerstore.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	rt := taskproxy.NewRuntime(store)
	t.Cleanup(func() { _ = rt.Close(time.Second) })
	g, err := taskproxy.New(taskproxy.Config{DefaultTTL: time.Minute, MaxTTL: time.Hour, MaxBody: 1 << 20, Detach: detachRequest}, rt)
	if err != nil {
		t.Fatal(err)
	}
	var pinged sync.WaitGroup
	pinged.Add(2)
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		setVars := func(v int) {
			for i := range 50 {
				caddyhttp.SetVar(r.Context(), fmt.Sprint("reverse_proxy.k", i), v)
			}
		}
		setVars(1)
		body, _ := io.ReadAll(r.Body)
		msg, err := jsonrpc.Parse(body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		if msg.Method == "tools/list" { // the gateway learns what the upstream declares of the tool first
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"tools":[{"name":"slow","inputSchema":{"type":"object"}}]}}`, msg.ID)
			return
		}
		if msg.IsResponse() { // an answer to a ping
			setVars(2)
			pinged.Done()
			w.WriteHeader(http.StatusAccepted)
			return
		}
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		for _, id := range []string{`"p1"`, `"p2"`} {
			fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"method\":\"ping\"}\n\n", id)
			w.(http.Flusher).Flush()
		}
		pinged.Wait()
		setVars(3)
		fmt.Fprintf(w, "data: {\"jsonrpc\":\"2.0\",\"id\":%s,\"result\":{\"content\":[]}}\n\n", msg.ID)
	})

	// A request as Caddy's server prepares it: variables and a replacer.
	r := httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"slow","task":{"ttl":60000}}}`))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Accept", "application/json, text/event-stream")
	ctx := context.WithValue(r.Context(), caddyhttp.VarsCtxKey, map[string]any{})
	ctx = context.WithValue(ctx, caddy.ReplacerCtxKey, caddy.NewReplacer())
	r = r.WithContext(ctx)
	rec := httptest.NewRecorder()
	if err := g.ServeHTTP(rec, r, next); err != nil {
		t.Fatal(err)
	}
	var created struct {
		Result struct {
			Task struct{ TaskID string } `json:"task"`
		} `json:"result"`
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &created); err != nil || created.Result.Task.TaskID == "" {
		t.Fatalf("create answer %s", rec.Body)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		tk, err := store.Get(context.Background(), task.Anonymous, created.Result.Task.TaskID)
		if err == nil && tk.Status == task.StatusCompleted {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("task: %+v, %v; want completed", tk, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A task's request keeps what earlier handlers set on the replacer (the
// caller's {http.auth.user.id} for header_up), its client address and TLS
// state; a re-run after a restart, which starts from another caller's
// request, keeps none of that caller's and names the task's own principal.
func TestDetachedRequestIdentity(t *testing.T) {
	served := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	served.RemoteAddr = "203.0.113.9:1234"
	served.TLS = &tls.ConnectionState{ServerName: "gw.example.com"}
	local := &net.TCPAddr{IP: net.IPv4(10, 0, 0, 5), Port: 443}
	ctx := context.WithValue(served.Context(), http.LocalAddrContextKey, net.Addr(local))
	ctx = context.WithValue(ctx, caddyhttp.VarsCtxKey, map[string]any{caddyhttp.ClientIPVarKey: "203.0.113.9"})
	served = served.WithContext(ctx)
	repl := caddyhttp.NewTestReplacer(served)
	repl.Set("http.auth.user.id", "bob")
	repl.Set("http.auth.user.email", "bob@example.com")

	tests := []struct {
		name                    string
		ctx                     func(context.Context) context.Context
		user, email, remote, ip string
		tls                     bool
	}{
		{"task of the caller", func(c context.Context) context.Context {
			return taskproxy.WithCaller(served, task.Caller{Owner: "o-bob", Principal: "bob"}).Context()
		}, "bob", "bob@example.com", "203.0.113.9:1234", "203.0.113.9", true},
		{"re-run of alice's task", func(c context.Context) context.Context {
			return task.RerunContext(c, task.Caller{Owner: "o-alice", Principal: "alice"})
		}, "alice", "", "10.0.0.5:443", "10.0.0.5", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := detachRequest(served.WithContext(tt.ctx(served.Context())))
			r := d.Context().Value(caddy.ReplacerCtxKey).(*caddy.Replacer)
			user, _ := r.GetString("http.auth.user.id")
			email, _ := r.GetString("http.auth.user.email")
			ip, _ := caddyhttp.GetVar(d.Context(), caddyhttp.ClientIPVarKey).(string)
			if user != tt.user || email != tt.email || d.RemoteAddr != tt.remote || ip != tt.ip || (d.TLS != nil) != tt.tls {
				t.Errorf("user %q email %q remote %q client_ip %q TLS %v; want %q %q %q %q %v",
					user, email, d.RemoteAddr, ip, d.TLS != nil, tt.user, tt.email, tt.remote, tt.ip, tt.tls)
			}
			if got := repl.ReplaceAll("{http.auth.user.id}", ""); got != "bob" {
				t.Errorf("the served request's replacer changed: %q", got)
			}
		})
	}
}
