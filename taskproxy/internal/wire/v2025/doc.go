// Package v2025 serves the 2025-11-25 task protocol: requestor-driven
// tasks (a tools/call with params.task becomes a task when the tool's mode
// allows it), tasks/get, tasks/result (blocking, relaying the task's input
// requests, progress and status on its event stream, resumable after a
// reload with Last-Event-ID), tasks/list, tasks/cancel, the client's
// answers to relayed input requests, and notifications/cancelled. It
// renders a task as the 2025-11-25 Task object (Render, AppendJSON: byte
// for byte what encoding/json writes, without reflection).
//
// It imports internal/wire and what is below it, never wire/v2026 or the
// bridge. The root hands it a wire.Exchange (Serve, ServeCancelled,
// ServeInputAnswer, ServeResumedResult).
//
// # A task-augmented call
//
//	tools/call + params.task ──► mode forbidden: -32601
//	                         ──► rate limit, quota, store ──► CreateTaskResult
//	                                                     └──► worker (internal/runtime)
//	tools/call without params.task ──► mode required: -32601; else passed through
package v2025
