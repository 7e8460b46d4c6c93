package taskproxy

import "github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"

// The task model (the task, its states, the Store contract, its errors and
// record format) lives in package task, which the store backends import
// instead of this package. These names let the rest of the core use it as
// before while the core moves into layers of its own: they go when it has.

type (
	AdminLister         = task.AdminLister
	DuplicateError      = task.DuplicateError
	Era                 = task.Era
	EventKind           = task.EventKind
	EventRelay          = task.EventRelay
	EventSink           = task.EventSink
	EventSource         = task.EventSource
	ExpiredLeaseLister  = task.ExpiredLeaseLister
	InputRequest        = task.InputRequest
	Leader              = task.Leader
	Lease               = task.Lease
	Limits              = task.Limits
	QuotaError          = task.QuotaError
	RecordTooLargeError = task.RecordTooLargeError
	StatsReporter       = task.StatsReporter
	Status              = task.Status
	StatusChange        = task.StatusChange
	Store               = task.Store
	StoreStats          = task.StoreStats
	Task                = task.Task
	TaskEvent           = task.TaskEvent
	TaskFilter          = task.TaskFilter
)

const (
	DefaultMaxFinished    = task.DefaultMaxFinished
	DefaultMaxRecordBytes = task.DefaultMaxRecordBytes
	EraLegacy             = task.Era2025
	EraModern             = task.Era2026
	EventChanged          = task.EventChanged
	EventProgress         = task.EventProgress
	StatusCancelled       = task.StatusCancelled
	StatusCompleted       = task.StatusCompleted
	StatusFailed          = task.StatusFailed
	StatusInputRequired   = task.StatusInputRequired
	StatusWorking         = task.StatusWorking
)

var (
	ErrBadTransition       = task.ErrBadTransition
	ErrClosed              = task.ErrClosed
	ErrExists              = task.ErrExists
	ErrExpired             = task.ErrExpired
	ErrForeign             = task.ErrForeign
	ErrIdempotencyMismatch = task.ErrIdempotencyMismatch
	ErrInvalidCursor       = task.ErrInvalidCursor
	ErrLeaseHeld           = task.ErrLeaseHeld
	ErrNoAdminAccess       = task.ErrNoAdminAccess
	ErrNotFound            = task.ErrNotFound
	ErrNotReady            = task.ErrNotReady
	ErrQuotaExceeded       = task.ErrQuotaExceeded
	ErrRecordTooLarge      = task.ErrRecordTooLarge
	ErrTerminal            = task.ErrTerminal
)

// NewTaskID is task.NewTaskID.
func NewTaskID() string { return task.NewTaskID() }

// CanTransition is task.CanTransition.
func CanTransition(from, to Status) bool { return task.CanTransition(from, to) }

// CleanStoreError is task.CleanStoreError.
func CleanStoreError(err error) error { return task.CleanStoreError(err) }

// EncodeRecord is task.EncodeRecord.
func EncodeRecord(t *Task) ([]byte, error) { return task.EncodeRecord(t) }

// DecodeRecord is task.DecodeRecord.
func DecodeRecord(data []byte, t *Task) error { return task.DecodeRecord(data, t) }
