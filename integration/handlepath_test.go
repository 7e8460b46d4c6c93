package integration

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestRecoveredTaskUnderHandlePathRunsWithoutTraffic: a gateway inside
// handle_path, which strips its prefix before mcp_tasks runs, is killed
// while a task of a retry_on_restart tool runs. Started again, with no
// request to the route, it re-runs the task: its own request goes to the
// URI the call arrived with (/gw/mcp), which handle_path leads to the
// route, not to the stripped /mcp, which no route serves.
func TestRecoveredTaskUnderHandlePathRunsWithoutTraffic(t *testing.T) {
	t.Parallel()
	up, addr := testUpstream(t)
	home := t.TempDir()
	gw := &gateway{t: t, home: home, addr: freeAddr(t), adminAddr: freeAddr(t)}
	config := filepath.Join(home, "Caddyfile")
	cfg := fmt.Sprintf(`{
	admin %s
	persist_config off
	auto_https off
}

http://:%s {
	bind 127.0.0.1
	handle_path /gw/* {
		mcp_tasks {
			storage_dir %s
			tool slow_echo optional retry_on_restart
		}
		reverse_proxy %s
	}
}
`, gw.adminAddr, gw.port(), filepath.Join(home, "store"), addr)
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	start := func() {
		gw.proc = startProcessEnv(t, gw.env(), gw.addr, caddyBinary, "run", "--config", config, "--adapter", "caddyfile")
	}
	start()
	c := newRPCClient(t, "http://"+gw.addr+"/gw/mcp")
	c.initialize("")
	id := c.createTask("slow_echo", map[string]any{"seconds": 2, "label": "handle-path"}, 600000).TaskID
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := up.WaitCalls(ctx, "slow_echo", 1); err != nil {
		t.Fatal(err)
	}
	killGateway(t, gw)

	start() // no request to the route from here on
	var v replicaTask
	waitFor(t, 60*time.Second, "the task to end without a request to the route", func() bool {
		code, _ := adminDo(t, gw.adminAddr, "GET", "/mcp_tasks/tasks/"+id, &v)
		return code == http.StatusOK && v.Status != "working"
	})
	if err := rerunCompleted(t, gw.adminAddr, id, rerunAfterRestart); err != nil {
		t.Error(err)
	}
	if n := up.Calls("slow_echo"); n != 2 {
		t.Errorf("slow_echo ran %d times upstream, want 2 (before the kill, and the re-run)", n)
	}
	if strings.Contains(gw.logs(), "did not reach the route") {
		t.Errorf("the gateway's own request did not reach the route:\n%s", tail(gw.logs(), 4000))
	}
}
