package taskproxy

import (
	"net/http"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// An HTTP error from the next handler that is complete only once the
// gateway interrupted the call (as httputil.ReverseProxy answers 502 when
// the request's context ends) must not fail the task: at a shutdown the
// task is left for recovery (a restart, or another replica), not failed
// with "upstream answered HTTP 502".
func TestShutdownLeavesTaskDespiteProxyError(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	rt := NewRuntime(openTestStore(t, dir, false))
	g := mustNew(t, Config{DefaultTTL: time.Minute, MaxTTL: time.Hour, MaxBody: 1 << 20}, rt)
	mustStart(t, g)
	called := make(chan struct{}, 1)
	proxy := answeringToolsList(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// The error's head goes out before the abort, its body ends with
		// it: the gateway reads the answer only once the call was
		// cancelled, whatever the goroutines' timing.
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write([]byte("bad gateway"))
		select {
		case called <- struct{}{}:
		default:
		}
		<-r.Context().Done()
	}))
	id := createV2025(t, g, proxy)
	select {
	case <-called:
	case <-time.After(10 * time.Second):
		t.Fatal("the task's call never reached the next handler")
	}
	g.Close()
	if err := rt.Close(0); err != nil {
		t.Fatal(err)
	}
	tk, err := openTestStore(t, dir, false).Get(t.Context(), task.Anonymous, id)
	if err != nil {
		t.Fatal(err)
	}
	if tk.Status != task.StatusWorking {
		t.Errorf("after the shutdown the task is %s (%q), want it left working for recovery", tk.Status, tk.StatusMessage)
	}
}
