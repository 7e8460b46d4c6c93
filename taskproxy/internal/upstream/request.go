package upstream

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// Request sends one request of the gateway's own to the upstream,
// with base's headers (and session, when not empty), and returns the
// upstream's response to it: from a JSON answer or an event stream (other
// messages on the stream are skipped). An HTTP error with a JSON-RPC body
// is that response.
func Request(ctx context.Context, base *http.Request, next http.Handler, session string, id json.RawMessage, method string, params any) (*jsonrpc.Message, error) {
	body, err := jsonrpc.RequestBytes(id, method, params)
	if err != nil {
		return nil, fmt.Errorf("encoding %s: %w", method, err)
	}
	req := NewRequest(ctx, base, body)
	if session != "" {
		req.Header.Set(HeaderSessionID, session)
	}
	resp, err := Call(next, req)
	if err != nil {
		return nil, err
	}
	defer FinishBody(resp.Body, time.Second)
	if resp.Status < 200 || resp.Status > 299 {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, MaxHTTPFailureBody))
		return &jsonrpc.Message{JSONRPC: "2.0", ID: id, Error: DescribeHTTPFailure(resp.Status, data)}, nil
	}
	answer, err := ReadAnswer(resp, id, MaxResultOf(ctx))
	if answer != nil {
		return answer, nil
	}
	switch {
	case ctx.Err() != nil: // ended by the gateway: see endCause
		err = context.Cause(ctx)
	case err == nil:
		err = fmt.Errorf("the upstream answered %s without a response", method)
	}
	return nil, fmt.Errorf("%s: %w", method, err)
}
