package upstream_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/integration/upstream"
)

const (
	v2025Version     = "2025-11-25"
	statelessVersion = upstream.StatelessProtocolVersion
	testTimeout      = 30 * time.Second
)

// startUpstream serves a fresh upstream, so that each test observes only its
// own calls.
func startUpstream(t *testing.T) (*upstream.Server, string) {
	t.Helper()
	up := upstream.New(upstream.Options{})
	ts := httptest.NewServer(up)
	t.Cleanup(ts.Close)
	return up, ts.URL
}

func testContext(t *testing.T) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), testTimeout)
	t.Cleanup(cancel)
	return ctx
}

// outcome is what a tools/call produced, independent of protocol era.
type outcome struct {
	text    string
	isError bool
	rpcCode int64 // JSON-RPC error code; 0 if the call returned a result
}

// answers says how the simulated user answers elicitations.
type answers struct {
	decline bool
}

// answer fills in an elicitation form by looking at the requested
// properties, the way a user would.
func (a answers) answer(p *mcp.ElicitParams) *mcp.ElicitResult {
	if a.decline {
		return &mcp.ElicitResult{Action: "decline"}
	}
	schema, _ := p.RequestedSchema.(map[string]any)
	props, _ := schema["properties"].(map[string]any)
	content := map[string]any{}
	for name := range props {
		switch name {
		case "confirm":
			content[name] = true
		case "name":
			content[name] = "Alice"
		case "color":
			content[name] = "blue"
		}
	}
	return &mcp.ElicitResult{Action: "accept", Content: content}
}

// caller performs one logical tools/call in some protocol era, answering
// input requests with a.
type caller func(ctx context.Context, t *testing.T, url, tool string, args map[string]any, a answers) (outcome, error)

var eras = []struct {
	name string
	call caller
}{
	{"2025-11-25/go-sdk-client", sdkCaller(v2025Version)},
	{"2026-07-28/go-sdk-client", sdkCaller(statelessVersion)},
	{"2026-07-28/raw-wire", rawCaller},
}

// connect opens a go-sdk client session at the given protocol version and
// checks that this version was really negotiated.
func connect(ctx context.Context, t *testing.T, url, version string, opts *mcp.ClientOptions) *mcp.ClientSession {
	t.Helper()
	client := mcp.NewClient(&mcp.Implementation{Name: "upstream-test", Version: "1"}, opts)
	cs, err := client.Connect(ctx, &mcp.StreamableClientTransport{Endpoint: url}, &mcp.ClientSessionOptions{ProtocolVersion: version})
	if err != nil {
		t.Fatalf("connecting at %s: %v", version, err)
	}
	t.Cleanup(func() { cs.Close() })
	if got := cs.InitializeResult().ProtocolVersion; got != version {
		t.Fatalf("negotiated protocol version %q, want %q", got, version)
	}
	return cs
}

func sdkCaller(version string) caller {
	return func(ctx context.Context, t *testing.T, url, tool string, args map[string]any, a answers) (outcome, error) {
		t.Helper()
		cs := connect(ctx, t, url, version, &mcp.ClientOptions{
			ElicitationHandler: func(_ context.Context, req *mcp.ElicitRequest) (*mcp.ElicitResult, error) {
				return a.answer(req.Params), nil
			},
		})
		res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
		if wireErr, ok := errors.AsType[*jsonrpc.Error](err); ok {
			return outcome{rpcCode: wireErr.Code}, nil
		}
		if err != nil {
			return outcome{}, fmt.Errorf("calling %s: %w", tool, err)
		}
		return outcomeOf(res), nil
	}
}

func outcomeOf(res *mcp.CallToolResult) outcome {
	o := outcome{isError: res.IsError}
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			o.text += tc.Text
		}
	}
	return o
}

// wireMsg is one JSON-RPC message as seen on the wire.
type wireMsg struct {
	ID     json.RawMessage `json:"id,omitempty"`
	Method string          `json:"method,omitempty"`
	Params json.RawMessage `json:"params,omitempty"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *struct {
		Code    int64  `json:"code"`
		Message string `json:"message"`
	} `json:"error,omitempty"`
}

func (m *wireMsg) isResponse() bool { return len(m.ID) > 0 && m.Method == "" }

// wireToolResult is a tools/call result as seen on the wire.
type wireToolResult struct {
	ResultType string `json:"resultType"`
	Content    []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	IsError       bool `json:"isError"`
	InputRequests map[string]struct {
		Method string          `json:"method"`
		Params json.RawMessage `json:"params"`
	} `json:"inputRequests"`
	RequestState string `json:"requestState"`
}

var rawIDs atomic.Int64

// statelessPost sends one 2026-07-28 stateless request: the
// MCP-Protocol-Version, Mcp-Method and Mcp-Name headers plus the per-request
// _meta (protocolVersion and clientCapabilities are mandatory).
func statelessPost(ctx context.Context, url, method, name string, params map[string]any) (*http.Response, error) {
	p := maps.Clone(params)
	if p == nil {
		p = map[string]any{}
	}
	meta, _ := p["_meta"].(map[string]any)
	meta = maps.Clone(meta)
	if meta == nil {
		meta = map[string]any{}
	}
	meta["io.modelcontextprotocol/protocolVersion"] = statelessVersion
	meta["io.modelcontextprotocol/clientCapabilities"] = map[string]any{"elicitation": map[string]any{"form": map[string]any{}}}
	meta["io.modelcontextprotocol/clientInfo"] = map[string]any{"name": "raw-test", "version": "1"}
	p["_meta"] = meta
	if name != "" {
		p["name"] = name
	}
	body, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": rawIDs.Add(1), "method": method, "params": p})
	if err != nil {
		return nil, fmt.Errorf("encoding %s request: %w", method, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return nil, fmt.Errorf("building %s request: %w", method, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	req.Header.Set("MCP-Protocol-Version", statelessVersion)
	req.Header.Set("Mcp-Method", method)
	if name != "" {
		req.Header.Set("Mcp-Name", name)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("posting %s: %w", method, err)
	}
	return resp, nil
}

// wireStream reads JSON-RPC messages from a POST response, which go-sdk
// sends either as SSE ("event: message" / "data: ...") or as one JSON body.
type wireStream struct {
	resp *http.Response
	sc   *bufio.Scanner
	done bool
}

func newWireStream(resp *http.Response) *wireStream {
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	return &wireStream{resp: resp, sc: sc}
}

// next returns the next message, or io.EOF when the response ended.
func (s *wireStream) next() (*wireMsg, error) {
	ct := s.resp.Header.Get("Content-Type")
	if !strings.HasPrefix(ct, "text/event-stream") {
		if s.done {
			return nil, io.EOF
		}
		s.done = true
		body, err := io.ReadAll(s.resp.Body)
		if err != nil {
			return nil, fmt.Errorf("reading %d response: %w", s.resp.StatusCode, err)
		}
		var m wireMsg
		if err := json.Unmarshal(body, &m); err != nil {
			return nil, fmt.Errorf("status %d, %s body %q: %w", s.resp.StatusCode, ct, body, err)
		}
		return &m, nil
	}
	var data []string
	for s.sc.Scan() {
		line := s.sc.Text()
		if line == "" {
			if len(data) == 0 {
				continue
			}
			var m wireMsg
			if err := json.Unmarshal([]byte(strings.Join(data, "\n")), &m); err != nil {
				return nil, fmt.Errorf("decoding SSE data %q: %w", data, err)
			}
			return &m, nil
		}
		if v, ok := strings.CutPrefix(line, "data:"); ok {
			data = append(data, strings.TrimPrefix(v, " "))
		}
	}
	if err := s.sc.Err(); err != nil {
		return nil, fmt.Errorf("reading SSE: %w", err)
	}
	return nil, io.EOF
}

// response reads messages until the JSON-RPC response, passing any others
// (notifications, server requests) to seen.
func (s *wireStream) response(seen func(*wireMsg)) (*wireMsg, error) {
	for {
		m, err := s.next()
		if err != nil {
			return nil, fmt.Errorf("waiting for response: %w", err)
		}
		if m.isResponse() {
			return m, nil
		}
		if seen != nil {
			seen(m)
		}
	}
}

// statelessCall performs one stateless tools/call round and returns the
// response message and the HTTP response it arrived on.
func statelessCall(ctx context.Context, url, tool string, params map[string]any) (*wireMsg, *http.Response, error) {
	resp, err := statelessPost(ctx, url, "tools/call", tool, params)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	m, err := newWireStream(resp).response(nil)
	if err != nil {
		return nil, resp, fmt.Errorf("tools/call %s (HTTP %d): %w", tool, resp.StatusCode, err)
	}
	return m, resp, nil
}

// rawCaller drives the 2026-07-28 multi-round-trip by hand: on
// input_required it answers every input request and retries with
// inputResponses and the echoed requestState.
func rawCaller(ctx context.Context, t *testing.T, url, tool string, args map[string]any, a answers) (outcome, error) {
	t.Helper()
	params := map[string]any{"arguments": args}
	for round := 1; round <= 5; round++ {
		m, _, err := statelessCall(ctx, url, tool, params)
		if err != nil {
			return outcome{}, err
		}
		if m.Error != nil {
			return outcome{rpcCode: m.Error.Code}, nil
		}
		var res wireToolResult
		if err := json.Unmarshal(m.Result, &res); err != nil {
			return outcome{}, fmt.Errorf("decoding result %s: %w", m.Result, err)
		}
		switch res.ResultType {
		case "complete":
			o := outcome{isError: res.IsError}
			for _, c := range res.Content {
				o.text += c.Text
			}
			return o, nil
		case "input_required":
			responses := map[string]any{}
			for key, ir := range res.InputRequests {
				if ir.Method != "elicitation/create" {
					return outcome{}, fmt.Errorf("input request %q has method %q", key, ir.Method)
				}
				var p mcp.ElicitParams
				if err := json.Unmarshal(ir.Params, &p); err != nil {
					return outcome{}, fmt.Errorf("decoding input request %q: %w", key, err)
				}
				responses[key] = a.answer(&p)
			}
			params = map[string]any{"arguments": args, "inputResponses": responses, "requestState": res.RequestState}
		default:
			return outcome{}, fmt.Errorf("round %d: unexpected resultType %q in %s", round, res.ResultType, m.Result)
		}
	}
	return outcome{}, errors.New("too many input_required rounds")
}

func TestTools(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		tool      string
		args      map[string]any
		answers   answers
		want      outcome
		wantCalls int // handler invocations, counting every round
	}{
		{name: "greet", tool: "greet", args: map[string]any{"name": "Ada"}, want: outcome{text: "Hello, Ada!"}, wantCalls: 1},
		{name: "slow_compute", tool: "slow_compute", args: map[string]any{"seconds": 0.3, "label": "pi"}, want: outcome{text: "Computed pi in 0.3s"}, wantCalls: 1},
		{name: "failing_job", tool: "failing_job", want: outcome{text: "Job failed: simulated failure", isError: true}, wantCalls: 1},
		{name: "protocol_error_job", tool: "protocol_error_job", want: outcome{rpcCode: jsonrpc.CodeInternalError}, wantCalls: 1},
		{name: "confirm_delete accepted", tool: "confirm_delete", args: map[string]any{"filename": "a.txt"}, want: outcome{text: "Deleted a.txt"}, wantCalls: 2},
		{name: "confirm_delete declined", tool: "confirm_delete", args: map[string]any{"filename": "a.txt"}, answers: answers{decline: true}, want: outcome{text: "Kept a.txt"}, wantCalls: 2},
		{name: "multi_input", tool: "multi_input", want: outcome{text: "Hello Alice, you like blue"}, wantCalls: 2},
		{name: "test_tool_with_task", tool: "test_tool_with_task", want: outcome{text: "Hello, Alice! Task completed."}, wantCalls: 2},
		{name: "unknown tool", tool: "no_such_tool", want: outcome{rpcCode: jsonrpc.CodeInvalidParams}, wantCalls: 0},
	}
	for _, era := range eras {
		for _, tc := range tests {
			t.Run(era.name+"/"+tc.name, func(t *testing.T) {
				t.Parallel()
				up, url := startUpstream(t)
				got, err := era.call(testContext(t), t, url, tc.tool, tc.args, tc.answers)
				if err != nil {
					t.Fatal(err)
				}
				if got != tc.want {
					t.Errorf("outcome = %+v, want %+v", got, tc.want)
				}
				if n := up.Calls(tc.tool); n != tc.wantCalls {
					t.Errorf("Calls(%q) = %d, want %d", tc.tool, n, tc.wantCalls)
				}
				if n := up.Cancellations(tc.tool); n != 0 {
					t.Errorf("Cancellations(%q) = %d, want 0", tc.tool, n)
				}
			})
		}
	}
}

// TestSlowComputeCancellation checks that the tool sees cancellation: on
// 2025-11-25 the go-sdk client sends notifications/cancelled, on 2026-07-28
// closing the POST stream is the cancellation.
func TestSlowComputeCancellation(t *testing.T) {
	t.Parallel()
	args := map[string]any{"seconds": 60, "label": "forever"}
	tests := []struct {
		name string
		// run starts a slow_compute call and cancels it, from the client
		// side, once the tool is running.
		run func(ctx context.Context, t *testing.T, up *upstream.Server, url string) error
	}{
		{"2025-11-25/go-sdk-client", func(ctx context.Context, t *testing.T, up *upstream.Server, url string) error {
			return cancelSDKCall(ctx, t, up, url, v2025Version, args)
		}},
		{"2026-07-28/go-sdk-client", func(ctx context.Context, t *testing.T, up *upstream.Server, url string) error {
			return cancelSDKCall(ctx, t, up, url, statelessVersion, args)
		}},
		{"2026-07-28/raw-wire-close-stream", func(ctx context.Context, t *testing.T, up *upstream.Server, url string) error {
			callCtx, cancel := context.WithCancel(ctx)
			defer cancel()
			resp, err := statelessPost(callCtx, url, "tools/call", "slow_compute", map[string]any{
				"arguments": args,
				"_meta":     map[string]any{"progressToken": "cancel-me"},
			})
			if err != nil {
				return err
			}
			defer resp.Body.Close()
			// The first progress notification proves the tool is running.
			m, err := newWireStream(resp).next()
			if err != nil {
				return fmt.Errorf("waiting for progress: %w", err)
			}
			if m.Method != "notifications/progress" {
				return fmt.Errorf("first message = %+v, want notifications/progress", m)
			}
			cancel() // closes the HTTP request: the only cancellation signal
			return nil
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			up, url := startUpstream(t)
			ctx := testContext(t)
			if err := tc.run(ctx, t, up, url); err != nil {
				t.Fatal(err)
			}
			if err := up.WaitCancellations(ctx, "slow_compute", 1); err != nil {
				t.Fatal(err)
			}
			if n := up.Calls("slow_compute"); n != 1 {
				t.Errorf("Calls = %d, want 1", n)
			}
		})
	}
}

func cancelSDKCall(ctx context.Context, t *testing.T, up *upstream.Server, url, version string, args map[string]any) error {
	t.Helper()
	cs := connect(ctx, t, url, version, nil)
	callCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	go func() {
		_, err := cs.CallTool(callCtx, &mcp.CallToolParams{Name: "slow_compute", Arguments: args})
		errc <- err
	}()
	if err := up.WaitCalls(ctx, "slow_compute", 1); err != nil {
		return err
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		return fmt.Errorf("CallTool error = %w, want context.Canceled", err)
	}
	return nil
}

// TestSlowComputeProgress checks that progress notifications carry the
// caller's token and arrive before the result.
func TestSlowComputeProgress(t *testing.T) {
	t.Parallel()
	args := map[string]any{"seconds": 0.8, "label": "p"}
	tests := []struct {
		name string
		run  func(ctx context.Context, t *testing.T, url string) (tokens []any, text string, err error)
	}{
		{"2025-11-25/go-sdk-client", func(ctx context.Context, t *testing.T, url string) ([]any, string, error) {
			var tokens []any
			progress := make(chan any, 100)
			cs := connect(ctx, t, url, v2025Version, &mcp.ClientOptions{
				ProgressNotificationHandler: func(_ context.Context, req *mcp.ProgressNotificationClientRequest) {
					progress <- req.Params.ProgressToken
				},
			})
			params := &mcp.CallToolParams{Name: "slow_compute", Arguments: args}
			params.SetProgressToken("tok-2025")
			res, err := cs.CallTool(ctx, params)
			if err != nil {
				return nil, "", fmt.Errorf("calling slow_compute: %w", err)
			}
			// Notifications precede the response on the same stream, but the
			// client handles them asynchronously; drain what arrived.
			for len(progress) > 0 {
				tokens = append(tokens, <-progress)
			}
			return tokens, outcomeOf(res).text, nil
		}},
		{"2026-07-28/raw-wire", func(ctx context.Context, t *testing.T, url string) ([]any, string, error) {
			resp, err := statelessPost(ctx, url, "tools/call", "slow_compute", map[string]any{
				"arguments": args,
				"_meta":     map[string]any{"progressToken": "tok-2026"},
			})
			if err != nil {
				return nil, "", err
			}
			defer resp.Body.Close()
			var tokens []any
			m, err := newWireStream(resp).response(func(m *wireMsg) {
				var p struct {
					ProgressToken any `json:"progressToken"`
				}
				if m.Method == "notifications/progress" && json.Unmarshal(m.Params, &p) == nil {
					tokens = append(tokens, p.ProgressToken)
				}
			})
			if err != nil {
				return nil, "", err
			}
			var res wireToolResult
			if err := json.Unmarshal(m.Result, &res); err != nil || len(res.Content) == 0 {
				return nil, "", fmt.Errorf("decoding result %s: %w", m.Result, err)
			}
			return tokens, res.Content[0].Text, nil
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, url := startUpstream(t)
			tokens, text, err := tc.run(testContext(t), t, url)
			if err != nil {
				t.Fatal(err)
			}
			if want := "Computed p in 0.8s"; text != want {
				t.Errorf("text = %q, want %q", text, want)
			}
			if len(tokens) == 0 {
				t.Fatal("no progress notifications")
			}
			for _, tok := range tokens {
				if tok != tokens[0] || !strings.HasPrefix(fmt.Sprint(tok), "tok-") {
					t.Errorf("progress tokens = %v, want the caller's token only", tokens)
					break
				}
			}
		})
	}
}

// TestStatelessInputRequired pins the exact 2026-07-28 input_required shape
// and the retry requirements.
func TestStatelessInputRequired(t *testing.T) {
	t.Parallel()
	tests := []struct {
		tool     string
		args     map[string]any
		wantKeys []string
		// wantProp is a property each key's requestedSchema must define.
		wantProp map[string]string
	}{
		{"confirm_delete", map[string]any{"filename": "a.txt"}, []string{"confirm"}, map[string]string{"confirm": "boolean"}},
		{"multi_input", nil, []string{"color", "name"}, map[string]string{"name": "string", "color": "string"}},
		{"test_tool_with_task", nil, []string{"user_name"}, map[string]string{"user_name": "string"}},
	}
	for _, tc := range tests {
		t.Run(tc.tool, func(t *testing.T) {
			t.Parallel()
			up, url := startUpstream(t)
			ctx := testContext(t)
			m, resp, err := statelessCall(ctx, url, tc.tool, map[string]any{"arguments": tc.args})
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != http.StatusOK {
				t.Errorf("HTTP status = %d, want 200", resp.StatusCode)
			}
			var res wireToolResult
			if err := json.Unmarshal(m.Result, &res); err != nil {
				t.Fatalf("decoding %s: %v", m.Result, err)
			}
			if res.ResultType != "input_required" || res.RequestState == "" || len(res.Content) != 0 {
				t.Errorf("result = %s, want resultType input_required, a requestState and no content", m.Result)
			}
			var keys []string
			for key, ir := range res.InputRequests {
				keys = append(keys, key)
				var p struct {
					Mode            string `json:"mode"`
					Message         string `json:"message"`
					RequestedSchema struct {
						Type       string `json:"type"`
						Properties map[string]struct {
							Type string `json:"type"`
						} `json:"properties"`
					} `json:"requestedSchema"`
				}
				if err := json.Unmarshal(ir.Params, &p); err != nil {
					t.Fatalf("decoding input request %q: %v", key, err)
				}
				if ir.Method != "elicitation/create" || p.Mode != "form" || p.Message == "" || p.RequestedSchema.Type != "object" {
					t.Errorf("input request %q = %s %s, want a form elicitation/create", key, ir.Method, ir.Params)
				}
				prop := key
				if key == "user_name" {
					prop = "name"
				}
				if got := p.RequestedSchema.Properties[prop].Type; got != tc.wantProp[key] {
					t.Errorf("input request %q: property %q has type %q, want %q", key, prop, got, tc.wantProp[key])
				}
			}
			if slices.Sort(keys); !slices.Equal(keys, tc.wantKeys) {
				t.Errorf("input request keys = %v, want %v", keys, tc.wantKeys)
			}
			if n := up.Calls(tc.tool); n != 1 {
				t.Errorf("Calls = %d, want 1", n)
			}
		})
	}

	t.Run("confirm_delete tampered requestState", func(t *testing.T) {
		t.Parallel()
		_, url := startUpstream(t)
		ctx := testContext(t)
		// A state issued for one file must not confirm deleting another.
		m, _, err := statelessCall(ctx, url, "confirm_delete", map[string]any{"arguments": map[string]any{"filename": "harmless.txt"}})
		if err != nil {
			t.Fatal(err)
		}
		var res wireToolResult
		if err := json.Unmarshal(m.Result, &res); err != nil {
			t.Fatal(err)
		}
		for _, state := range []string{res.RequestState, "", "garbage"} {
			m, _, err := statelessCall(ctx, url, "confirm_delete", map[string]any{
				"arguments":      map[string]any{"filename": "precious.txt"},
				"inputResponses": map[string]any{"confirm": map[string]any{"action": "accept", "content": map[string]any{"confirm": true}}},
				"requestState":   state,
			})
			if err != nil {
				t.Fatal(err)
			}
			if m.Error == nil || m.Error.Code != jsonrpc.CodeInvalidParams {
				t.Errorf("requestState %q: response = %s %+v, want JSON-RPC error %d", state, m.Result, m.Error, jsonrpc.CodeInvalidParams)
			}
		}
	})
}

// TestProtocolErrorOnWire checks that protocol_error_job is a JSON-RPC error
// on the wire, not a tool result, in both eras.
func TestProtocolErrorOnWire(t *testing.T) {
	t.Parallel()
	_, url := startUpstream(t)
	ctx := testContext(t)

	m, resp, err := statelessCall(ctx, url, "protocol_error_job", nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.Error == nil || m.Error.Code != -32603 || m.Error.Message != "Simulated protocol error" || m.Result != nil {
		t.Errorf("2026-07-28: got %+v / result %s, want JSON-RPC error -32603", m.Error, m.Result)
	}
	if resp.StatusCode != http.StatusOK {
		t.Errorf("2026-07-28: HTTP status = %d, want 200 (only some codes change it)", resp.StatusCode)
	}

	ls := newV2025Session(ctx, t, url)
	stream := ls.post(ctx, t, map[string]any{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": map[string]any{"name": "protocol_error_job"}})
	m, err = stream.response(nil)
	if err != nil {
		t.Fatal(err)
	}
	if m.Error == nil || m.Error.Code != -32603 || m.Result != nil || string(m.ID) != "7" {
		t.Errorf("2025-11-25: got id %s error %+v result %s, want id 7 and JSON-RPC error -32603", m.ID, m.Error, m.Result)
	}
}

// v2025Session is a hand-rolled 2025-11-25 session, to see the wire.
type v2025Session struct {
	url, id string
}

func newV2025Session(ctx context.Context, t *testing.T, url string) *v2025Session {
	t.Helper()
	ls := &v2025Session{url: url}
	stream := ls.post(ctx, t, map[string]any{"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": map[string]any{
		"protocolVersion": v2025Version,
		"capabilities":    map[string]any{"elicitation": map[string]any{"form": map[string]any{}}},
		"clientInfo":      map[string]any{"name": "raw-test", "version": "1"},
	}})
	if _, err := stream.response(nil); err != nil {
		t.Fatal(err)
	}
	ls.id = stream.resp.Header.Get("Mcp-Session-Id")
	if ls.id == "" {
		t.Fatal("initialize response has no Mcp-Session-Id")
	}
	if resp := ls.post(ctx, t, map[string]any{"jsonrpc": "2.0", "method": "notifications/initialized"}).resp; resp.StatusCode != http.StatusAccepted {
		t.Fatalf("notifications/initialized: HTTP %d, want 202", resp.StatusCode)
	}
	return ls
}

func (ls *v2025Session) post(ctx context.Context, t *testing.T, msg map[string]any) *wireStream {
	t.Helper()
	body, err := json.Marshal(msg)
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, ls.url, bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if ls.id != "" {
		req.Header.Set("Mcp-Session-Id", ls.id)
		req.Header.Set("MCP-Protocol-Version", v2025Version)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return newWireStream(resp)
}

// TestV2025ElicitationOnWire checks how go-sdk relays input requests to a
// 2025-11-25 client: as an elicitation/create request on the tools/call
// POST's own SSE stream, answered by a separate POST, after which the result
// arrives on that same stream.
func TestV2025ElicitationOnWire(t *testing.T) {
	t.Parallel()
	up, url := startUpstream(t)
	ctx := testContext(t)
	ls := newV2025Session(ctx, t, url)

	call := ls.post(ctx, t, map[string]any{"jsonrpc": "2.0", "id": "call-1", "method": "tools/call", "params": map[string]any{
		"name": "confirm_delete", "arguments": map[string]any{"filename": "b.txt"},
	}})
	if ct := call.resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("tools/call Content-Type = %q, want text/event-stream", ct)
	}
	m, err := call.next()
	if err != nil {
		t.Fatal(err)
	}
	var p mcp.ElicitParams
	if m.Method != "elicitation/create" || len(m.ID) == 0 || json.Unmarshal(m.Params, &p) != nil || p.Message != "Delete b.txt?" {
		t.Fatalf("first message on the call stream = %+v, want an elicitation/create request", m)
	}
	t.Logf("server->client request id: %s, params: %s", m.ID, m.Params)

	reply := ls.post(ctx, t, map[string]any{"jsonrpc": "2.0", "id": json.RawMessage(m.ID), "result": map[string]any{
		"action": "accept", "content": map[string]any{"confirm": true},
	}})
	if reply.resp.StatusCode != http.StatusAccepted {
		t.Errorf("posting the elicitation result: HTTP %d, want 202", reply.resp.StatusCode)
	}

	m, err = call.response(func(m *wireMsg) { t.Errorf("unexpected message %+v", m) })
	if err != nil {
		t.Fatal(err)
	}
	var res wireToolResult
	if err := json.Unmarshal(m.Result, &res); err != nil || string(m.ID) != `"call-1"` {
		t.Fatalf("response id %s result %s: %v", m.ID, m.Result, err)
	}
	if len(res.Content) != 1 || res.Content[0].Text != "Deleted b.txt" || res.ResultType != "" || res.InputRequests != nil {
		t.Errorf("result = %s, want plain text Deleted b.txt without resultType", m.Result)
	}
	if n := up.Calls("confirm_delete"); n != 2 {
		t.Errorf("Calls = %d, want 2 (go-sdk reinvokes the handler)", n)
	}
}

// TestRouting checks which go-sdk handler a request reaches, and that
// requests forwarded by a reverse proxy with a foreign Host are served.
func TestRouting(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		method     string
		header     map[string]string
		body       string
		wantStatus int
		wantInBody string
	}{
		{
			// Stateless would answer -32020 (header required); the stateful
			// handler would answer -32022 (unsupported protocol version).
			name:       "meta without header goes stateless",
			method:     http.MethodPost,
			body:       `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"greet","arguments":{"name":"x"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
			wantStatus: http.StatusBadRequest,
			wantInBody: `"code":-32020`,
		},
		{
			name:       "2026 header without meta goes stateless",
			method:     http.MethodPost,
			header:     map[string]string{"MCP-Protocol-Version": statelessVersion, "Mcp-Method": "tools/call", "Mcp-Name": "greet"},
			body:       `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"greet","arguments":{"name":"x"}}}`,
			wantStatus: http.StatusBadRequest,
			wantInBody: `missing or invalid _meta field`,
		},
		{
			name:       "GET with 2026 header is refused by the stateless handler",
			method:     http.MethodGet,
			header:     map[string]string{"MCP-Protocol-Version": statelessVersion},
			wantStatus: http.StatusMethodNotAllowed,
		},
		{
			name:       "GET without session goes stateful",
			method:     http.MethodGet,
			wantStatus: http.StatusBadRequest,
			wantInBody: "Mcp-Session-Id",
		},
		{
			name:       "initialize behind a proxy with a foreign Host",
			method:     http.MethodPost,
			header:     map[string]string{"Host": "mcp.example.com"},
			body:       `{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}`,
			wantStatus: http.StatusOK,
			wantInBody: `"protocolVersion":"2025-11-25"`,
		},
		{
			name:       "stateless call behind a proxy with a foreign Host",
			method:     http.MethodPost,
			header:     map[string]string{"Host": "mcp.example.com", "MCP-Protocol-Version": statelessVersion, "Mcp-Method": "tools/call", "Mcp-Name": "greet"},
			body:       `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"greet","arguments":{"name":"x"},"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28","io.modelcontextprotocol/clientCapabilities":{}}}}`,
			wantStatus: http.StatusOK,
			wantInBody: `Hello, x!`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, url := startUpstream(t)
			req, err := http.NewRequestWithContext(testContext(t), tc.method, url, strings.NewReader(tc.body))
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Accept", "application/json, text/event-stream")
			for k, v := range tc.header {
				if k == "Host" {
					req.Host = v
					continue
				}
				req.Header.Set(k, v)
			}
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.wantStatus || !strings.Contains(string(body), tc.wantInBody) {
				t.Errorf("got HTTP %d %q, want %d containing %q", resp.StatusCode, body, tc.wantStatus, tc.wantInBody)
			}
		})
	}
}
