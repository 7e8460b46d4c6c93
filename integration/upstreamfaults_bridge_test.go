package integration

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// The upstream killed under the version bridge: the official TypeScript
// everything server (2025-11-25 sessions only) behind the real ./caddy,
// killed with SIGKILL while a 2026-07-28 client's task runs on a session
// the gateway holds for it, and a 2025-11-25 client's task on its own
// session, then started again on its port. Both sessions are gone with the
// process. Both tasks end with a reason; afterwards the bridge opens a new
// session of its own, so the 2026-07-28 client's next calls work without
// restarting Caddy, and a 2025-11-25 client's new session works.

// tsEverythingProcess is the TypeScript everything server as a process
// that can be killed and started again on its address.
type tsEverythingProcess struct {
	t         *testing.T
	addr      string
	node, js  string
	env       []string
	proc      *startedProcess
	startedAt time.Time
}

func startTSEverythingProcess(t *testing.T) *tsEverythingProcess {
	t.Helper()
	dir, env := installTSEverything(t)
	node, err := lookPathIn("node", env)
	if err != nil {
		t.Fatal(err)
	}
	p := &tsEverythingProcess{t: t, addr: freeAddr(t), node: node, env: env,
		js: filepath.Join(dir, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js")}
	if _, err := os.Stat(p.js); err != nil {
		t.Fatalf("server-everything %s: %v", tsEverythingVersion, err)
	}
	p.start()
	return p
}

func (p *tsEverythingProcess) start() {
	p.t.Helper()
	_, port, _ := net.SplitHostPort(p.addr)
	p.proc = startProcessEnv(p.t, append(pathOf(p.env), "PORT="+port), p.addr, p.node, p.js, "streamableHttp")
	p.startedAt = time.Now()
}

func (p *tsEverythingProcess) kill() {
	p.t.Helper()
	if err := p.proc.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		p.t.Fatalf("SIGKILL: %v", err)
	}
	select {
	case <-p.proc.done:
	case <-time.After(30 * time.Second):
		p.t.Fatal("the killed upstream did not exit")
	}
}

func TestUpstreamKilledBridged(t *testing.T) {
	t.Parallel()
	up := startTSEverythingProcess(t)
	gw := startGateway(t, gatewayOptions{Upstream: up.addr, Directives: "task_after 300ms\nrate_limit off"})
	v2026 := newBridgeClient(t, gw.URL, "", true)
	v2025 := newRPCClient(t, gw.URL)
	v2025.initialize("")

	long := map[string]any{"name": "trigger-long-running-operation", "arguments": map[string]any{"duration": 60, "steps": 60}}
	bridged := v2026.ok("tools/call", long)
	if str(bridged["resultType"]) != "task" {
		t.Fatalf("a long call over the bridge answered %v, want a task", bridged)
	}
	task25 := v2025.createTask("trigger-long-running-operation", map[string]any{"duration": 60, "steps": 60}, 600000)
	v2026.waitTask(str(bridged["taskId"]), "working")
	waitFor(t, 30*time.Second, "the 2025-11-25 task to work", func() bool { return v2025.getTask(task25.TaskID).Status == "working" })

	up.kill()
	up.start()

	// Every accepted task ends with a reason.
	ended := map[string]string{}
	bridgedEnd := v2026.waitTask(str(bridged["taskId"]), "completed", "failed", "cancelled")
	ended["2026-07-28 over the bridge"] = str(bridgedEnd["status"]) + " " + str(bridgedEnd["statusMessage"])
	var v2025End v2025Task
	waitFor(t, 60*time.Second, "the 2025-11-25 task to end", func() bool {
		v2025End = readTaskOnAnySession(t, &v2025, gw.URL, task25.TaskID)
		return v2025End.Status != "working" && v2025End.Status != "input_required"
	})
	ended["2025-11-25"] = v2025End.Status + " " + v2025End.StatusMessage
	for who, outcome := range ended {
		if !strings.HasPrefix(outcome, "failed ") || !upstreamFailureExplained(outcome) {
			t.Errorf("%s task ended %q, want failed naming the upstream's failure", who, outcome)
		}
	}

	// New calls work: the 2026-07-28 client's on the bridge's new session,
	// a 2025-11-25 client's on a new session of its own.
	var recovery time.Duration
	waitFor(t, 60*time.Second, "a call of each version to complete after the upstream is back", func() bool {
		m, _, _ := v2026.send("tools/call", map[string]any{"name": "echo", "arguments": map[string]any{"message": "back"}})
		if m.Error != nil || !strings.Contains(string(m.Result), "back") {
			return false
		}
		fresh := newRPCClient(t, gw.URL)
		if init := fresh.call("initialize", map[string]any{"protocolVersion": "2025-11-25", "capabilities": map[string]any{},
			"clientInfo": map[string]any{"name": "e2e", "version": "1"}}); init.Error != nil {
			return false
		}
		fresh.version = "2025-11-25"
		fresh.notify("notifications/initialized", nil)
		if m := fresh.callTool("echo", map[string]any{"message": "back"}, nil); m.Error != nil || !strings.Contains(string(m.Result), "back") {
			return false
		}
		recovery = time.Since(up.startedAt)
		return true
	})
	res := v2026.ok("tools/call", map[string]any{"name": "trigger-long-running-operation", "arguments": map[string]any{"duration": 1, "steps": 1}})
	if str(res["resultType"]) == "task" {
		if done := v2026.waitTask(str(res["taskId"]), "completed", "failed", "cancelled"); str(done["status"]) != "completed" {
			t.Errorf("a task over the bridge after the restart ended %s", mustJSON(done))
		}
	}
	t.Logf("upstream killed under the bridge: tasks accepted 2, ended with a reason %d, lost %d; recovered %s after the restart; outcomes %v",
		len(ended), 2-len(ended), recovery.Round(10*time.Millisecond), ended)
}

// readTaskOnAnySession reads a 2025-11-25 task as its client does when the
// gateway may have ended the client's session: once the upstream says it
// lost the session the call ran on (the resumed stream of a call the
// upstream's restart cut learns it), the gateway ends the client's session
// too, and the next request on it answers 404. The client then starts a
// new session, as the transport says, and reads its task there: a task
// belongs to its owner, not to a session.
func readTaskOnAnySession(t *testing.T, c **rpcClient, url, id string) v2025Task {
	t.Helper()
	body, err := jsonrpc.RequestBytes((*c).id(), "tasks/get", map[string]string{"taskId": id})
	if err != nil {
		t.Fatal(err)
	}
	resp := (*c).post(context.Background(), body)
	resp.Body.Close()
	if resp.StatusCode == http.StatusNotFound {
		*c = newRPCClient(t, url)
		(*c).initialize("")
	}
	return (*c).getTask(id)
}
