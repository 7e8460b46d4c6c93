package task

import (
	"context"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// Summaries and the bounds of a create. A listing shows a few fields of
// each task (tasks/list, the admin API's listing), never its arguments or
// result, so the stores keep those fields apart from the payload and list
// summaries only: the cost of a listing, and of a lookup that answers "not
// found" for another owner's task, does not grow with the size of the
// tasks' results.

// Summary returns what listings show of t and what their filters and the
// owner check need: the task without its arguments, result, error data,
// history, upstream routing, trace state, and with only the unanswered input requests,
// stripped of their content (so that InputsOpen-style counts still work).
// The error keeps its code and message. The copy shares nothing with t.
func (t *Task) Summary() *Task {
	s := &Task{
		ID: t.ID, Owner: t.Owner, Principal: t.Principal, Tenant: t.Tenant, QuotaKey: t.QuotaKey,
		Status: t.Status, StatusMessage: t.StatusMessage,
		CreatedAt: t.CreatedAt, UpdatedAt: t.UpdatedAt, TTL: t.TTL, PollInterval: t.PollInterval,
		Era: t.Era, Tool: t.Tool, Round: t.Round,
		UpstreamTask: t.UpstreamTask, UpstreamTaskID: t.UpstreamTaskID, UpstreamV2026: t.UpstreamV2026,
		IsError: t.IsError, Lease: t.Lease, Route: t.Route, TraceParent: t.TraceParent,
	}
	for _, in := range t.Inputs {
		if !in.Answered {
			s.Inputs = append(s.Inputs, InputRequest{Key: in.Key, Method: in.Method, UpstreamKey: in.UpstreamKey, Round: in.Round})
		}
	}
	if t.Error != nil {
		s.Error = &jsonrpc.Error{Code: t.Error.Code, Message: t.Error.Message}
	}
	return s
}

// SummaryReader is a TaskStore that reads one task's summary without its
// payload. A reader that watches many tasks for changes (a
// subscriptions/listen stream) compares summaries and reads a task whole
// only when its summary moved, so a wake-up costs the same whatever the
// size of the tasks' arguments and results.
type SummaryReader interface {
	// GetSummary returns the summary (Task.Summary) of the owner's task
	// id, with the errors of Get. It reads no arguments or result.
	GetSummary(ctx context.Context, owner, id string) (*Task, error)
}

// GetSummary returns the summary of the owner's task id in s: read through
// s's GetSummary when s is a SummaryReader, or else the Summary of the
// whole record.
func GetSummary(ctx context.Context, s TaskStore, owner, id string) (*Task, error) {
	if r, ok := s.(SummaryReader); ok {
		return r.GetSummary(ctx, owner, id)
	}
	t, err := s.Get(ctx, owner, id)
	if err != nil {
		return nil, err
	}
	return t.Summary(), nil
}

// Limits bounds the tasks one owner keeps, counted per quota (Task.Quota:
// the owner, or the task's QuotaKey); 0 means no bound.
type Limits struct {
	// MaxActive caps the quota's non-terminal tasks.
	MaxActive int
	// MaxFinished caps the quota's terminal tasks still kept (until their
	// ttl ends): at the cap, creates are refused rather than older results
	// deleted before the ttl they were promised.
	MaxFinished int
}

// DefaultMaxFinished is the bound on an owner's finished tasks unless
// configured. A finished task is kept for its whole ttl, so an owner that
// creates tasks at a steady rate keeps rate × ttl of them: 100,000 holds an
// automated principal creating about 110 tasks a second under the default
// 15-minute ttl (and any load test of one principal), while still bounding
// what one principal can pile up; routes open to untrusted callers set less.
const DefaultMaxFinished = 100_000
