package taskruntime

import (
	"encoding/json"
	"maps"
	"slices"
	"time"
)

// Status is a task status of the tasks extension.
type Status string

// The five task statuses. A task starts working, may move between working
// and input_required, and ends in one of the three terminal ones, which
// never change.
const (
	StatusWorking       Status = "working"
	StatusInputRequired Status = "input_required"
	StatusCompleted     Status = "completed"
	StatusFailed        Status = "failed"
	StatusCancelled     Status = "cancelled"
)

// Terminal reports whether s is completed, failed or cancelled.
func (s Status) Terminal() bool {
	return s == StatusCompleted || s == StatusFailed || s == StatusCancelled
}

// isoMillis is the ISO 8601 form of createdAt and lastUpdatedAt.
const isoMillis = "2006-01-02T15:04:05.000Z07:00"

// record is one task as the runtime keeps it, in memory and in the state
// file. Everything a task needs to resume after a restart is here: the
// tool's work replays from its arguments, skipping the steps it already
// reached and reusing the answers it already got.
type record struct {
	ID    string `json:"id"`
	Owner string `json:"owner,omitempty"` // SHA-256 of the binding header's value; "" without one
	Tool  string `json:"tool"`
	// Args are the call's arguments as the client sent them.
	Args json.RawMessage `json:"args,omitempty"`

	Status        Status    `json:"status"`
	StatusMessage string    `json:"statusMessage,omitempty"`
	CreatedAt     time.Time `json:"createdAt"`
	UpdatedAt     time.Time `json:"updatedAt"`
	// TTLMs is the task's ttlMs; nil is unlimited (null on the wire).
	TTLMs  *int64 `json:"ttlMs"`
	PollMs int64  `json:"pollMs"`

	// Step is the last step the work reached, of Steps.
	Step  int `json:"step,omitempty"`
	Steps int `json:"steps,omitempty"`
	// HoldAt, when set, pauses the work on reaching that step until a test
	// releases it; Held says it is paused there now.
	HoldAt *int `json:"holdAt,omitempty"`
	Held   bool `json:"held,omitempty"`

	// Outstanding holds the input requests not answered yet, Answers every
	// answer received, Issued every input key ever issued (keys are never
	// reused within a task).
	Outstanding map[string]json.RawMessage `json:"outstanding,omitempty"`
	Answers     map[string]json.RawMessage `json:"answers,omitempty"`
	Issued      []string                   `json:"issued,omitempty"`

	Result json.RawMessage `json:"result,omitempty"`
	Error  *rpcError       `json:"error,omitempty"`
	// CancelRequested records an acknowledged tasks/cancel.
	CancelRequested bool `json:"cancelRequested,omitempty"`
	// IgnoresCancel marks work that finishes despite tasks/cancel (the
	// extension lets a server decline to stop).
	IgnoresCancel bool `json:"ignoresCancel,omitempty"`
}

// taskFields is the Task shape common to every answer about a task.
func (t *record) taskFields(resultType string) map[string]any {
	m := map[string]any{
		"resultType":     resultType,
		"taskId":         t.ID,
		"status":         t.Status,
		"createdAt":      t.CreatedAt.UTC().Format(isoMillis),
		"lastUpdatedAt":  t.UpdatedAt.UTC().Format(isoMillis),
		"ttlMs":          t.TTLMs,
		"pollIntervalMs": t.PollMs,
	}
	if t.StatusMessage != "" {
		m["statusMessage"] = t.StatusMessage
	}
	return m
}

// createResult is the CreateTaskResult: the flat Task with resultType
// "task".
func (t *record) createResult() map[string]any { return t.taskFields("task") }

// detailed is the DetailedTask a tasks/get answers with: the Task plus, by
// status, every outstanding input request, the result, or the error.
func (t *record) detailed() map[string]any {
	m := t.taskFields("complete")
	switch t.Status {
	case StatusInputRequired:
		reqs := make(map[string]json.RawMessage, len(t.Outstanding))
		maps.Copy(reqs, t.Outstanding)
		m["inputRequests"] = reqs
	case StatusCompleted:
		m["result"] = t.Result
	case StatusFailed:
		m["error"] = t.Error
	}
	return m
}

// expiresAt is when the task's TTL runs out; zero when unlimited.
func (t *record) expiresAt() time.Time {
	if t.TTLMs == nil {
		return time.Time{}
	}
	return t.CreatedAt.Add(time.Duration(*t.TTLMs) * time.Millisecond)
}

// TaskView is a test's view of one task (see [Server.Task]).
type TaskView struct {
	ID            string
	Tool          string
	Owner         string // SHA-256 (hex) of the binding header's value; "" without one
	Status        Status
	StatusMessage string
	Step, Steps   int
	// Held says the work is paused at a hold (see [Server.Hold]).
	Held bool
	// Outstanding and Answered list input keys, sorted.
	Outstanding, Answered []string
	CancelRequested       bool
	CreatedAt, UpdatedAt  time.Time
	// TTL is zero when unlimited.
	TTL time.Duration
	// Result is the CallToolResult of a completed task.
	Result json.RawMessage
	// ErrorCode and ErrorMessage describe a failed task's JSON-RPC error.
	ErrorCode    int
	ErrorMessage string
}

func (t *record) view() TaskView {
	v := TaskView{
		ID: t.ID, Tool: t.Tool, Owner: t.Owner, Status: t.Status, StatusMessage: t.StatusMessage,
		Step: t.Step, Steps: t.Steps, Held: t.Held, CancelRequested: t.CancelRequested,
		CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt, Result: t.Result,
	}
	for k := range t.Outstanding {
		v.Outstanding = append(v.Outstanding, k)
	}
	for k := range t.Answers {
		v.Answered = append(v.Answered, k)
	}
	slices.Sort(v.Outstanding)
	slices.Sort(v.Answered)
	if t.TTLMs != nil {
		v.TTL = time.Duration(*t.TTLMs) * time.Millisecond
	}
	if t.Error != nil {
		v.ErrorCode, v.ErrorMessage = t.Error.Code, t.Error.Message
	}
	return v
}
