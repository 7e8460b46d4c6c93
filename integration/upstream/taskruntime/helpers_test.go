package taskruntime

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// testTimeout bounds every wait of a test; it is a hang guard, not an
// assertion.
const testTimeout = 30 * time.Second

// testRuntime runs a Server on a real loopback listener. Sweeping happens
// on requests only, so that expiry follows the test's clock.
func testRuntime(t *testing.T, opts Options) (*Server, string) {
	t.Helper()
	if opts.PollInterval == 0 {
		opts.PollInterval = 10 * time.Millisecond
	}
	if opts.SweepInterval == 0 {
		opts.SweepInterval = -1
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(s)
	t.Cleanup(func() {
		srv.Close()
		if err := s.Close(); err != nil {
			t.Error(err)
		}
	})
	return s, srv.URL
}

func waitCtx(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// client speaks the 2026-07-28 wire with correct headers unless a test
// changes them.
type client struct {
	t    *testing.T
	url  string
	caps map[string]any
	auth string
	mu   sync.Mutex
	id   int
}

func newClient(t *testing.T, url string, tasks bool) *client {
	t.Helper()
	caps := map[string]any{"elicitation": map[string]any{"form": map[string]any{}}}
	if tasks {
		caps["extensions"] = map[string]any{ExtensionID: map[string]any{}}
	}
	return &client{t: t, url: url, caps: caps}
}

// reply is one HTTP answer, decoded.
type reply struct {
	status int
	header http.Header
	body   []byte
	Result map[string]any
	Error  *struct {
		Code    int             `json:"code"`
		Message string          `json:"message"`
		Data    json.RawMessage `json:"data"`
	}
	ID json.RawMessage
}

// request sends method with params (plus _meta) and the standard headers;
// edit may change the headers or the whole body before sending.
func (c *client) request(method string, params map[string]any, edit func(h http.Header, body map[string]any)) *reply {
	c.t.Helper()
	c.mu.Lock()
	c.id++
	id := c.id
	c.mu.Unlock()
	if params == nil {
		params = map[string]any{}
	}
	params["_meta"] = map[string]any{metaProtocolVersion: ProtocolVersion, metaClientCapabilities: c.caps}
	body := map[string]any{"jsonrpc": "2.0", "id": id, "method": method, "params": params}
	h := http.Header{}
	h.Set("Content-Type", "application/json")
	h.Set("Accept", "application/json, text/event-stream")
	h.Set(headerProtocolVersion, ProtocolVersion)
	h.Set(headerMethod, method)
	if n, ok := params["name"].(string); ok {
		h.Set(headerName, n)
	} else if n, ok := params["taskId"].(string); ok {
		h.Set(headerName, n)
	}
	if c.auth != "" {
		h.Set("Authorization", c.auth)
	}
	if edit != nil {
		edit(h, body)
	}
	raw, err := json.Marshal(body)
	if err != nil {
		c.t.Fatal(err)
	}
	return c.post(raw, h)
}

func (c *client) post(raw []byte, h http.Header) *reply {
	c.t.Helper()
	req, err := http.NewRequest(http.MethodPost, c.url, bytes.NewReader(raw))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header = h
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		c.t.Fatal(err)
	}
	r := &reply{status: resp.StatusCode, header: resp.Header, body: b}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b = lastEvent(b)
	}
	if len(b) > 0 {
		if err := json.Unmarshal(b, r); err != nil {
			c.t.Fatalf("decoding %q: %v", b, err)
		}
	}
	return r
}

// lastEvent returns the data of the last SSE event (the response).
func lastEvent(b []byte) []byte {
	var last []byte
	for ev := range strings.SplitSeq(string(b), "\n\n") {
		for line := range strings.SplitSeq(ev, "\n") {
			if d, ok := strings.CutPrefix(line, "data: "); ok {
				last = []byte(d)
			}
		}
	}
	return last
}

// call sends tools/call.
func (c *client) call(tool string, args map[string]any) *reply {
	c.t.Helper()
	return c.request("tools/call", map[string]any{"name": tool, "arguments": args}, nil)
}

// createTask calls tool and requires a CreateTaskResult.
func (c *client) createTask(tool string, args map[string]any) string {
	c.t.Helper()
	r := c.call(tool, args)
	if r.status != http.StatusOK || r.Error != nil || r.Result["resultType"] != "task" {
		c.t.Fatalf("tools/call %s: want a CreateTaskResult, got %d %s", tool, r.status, r.body)
	}
	return r.Result["taskId"].(string)
}

func (c *client) get(id string) *reply {
	c.t.Helper()
	return c.request("tasks/get", map[string]any{"taskId": id}, nil)
}

func (c *client) update(id string, responses map[string]any) *reply {
	c.t.Helper()
	return c.request("tasks/update", map[string]any{"taskId": id, "inputResponses": responses}, nil)
}

func (c *client) cancel(id string) *reply {
	c.t.Helper()
	return c.request("tasks/cancel", map[string]any{"taskId": id}, nil)
}

// poll reads tasks/get until the status is one of want.
func (c *client) poll(id string, want ...Status) map[string]any {
	c.t.Helper()
	deadline := time.Now().Add(testTimeout)
	for {
		r := c.get(id)
		if r.Error != nil {
			c.t.Fatalf("tasks/get %s: %s", id, r.body)
		}
		for _, s := range want {
			if r.Result["status"] == string(s) {
				return r.Result
			}
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("task %s: still %v, want %v", id, r.Result["status"], want)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func accept(content map[string]any) map[string]any {
	return map[string]any{"action": "accept", "content": content}
}

// text returns the first text content of a CallToolResult.
func text(result any) string {
	m, _ := result.(map[string]any)
	content, _ := m["content"].([]any)
	if len(content) == 0 {
		return ""
	}
	first, _ := content[0].(map[string]any)
	s, _ := first["text"].(string)
	return s
}

func keys(m any) []string {
	mm, _ := m.(map[string]any)
	return sortedKeys(mm)
}
