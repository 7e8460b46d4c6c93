package wire

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/rpcerr"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// An error of an unavailable store is answered with 503 and Retry-After,
// whatever status the answer would otherwise have; other errors keep their
// status, and any 503 gets Retry-After.
func TestAnswerStatus(t *testing.T) {
	t.Parallel()
	unavailable := rpcerr.InternalError(zap.NewNop(), "reading the task", fmt.Errorf("reading task x: %w", task.ErrUnavailable))
	other := jsonrpc.Errorf(jsonrpc.CodeInternalError, "internal error (ref 0a)")
	// The same words from elsewhere (an upstream's error passed on) are
	// not the gateway's store: only the mark counts.
	lookalike := jsonrpc.Errorf(jsonrpc.CodeInternalError, "%s (ref 0a)", rpcerr.MsgStoreUnavailable)
	for _, tc := range []struct {
		name       string
		status     int
		e          *jsonrpc.Error
		want       int
		retryAfter bool
	}{
		{"unavailable on 2025-11-25", http.StatusOK, unavailable, http.StatusServiceUnavailable, true},
		{"unavailable on 2026-07-28", http.StatusInternalServerError, unavailable, http.StatusServiceUnavailable, true},
		{"another error", http.StatusOK, other, http.StatusOK, false},
		{"the same words, not the store's", http.StatusOK, lookalike, http.StatusOK, false},
		{"a 503 of its own", http.StatusServiceUnavailable, other, http.StatusServiceUnavailable, true},
	} {
		w := httptest.NewRecorder()
		if got := AnswerStatus(w, tc.status, tc.e); got != tc.want || (w.Header().Get("Retry-After") != "") != tc.retryAfter {
			t.Errorf("%s: status %d, Retry-After %q; want %d, Retry-After %v", tc.name, got, w.Header().Get("Retry-After"), tc.want, tc.retryAfter)
		}
	}
}
