package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"mime"
	"net/http"
	"strings"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/sse"
)

// rpcClient speaks raw JSON-RPC over Streamable HTTP, so the tests see the
// exact bytes the gateway sends.
type rpcClient struct {
	t       testing.TB
	url     string
	session string
	version string
	header  http.Header
	nextID  int
	// http sends the requests; nil means httpClient.
	http *http.Client
}

func newRPCClient(t testing.TB, url string) *rpcClient {
	t.Helper()
	return &rpcClient{t: t, url: url, header: http.Header{}}
}

// initialize opens a 2025-11-25 session declaring the given capabilities.
func (c *rpcClient) initialize(capabilities string) *jsonrpc.Message {
	c.t.Helper()
	if capabilities == "" {
		capabilities = `{"elicitation":{}}`
	}
	resp := c.call("initialize", json.RawMessage(`{"protocolVersion":"2025-11-25","capabilities":`+capabilities+`,"clientInfo":{"name":"e2e","version":"1"}}`))
	if resp.Error != nil {
		c.t.Fatalf("initialize: %v", resp.Error)
	}
	c.version = "2025-11-25"
	c.notify("notifications/initialized", nil)
	return resp
}

func (c *rpcClient) newRequest(ctx context.Context, body []byte) *http.Request {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	maps.Copy(req.Header, c.header)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if c.session != "" {
		req.Header.Set("Mcp-Session-Id", c.session)
	}
	if c.version != "" {
		req.Header.Set("Mcp-Protocol-Version", c.version)
	}
	return req
}

// post sends a body and returns the raw HTTP response.
func (c *rpcClient) post(ctx context.Context, body []byte) *http.Response {
	c.t.Helper()
	resp, err := c.httpClient().Do(c.newRequest(ctx, body))
	if err != nil {
		c.t.Fatalf("POST %s: %v", body, err)
	}
	if s := resp.Header.Get("Mcp-Session-Id"); s != "" {
		c.session = s
	}
	return resp
}

// httpClient is the client c sends with.
func (c *rpcClient) httpClient() *http.Client {
	if c.http != nil {
		return c.http
	}
	return httpClient
}

func (c *rpcClient) id() json.RawMessage {
	c.nextID++
	return json.RawMessage(fmt.Sprint(c.nextID))
}

// call sends a request and returns its response, read from JSON or SSE.
func (c *rpcClient) call(method string, params any) *jsonrpc.Message {
	c.t.Helper()
	id := c.id()
	body, err := jsonrpc.RequestBytes(id, method, params)
	if err != nil {
		c.t.Fatal(err)
	}
	s := c.open(context.Background(), body)
	defer s.close()
	return s.response(method, id)
}

// response reads the stream up to the response with id.
func (s *messageStream) response(method string, id json.RawMessage) *jsonrpc.Message {
	s.t.Helper()
	for {
		m := s.next()
		if m == nil {
			s.t.Fatalf("%s: answer ended without a response (HTTP %d)", method, s.status)
		}
		if m.IsResponse() && string(m.ID) == string(id) {
			return m
		}
	}
}

// result calls and decodes a successful result into out.
func (c *rpcClient) result(method string, params any, out any) {
	c.t.Helper()
	m := c.call(method, params)
	if m.Error != nil {
		c.t.Fatalf("%s: unexpected error %d %s", method, m.Error.Code, m.Error.Message)
	}
	if err := json.Unmarshal(m.Result, out); err != nil {
		c.t.Fatalf("%s: decoding %s: %v", method, m.Result, err)
	}
}

// notify sends a notification (or a response) and checks for 202.
func (c *rpcClient) send(body []byte) int {
	c.t.Helper()
	resp := c.post(context.Background(), body)
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

func (c *rpcClient) notify(method string, params any) {
	c.t.Helper()
	body, err := jsonrpc.RequestBytes(nil, method, params)
	if err != nil {
		c.t.Fatal(err)
	}
	if code := c.send(body); code != http.StatusAccepted {
		c.t.Fatalf("%s: HTTP %d, want 202", method, code)
	}
}

// messageStream reads the JSON-RPC messages of one answer as they arrive.
type messageStream struct {
	t      testing.TB
	resp   *http.Response
	status int
	events *sse.Reader
	json   bool
	done   bool
	cancel context.CancelFunc
}

// open posts body and returns its answer as a stream of messages.
func (c *rpcClient) open(ctx context.Context, body []byte) *messageStream {
	c.t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	return c.openRequest(c.newRequest(ctx, body), cancel)
}

// openRequest sends req and returns its answer as a stream of messages;
// cancel (which may be nil) ends it.
func (c *rpcClient) openRequest(req *http.Request, cancel context.CancelFunc) *messageStream {
	c.t.Helper()
	if cancel == nil {
		cancel = func() {}
	}
	resp, err := c.httpClient().Do(req) //nolint:bodyclose // the returned messageStream reads the body and closes it
	if err != nil {
		c.t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	if sid := resp.Header.Get("Mcp-Session-Id"); sid != "" {
		c.session = sid
	}
	s := &messageStream{t: c.t, resp: resp, status: resp.StatusCode, cancel: cancel}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch mt {
	case "text/event-stream":
		s.events = sse.NewReader(resp.Body)
	case "application/json":
		s.json = true
	default:
		s.done = true
	}
	return s
}

// next returns the next message, or nil at the end of the answer.
func (s *messageStream) next() *jsonrpc.Message {
	s.t.Helper()
	if s.done {
		return nil
	}
	if s.json {
		s.done = true
		data, err := io.ReadAll(s.resp.Body)
		if err != nil {
			s.t.Fatalf("reading answer: %v", err)
		}
		m, err := jsonrpc.Parse(data)
		if err != nil {
			s.t.Fatalf("answer %q: %v", data, err)
		}
		return m
	}
	for {
		ev, err := s.events.Next()
		if err != nil {
			s.done = true
			return nil
		}
		if !ev.HasData || strings.TrimSpace(ev.Data) == "" {
			continue
		}
		m, err := jsonrpc.Parse([]byte(ev.Data))
		if err != nil {
			s.t.Fatalf("event %q: %v", ev.Data, err)
		}
		return m
	}
}

func (s *messageStream) close() {
	s.cancel()
	_ = s.resp.Body.Close()
}

// v2025Task mirrors the 2025-11-25 Task object.
type v2025Task struct {
	TaskID        string `json:"taskId"`
	Status        string `json:"status"`
	StatusMessage string `json:"statusMessage"`
	CreatedAt     string `json:"createdAt"`
	LastUpdatedAt string `json:"lastUpdatedAt"`
	TTL           *int64 `json:"ttl"`
	PollInterval  int64  `json:"pollInterval"`
}

// callTool sends a tools/call, task-augmented when ttl is not nil.
func (c *rpcClient) callTool(name string, args any, task any) *jsonrpc.Message {
	c.t.Helper()
	params := map[string]any{"name": name, "arguments": args}
	if task != nil {
		params["task"] = task
	}
	return c.call("tools/call", params)
}

// createTask makes a task-augmented tools/call and returns the task.
func (c *rpcClient) createTask(name string, args any, ttl int64) v2025Task {
	c.t.Helper()
	m := c.callTool(name, args, map[string]any{"ttl": ttl})
	if m.Error != nil {
		c.t.Fatalf("tools/call %s: %d %s", name, m.Error.Code, m.Error.Message)
	}
	var created struct {
		Task *v2025Task `json:"task"`
	}
	if err := json.Unmarshal(m.Result, &created); err != nil || created.Task == nil {
		c.t.Fatalf("tools/call %s answered %s, want a CreateTaskResult", name, m.Result)
	}
	return *created.Task
}

func (c *rpcClient) getTask(id string) v2025Task {
	c.t.Helper()
	var task v2025Task
	c.result("tasks/get", map[string]string{"taskId": id}, &task)
	return task
}
