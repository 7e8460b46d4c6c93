package runtime

import (
	"encoding/json"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/rpcerr"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Each way a task fails is counted under its reason: the errors are the
// ones the runtime records, made as it makes them.
func TestFailReason(t *testing.T) {
	t.Parallel()
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: &net.DNSError{Err: "refused"}}
	reset := &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}
	tests := []struct {
		name   string
		result json.RawMessage
		err    *jsonrpc.Error
		want   task.FailReason
	}{
		{"tool error", json.RawMessage(`{"content":[{"type":"text","text":"boom"}],"isError":true}`), nil, task.FailToolError},
		{"upstream's JSON-RPC error", nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "the tool crashed"), task.FailUpstreamError},
		{"upstream's invalid params", nil, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "bad seconds"), task.FailUpstreamError},
		{"broken answer", nil, rpcerr.UpstreamFailure(zap.NewNop(), errors.New("upstream answer ended without a response")), task.FailUpstreamError},
		{"unreachable", nil, rpcerr.UpstreamFailure(zap.NewNop(), refused), task.FailUpstreamUnreachable},
		{"connection lost", nil, rpcerr.UpstreamFailure(zap.NewNop(), reset), task.FailUpstreamUnreachable},
		{"run timeout", nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "%s", RunTimeoutMessage(90*time.Second)), task.FailRunTimeout},
		{"expired", nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "%v", rpcerr.ErrTaskExpired), task.FailExpired},
		{"restart", nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "%s", MsgRestarted), task.FailInterrupted},
		{"route gone", nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "%s", MsgRouteGone), task.FailInterrupted},
		{"replica lost", nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "%s", MsgReplicaLost), task.FailInterrupted},
		{"replica's route gone", nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "%s", MsgReplicaRouteGone), task.FailInterrupted},
		{"worker lost", nil, jsonrpc.Errorf(jsonrpc.CodeInternalError, "%s", MsgWorkerLost), task.FailInterrupted},
		{"outcome lost", nil, outcomeLost(), task.FailInterrupted},
		{"session lost", nil, sessionLostError(&task.Task{Era: task.Era2025}), task.FailInterrupted},
		{"bridge session lost", nil, sessionLostError(&task.Task{Era: task.Era2026}), task.FailInterrupted},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			rec := &task.Task{ID: "t", Era: task.Era2025, Status: task.StatusWorking}
			ApplyOutcome(rec, tt.result, tt.err, time.Now())
			if rec.Status != task.StatusFailed {
				t.Fatalf("status %s, want failed", rec.Status)
			}
			if got := FailReason(rec); got != tt.want {
				t.Errorf("FailReason(%q) = %s, want %s", rec.StatusMessage, got, tt.want)
			}
		})
	}
}
