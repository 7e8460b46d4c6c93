package follow

import (
	"encoding/json"
	"fmt"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/translate"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Bounds on the poll interval of a followed 2026-07-28 task: the
// upstream's pollIntervalMs is honoured within them, so that an upstream
// asking for 1 ms polls is not hammered, and one asking for an hour is
// still seen to end.
const (
	minV2026Poll = 50 * time.Millisecond
	maxV2026Poll = 10 * time.Second
)

// V2026Created is what the gateway reads of an upstream CreateTaskResult.
type V2026Created struct {
	TaskID        string
	Status        task.Status
	StatusMessage string
	// PollIntervalMs is the upstream's pollIntervalMs, read as JSON Schema
	// reads an integer (5000.0 is 5000); 0 when absent or not an integer,
	// the largest int64 when beyond it.
	PollIntervalMs int64
	// PollIntervalErr says why PollIntervalMs is not what the upstream
	// sent (ignored or clamped), for a debug log; nil when it is.
	PollIntervalErr error
}

// ReadV2026Created reads a 2026-07-28 CreateTaskResult (resultType "task"
// with a taskId); ok is false for any other answer. A pollIntervalMs that
// is not an integer never makes it fail: the task is followed all the same.
func ReadV2026Created(result json.RawMessage) (V2026Created, bool) {
	var c struct {
		ResultType     string               `json:"resultType"`
		TaskID         string               `json:"taskId"`
		Status         task.Status          `json:"status"`
		StatusMessage  string               `json:"statusMessage"`
		PollIntervalMs jsonx.LenientInteger `json:"pollIntervalMs"`
	}
	if len(result) == 0 || json.Unmarshal(result, &c) != nil || c.ResultType != "task" || c.TaskID == "" {
		return V2026Created{}, false
	}
	return V2026Created{TaskID: c.TaskID, Status: c.Status, StatusMessage: c.StatusMessage,
		PollIntervalMs: c.PollIntervalMs.Value, PollIntervalErr: c.PollIntervalMs.Err}, true
}

// LogOddNumber notes at debug level a number of an upstream's answer that
// was clamped or ignored (err says which and why; nil logs nothing).
func LogOddNumber(log *zap.Logger, answer, upstreamTask, field string, err error) {
	if err != nil && log != nil {
		log.Debug("a number of the upstream's answer is not a 64-bit integer; clamped or ignored",
			zap.String("answer", answer), zap.String("upstream_task", upstreamTask), zap.String("field", field), zap.Error(err))
	}
}

// V2026UpstreamTask is what the worker reads of the upstream's tasks/get.
type V2026UpstreamTask struct {
	TaskID         string                     `json:"taskId"`
	Status         task.Status                `json:"status"`
	StatusMessage  string                     `json:"statusMessage"`
	PollIntervalMs jsonx.LenientInteger       `json:"pollIntervalMs"`
	InputRequests  map[string]json.RawMessage `json:"inputRequests"`
	Result         json.RawMessage            `json:"result"`
	Error          *jsonrpc.Error             `json:"error"`
}

// ReadV2026UpstreamTask decodes the upstream's tasks/get result; its
// numbers as ReadV2026Created reads them.
func ReadV2026UpstreamTask(result json.RawMessage, log *zap.Logger) (V2026UpstreamTask, error) {
	var up V2026UpstreamTask
	if err := json.Unmarshal(result, &up); err != nil {
		return V2026UpstreamTask{}, fmt.Errorf("reading tasks/get: %w", err)
	}
	LogOddNumber(log, "tasks/get", up.TaskID, "pollIntervalMs", up.PollIntervalMs.Err)
	return up, nil
}

// PollEvery is how often to poll an upstream that asks for ms between
// polls (0: it did not say), within the bounds: clamped as milliseconds,
// before a huge value could overflow a time.Duration.
func PollEvery(ms int64) time.Duration {
	return ClampV2026Poll(time.Duration(min(max(ms, 0), maxV2026Poll.Milliseconds())) * time.Millisecond)
}

// V2026ResultFor is a 2026-07-28 upstream's result as t's client takes
// it: a 2025-11-25 task's (the reverse version bridge's) without the
// 2026-07-28 fields, any other as the upstream wrote it.
func V2026ResultFor(t *task.Task, result json.RawMessage) json.RawMessage {
	if t.Era == task.Era2025 {
		return translate.V2025Result(result)
	}
	return result
}

func ClampV2026Poll(d time.Duration) time.Duration { return min(max(d, minV2026Poll), maxV2026Poll) }
