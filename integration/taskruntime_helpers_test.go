package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/integration/upstream/taskruntime"
)

// startTaskRuntimeInProcess serves the 2026-07-28 task runtime fixture on a
// loopback listener and returns it with its MCP endpoint URL (/mcp); its
// observer API is under /control (taskRuntimeControlURL).
func startTaskRuntimeInProcess(t testing.TB, opts taskruntime.Options) (*taskruntime.Server, string) {
	t.Helper()
	rt, err := taskruntime.New(opts)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", rt)
	mux.Handle("/control/", http.StripPrefix("/control", rt.ControlHandler()))
	srv := httptest.NewServer(mux)
	t.Cleanup(func() {
		srv.Close()
		if err := rt.Close(); err != nil {
			t.Error(err)
		}
	})
	return rt, srv.URL + "/mcp"
}

// taskRuntimeControlURL is the observer API beside a fixture's MCP endpoint.
func taskRuntimeControlURL(mcpURL string) string {
	return strings.TrimSuffix(mcpURL, "/mcp") + "/control"
}

// taskRuntimeProcess is the fixture run as its own process
// (cmd/taskruntime-upstream), so that a test can SIGKILL and restart it.
type taskRuntimeProcess struct {
	bin, addr string
	args      []string
	proc      *startedProcess
	// URL is the MCP endpoint; the observer API is under /control/.
	URL string
}

// startTaskRuntimeProcess builds cmd/taskruntime-upstream and runs it on a
// free port with the given state file and extra flags.
func startTaskRuntimeProcess(t testing.TB, stateFile string, flags ...string) *taskRuntimeProcess {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "taskruntime-upstream")
	if out, err := runCmd(goBuildTimeout, nil, "", "go", "build", "-o", bin, "./cmd/taskruntime-upstream"); err != nil {
		t.Fatalf("building cmd/taskruntime-upstream: %v\n%s", err, out)
	}
	addr := freeAddr(t)
	p := &taskRuntimeProcess{bin: bin, addr: addr, URL: "http://" + addr + "/mcp",
		args: append([]string{"-addr", addr, "-state", stateFile, "-poll", "20ms"}, flags...)}
	p.proc = startProcess(t, addr, bin, p.args...)
	return p
}

// restart kills the process with SIGKILL (no cleanup runs) and starts it
// again with the same flags, on the same address and state file.
func (p *taskRuntimeProcess) restart(t testing.TB) {
	t.Helper()
	if err := p.proc.Cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatalf("SIGKILL: %v", err)
	}
	select {
	case <-p.proc.done:
	case <-time.After(30 * time.Second):
		t.Fatal("the killed task runtime did not exit")
	}
	p.proc = startProcess(t, p.addr, p.bin, p.args...)
}

// control calls the observer API and returns its body.
func (p *taskRuntimeProcess) control(t testing.TB, method, path string) []byte {
	t.Helper()
	req, err := http.NewRequest(method, "http://"+p.addr+"/control"+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode >= 300 {
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	return b
}

// task reads one task through the observer API.
func (p *taskRuntimeProcess) task(t testing.TB, id string) taskruntime.TaskView {
	t.Helper()
	var v taskruntime.TaskView
	if err := json.Unmarshal(p.control(t, http.MethodGet, "/tasks/"+id), &v); err != nil {
		t.Fatal(err)
	}
	return v
}

// taskRuntimeClient sends 2026-07-28 requests with the extension declared
// and every routing header set.
type taskRuntimeClient struct {
	url, auth string
	id        atomic.Int64
}

func newTaskRuntimeClient(url, auth string) *taskRuntimeClient {
	return &taskRuntimeClient{url: url, auth: auth}
}

// taskRuntimeReply is one decoded answer.
type taskRuntimeReply struct {
	Result map[string]any
	Error  *struct {
		Code    int
		Message string
	}
	raw string
}

func (c *taskRuntimeClient) send(t testing.TB, method string, params map[string]any) taskRuntimeReply {
	t.Helper()
	return doTaskRuntimeRequest(t, c.request(t, context.Background(), method, params), method)
}

// request is the HTTP request send sends, on ctx.
func (c *taskRuntimeClient) request(t testing.TB, ctx context.Context, method string, params map[string]any) *http.Request {
	t.Helper()
	params["_meta"] = map[string]any{
		"io.modelcontextprotocol/protocolVersion": taskruntime.ProtocolVersion,
		"io.modelcontextprotocol/clientCapabilities": map[string]any{
			"elicitation": map[string]any{}, "extensions": map[string]any{taskruntime.ExtensionID: map[string]any{}}},
	}
	body, _ := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": c.id.Add(1), "method": method, "params": params})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", taskruntime.ProtocolVersion)
	req.Header.Set("Mcp-Method", method)
	for _, k := range []string{"name", "taskId"} {
		if v, ok := params[k].(string); ok {
			req.Header.Set("Mcp-Name", v)
		}
	}
	if c.auth != "" {
		req.Header.Set("Authorization", c.auth)
	}
	return req
}

func (c *taskRuntimeClient) get(t testing.TB, id string) taskRuntimeReply {
	t.Helper()
	return c.send(t, "tasks/get", map[string]any{"taskId": id})
}

// mustCreate calls tool and returns the id of the task it became.
func (c *taskRuntimeClient) mustCreate(t testing.TB, tool string, args map[string]any) string {
	t.Helper()
	r := c.send(t, "tools/call", map[string]any{"name": tool, "arguments": args})
	id, _ := r.Result["taskId"].(string)
	if r.Result["resultType"] != "task" || id == "" {
		t.Fatalf("tools/call %s: %s, want a CreateTaskResult", tool, r.raw)
	}
	return id
}

// accepted is an ElicitResult accepting one property.
func accepted(prop string, value any) map[string]any {
	return map[string]any{"action": "accept", "content": map[string]any{prop: value}}
}

// doTaskRuntimeRequest sends req (a JSON-RPC request of method) and
// decodes its JSON answer.
func doTaskRuntimeRequest(t testing.TB, req *http.Request, method string) taskRuntimeReply {
	t.Helper()
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	r := taskRuntimeReply{raw: string(b)}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("%s: decoding %q: %v", method, b, err)
	}
	return r
}
