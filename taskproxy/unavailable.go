package taskproxy

import (
	"errors"
	"net/http"
	"strings"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// A store that is unavailable for now (task.ErrUnavailable: its database
// down, its disk full or read-only) is a condition the client can wait
// out, not a fault of its request: the answer says so, as HTTP 503 with
// Retry-After whenever the HTTP status is still to be sent, and the
// JSON-RPC error's message begins with msgStoreUnavailable.

// msgStoreUnavailable begins the message of an error caused by a store
// that is unavailable for now.
const msgStoreUnavailable = "task store unavailable; retry later"

// storeRetryAfter is the Retry-After of a 503 answer, in seconds.
const storeRetryAfter = "2"

// unavailableError logs err under a new reference and returns the client's
// error for a store that is unavailable.
func (g *Gateway) unavailableError(what string, err error, fields ...zap.Field) *jsonrpc.Error {
	ref := newErrorRef()
	if ce := g.log.Check(zap.WarnLevel, what); ce != nil {
		ce.Write(append(fields, zap.String("ref", ref), zap.Error(task.CleanStoreError(err)))...)
	}
	return jsonrpc.Errorf(jsonrpc.CodeInternalError, "%s (ref %s)", msgStoreUnavailable, ref)
}

// storeUnavailable reports an error of a store that is unavailable for now.
func storeUnavailable(err error) bool { return errors.Is(err, task.ErrUnavailable) }

// answerStatus is the HTTP status of an error answer that would be sent
// with status: 503 for a store that is unavailable. A 503 gets
// Retry-After.
func answerStatus(w http.ResponseWriter, status int, e *jsonrpc.Error) int {
	if e != nil && strings.HasPrefix(e.Message, msgStoreUnavailable) {
		status = http.StatusServiceUnavailable
	}
	if status == http.StatusServiceUnavailable && w.Header().Get("Retry-After") == "" {
		w.Header().Set("Retry-After", storeRetryAfter)
	}
	return status
}
