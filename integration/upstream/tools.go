package upstream

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Tool names. They are the names the official MCP conformance suite expects.
const (
	ToolGreet            = "greet"
	ToolSlowCompute      = "slow_compute"
	ToolSlowEcho         = "slow_echo"
	ToolFailingJob       = "failing_job"
	ToolProtocolErrorJob = "protocol_error_job"
	ToolConfirmDelete    = "confirm_delete"
	ToolMultiInput       = "multi_input"
	ToolWithTask         = "test_tool_with_task"
	ToolBigResult        = "big_result"
)

// maxBigResult bounds big_result's answer.
const maxBigResult = 64 << 20

// Timings of the simulated work. They are only sleeps inside tools, never
// synchronisation.
const (
	progressInterval   = 250 * time.Millisecond
	failingJobDelay    = time.Second
	protocolErrorDelay = 200 * time.Millisecond
	taskWorkDuration   = 2 * time.Second
	// stateTTL bounds how long an input-required round may stay unanswered.
	stateTTL = 15 * time.Minute
)

type greetArgs struct {
	Name string `json:"name"`
}

type slowComputeArgs struct {
	Seconds float64 `json:"seconds"`
	Label   string  `json:"label"`
}

type bigResultArgs struct {
	Bytes int `json:"bytes"`
}

type confirmDeleteArgs struct {
	Filename string `json:"filename"`
}

// objectSchema returns a JSON Schema object; explicit schemas keep the
// argument names and defaults exactly as the conformance suite expects.
func objectSchema(props map[string]any, required ...string) map[string]any {
	s := map[string]any{"type": "object", "properties": props}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

// addTool registers a tool whose handler is counted by the observer. A
// handler that returns a context error is counted as cancelled.
func addTool[In any](s *Server, srv *mcp.Server, t *mcp.Tool, h func(context.Context, *mcp.CallToolRequest, In) (*mcp.CallToolResult, error)) {
	mcp.AddTool(srv, t, func(ctx context.Context, req *mcp.CallToolRequest, in In) (*mcp.CallToolResult, any, error) {
		s.obs.add(s.obs.calls, t.Name)
		res, err := h(ctx, req, in)
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			s.obs.add(s.obs.cancels, t.Name)
			s.logger.Info("tool cancelled", "tool", t.Name, "error", err)
		}
		// err is returned as is: go-sdk sends a *jsonrpc.Error as a JSON-RPC
		// error only if it is not wrapped (it type-asserts, not errors.As).
		return res, nil, err
	})
}

func (s *Server) addTools(srv *mcp.Server) {
	addTool(s, srv, &mcp.Tool{
		Name:        ToolGreet,
		Description: "Greets the caller immediately.",
		InputSchema: objectSchema(map[string]any{
			"name": map[string]any{"type": "string", "description": "Who to greet."},
		}, "name"),
	}, s.greet)
	slowSchema := objectSchema(map[string]any{
		"seconds": map[string]any{"type": "number", "minimum": 0, "maximum": 3600, "default": 3, "description": "How long to work."},
		"label":   map[string]any{"type": "string", "default": "task", "description": "Name of the computation."},
	})
	addTool(s, srv, &mcp.Tool{
		Name:        ToolSlowCompute,
		Description: "Works for the given number of seconds, reporting progress; honours cancellation.",
		InputSchema: slowSchema,
	}, s.slowCompute)
	addTool(s, srv, &mcp.Tool{
		Name:        ToolSlowEcho,
		Description: "Like slow_compute, under its own name: a second slow tool for tests that need two (for example one retried after a gateway restart and one not).",
		InputSchema: slowSchema,
	}, s.slowCompute)
	addTool(s, srv, &mcp.Tool{
		Name:        ToolBigResult,
		Description: "Answers at once with a text result of the given size, for tests of result size limits.",
		InputSchema: objectSchema(map[string]any{
			"bytes": map[string]any{"type": "integer", "minimum": 0, "maximum": maxBigResult, "description": "Length of the text."},
		}, "bytes"),
	}, s.bigResult)
	addTool(s, srv, &mcp.Tool{
		Name:        ToolFailingJob,
		Description: "Fails after about a second with a tool error (isError).",
		InputSchema: objectSchema(map[string]any{}),
	}, s.failingJob)
	addTool(s, srv, &mcp.Tool{
		Name:        ToolProtocolErrorJob,
		Description: "Fails after a short delay with a JSON-RPC internal error.",
		InputSchema: objectSchema(map[string]any{}),
	}, s.protocolErrorJob)
	addTool(s, srv, &mcp.Tool{
		Name:        ToolConfirmDelete,
		Description: "Asks the user to confirm, then pretends to delete the file.",
		InputSchema: objectSchema(map[string]any{
			"filename": map[string]any{"type": "string", "description": "File to delete."},
		}, "filename"),
	}, s.confirmDelete)
	addTool(s, srv, &mcp.Tool{
		Name:        ToolMultiInput,
		Description: "Asks for a name and a colour at once, then combines them.",
		InputSchema: objectSchema(map[string]any{}),
	}, s.multiInput)
	addTool(s, srv, &mcp.Tool{
		Name:        ToolWithTask,
		Description: "Asks for a name, then works for about two seconds.",
		InputSchema: objectSchema(map[string]any{}),
	}, s.toolWithTask)
}

func textResult(text string) *mcp.CallToolResult {
	return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}
}

// pause sleeps for d unless ctx is done first, in which case it returns
// ctx's error.
func pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Server) greet(_ context.Context, _ *mcp.CallToolRequest, in greetArgs) (*mcp.CallToolResult, error) {
	return textResult(fmt.Sprintf("Hello, %s!", in.Name)), nil
}

func (s *Server) bigResult(_ context.Context, _ *mcp.CallToolRequest, in bigResultArgs) (*mcp.CallToolResult, error) {
	if in.Bytes < 0 || in.Bytes > maxBigResult {
		return nil, fmt.Errorf("bytes must be between 0 and %d", maxBigResult)
	}
	return textResult(strings.Repeat("x", in.Bytes)), nil
}

func (s *Server) slowCompute(ctx context.Context, req *mcp.CallToolRequest, in slowComputeArgs) (*mcp.CallToolResult, error) {
	total := time.Duration(in.Seconds * float64(time.Second))
	token := req.Params.GetProgressToken()
	start := time.Now()
	done := time.NewTimer(total)
	defer done.Stop()
	tick := time.NewTicker(progressInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-done.C:
			secs := strconv.FormatFloat(in.Seconds, 'f', -1, 64)
			return textResult(fmt.Sprintf("Computed %s in %ss", in.Label, secs)), nil
		case <-tick.C:
			if token == nil {
				continue
			}
			elapsed := min(time.Since(start).Seconds(), in.Seconds)
			err := req.Session.NotifyProgress(ctx, &mcp.ProgressNotificationParams{
				ProgressToken: token,
				Progress:      elapsed,
				Total:         in.Seconds,
				Message:       fmt.Sprintf("computing %s", in.Label),
			})
			if err != nil {
				// Progress is best effort; the result still matters.
				s.logger.Debug("sending progress", "tool", ToolSlowCompute, "error", err)
			}
		}
	}
}

func (s *Server) failingJob(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, error) {
	if err := pause(ctx, failingJobDelay); err != nil {
		return nil, err
	}
	res := textResult("Job failed: simulated failure")
	res.IsError = true
	return res, nil
}

func (s *Server) protocolErrorJob(ctx context.Context, _ *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, error) {
	if err := pause(ctx, protocolErrorDelay); err != nil {
		return nil, err
	}
	return nil, &jsonrpc.Error{Code: jsonrpc.CodeInternalError, Message: "Simulated protocol error"}
}

func (s *Server) confirmDelete(_ context.Context, req *mcp.CallToolRequest, in confirmDeleteArgs) (*mcp.CallToolResult, error) {
	// The state is bound to the filename, so a confirmation given for one
	// file cannot be replayed to delete another.
	binding := ToolConfirmDelete + "\x00" + in.Filename
	resp, ok := req.Params.InputResponses["confirm"]
	if !ok {
		return &mcp.CallToolResult{
			InputRequests: mcp.InputRequestMap{"confirm": &mcp.ElicitParams{
				Message: fmt.Sprintf("Delete %s?", in.Filename),
				RequestedSchema: objectSchema(map[string]any{
					"confirm": map[string]any{"type": "boolean", "description": "Delete the file?"},
				}, "confirm"),
			}},
			RequestState: s.sealState(binding, time.Now()),
		}, nil
	}
	if err := s.openState(req.Params.RequestState, binding, time.Now()); err != nil {
		return nil, err
	}
	if content, ok := accepted(resp); ok && content["confirm"] == true {
		return textResult(fmt.Sprintf("Deleted %s", in.Filename)), nil
	}
	return textResult(fmt.Sprintf("Kept %s", in.Filename)), nil
}

func (s *Server) multiInput(_ context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, error) {
	questions := map[string]string{"name": "What is your name?", "color": "What is your favourite colour?"}
	_, haveName := req.Params.InputResponses["name"]
	_, haveColor := req.Params.InputResponses["color"]
	if !haveName || !haveColor {
		// Ask for both again even if one was answered: a retry carries only
		// the latest round's responses, and the state does not hold answers.
		ask := mcp.InputRequestMap{}
		for key, question := range questions {
			ask[key] = &mcp.ElicitParams{
				Message: question,
				RequestedSchema: objectSchema(map[string]any{
					key: map[string]any{"type": "string"},
				}, key),
			}
		}
		return &mcp.CallToolResult{InputRequests: ask, RequestState: s.sealState(ToolMultiInput, time.Now())}, nil
	}
	if err := s.openState(req.Params.RequestState, ToolMultiInput, time.Now()); err != nil {
		return nil, err
	}
	answers := map[string]string{}
	for key := range questions {
		content, ok := accepted(req.Params.InputResponses[key])
		answer, _ := content[key].(string)
		if !ok || answer == "" {
			res := textResult(fmt.Sprintf("multi_input: %s was not provided", key))
			res.IsError = true
			return res, nil
		}
		answers[key] = answer
	}
	return textResult(fmt.Sprintf("Hello %s, you like %s", answers["name"], answers["color"])), nil
}

func (s *Server) toolWithTask(ctx context.Context, req *mcp.CallToolRequest, _ struct{}) (*mcp.CallToolResult, error) {
	// "user_name" is the input key other conformance fixtures use.
	resp, ok := req.Params.InputResponses["user_name"]
	if !ok {
		return &mcp.CallToolResult{
			InputRequests: mcp.InputRequestMap{"user_name": &mcp.ElicitParams{
				Message: "What is your name?",
				RequestedSchema: objectSchema(map[string]any{
					"name": map[string]any{"type": "string"},
				}, "name"),
			}},
			RequestState: s.sealState(ToolWithTask, time.Now()),
		}, nil
	}
	if err := s.openState(req.Params.RequestState, ToolWithTask, time.Now()); err != nil {
		return nil, err
	}
	name := "unknown"
	if content, ok := accepted(resp); ok {
		if n, _ := content["name"].(string); n != "" {
			name = n
		}
	}
	if err := pause(ctx, taskWorkDuration); err != nil {
		return nil, err
	}
	return textResult(fmt.Sprintf("Hello, %s! Task completed.", name)), nil
}

// accepted returns the form content of an accepted elicitation response.
func accepted(resp mcp.InputResponse) (map[string]any, bool) {
	er, ok := resp.(*mcp.ElicitResult)
	if !ok || er == nil || er.Action != "accept" {
		return nil, false
	}
	return er.Content, true
}

// sealState returns an opaque requestState: the issue time and an HMAC over
// it and binding. Clients must echo it unchanged; the spec requires servers
// without authentication to protect it against tampering.
func (s *Server) sealState(binding string, now time.Time) string {
	ts := binary.BigEndian.AppendUint64(nil, uint64(now.Unix()))
	return base64.RawURLEncoding.EncodeToString(ts) + "." + base64.RawURLEncoding.EncodeToString(s.stateMAC(ts, binding))
}

// openState verifies a requestState produced by sealState for binding. It
// fails with a JSON-RPC invalid-params error, since the request (not the
// tool) is at fault.
func (s *Server) openState(state, binding string, now time.Time) error {
	invalid := func(why string) error {
		return &jsonrpc.Error{Code: jsonrpc.CodeInvalidParams, Message: "invalid requestState: " + why}
	}
	tsPart, macPart, ok := strings.Cut(state, ".")
	if !ok {
		return invalid("missing or malformed")
	}
	ts, err1 := base64.RawURLEncoding.DecodeString(tsPart)
	mac, err2 := base64.RawURLEncoding.DecodeString(macPart)
	if err1 != nil || err2 != nil || len(ts) != 8 {
		return invalid("malformed")
	}
	if !hmac.Equal(mac, s.stateMAC(ts, binding)) {
		return invalid("signature mismatch")
	}
	if issued := time.Unix(int64(binary.BigEndian.Uint64(ts)), 0); now.Sub(issued) > stateTTL {
		return invalid("expired")
	}
	return nil
}

func (s *Server) stateMAC(ts []byte, binding string) []byte {
	m := hmac.New(sha256.New, s.stateKey)
	m.Write(ts)
	m.Write([]byte(binding))
	return m.Sum(nil)
}
