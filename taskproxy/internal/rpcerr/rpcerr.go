package rpcerr

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"strings"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Internal errors and clients. The text of an internal error (a store
// error, a Go network error naming addresses, a panic) never reaches a
// client, nor a task's stored error, which its owner reads: the client gets
// a generic message with a reference, and the gateway's log gets the
// details under that reference. Errors that are part of the protocol
// (JSON-RPC errors, the store's refusals, the gateway's own account of a
// broken upstream answer) keep their text.

// newErrorRef returns a short random reference that ties a client's error
// to its log line.
func newErrorRef() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// InternalError logs err under a new reference, with what the gateway was
// doing, and returns the client's error. Fields must not carry arguments or
// results.
func InternalError(log *zap.Logger, what string, err error, fields ...zap.Field) *jsonrpc.Error {
	if StoreUnavailable(err) {
		return unavailableError(log, what, err, fields...)
	}
	ref := newErrorRef()
	if ce := log.Check(zap.ErrorLevel, what); ce != nil {
		ce.Write(append(fields, zap.String("ref", ref), zap.Error(task.CleanStoreError(err)))...)
	}
	return jsonrpc.Errorf(jsonrpc.CodeInternalError, "internal error (ref %s)", ref)
}

// ClientError maps an error of the gateway's own work to the client's
// error: a JSON-RPC error as is, one of the store's refusals with its text,
// anything else through internalError.
func ClientError(log *zap.Logger, what string, err error, fields ...zap.Field) *jsonrpc.Error {
	if rpcErr, ok := errors.AsType[*jsonrpc.Error](err); ok {
		return rpcErr
	}
	if safeStoreError(err) {
		return jsonrpc.Errorf(jsonrpc.CodeInternalError, "%s", err.Error())
	}
	return InternalError(log, what, err, fields...)
}

// safeStoreError reports the store's refusals, whose text names no data.
func safeStoreError(err error) bool {
	for _, e := range []error{task.ErrNotFound, task.ErrTerminal, task.ErrBadTransition, task.ErrLeaseHeld, task.ErrIdempotencyMismatch, task.ErrQuotaExceeded, task.ErrRecordTooLarge, task.ErrClosed} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// UpstreamFailure is the error recorded for an upstream call that ended
// without an answer. The gateway's own account of a broken answer ("ended
// without a response", "not JSON-RPC") keeps its text; a network failure
// becomes "upstream unreachable" and any other foreign error (the next
// handler's, a panic) "upstream call failed", each with a reference to the
// details in the log.
func UpstreamFailure(log *zap.Logger, err error, fields ...zap.Field) *jsonrpc.Error {
	var rpcErr *jsonrpc.Error
	switch {
	case errors.As(err, &rpcErr):
		return rpcErr
	case errors.Is(err, ErrTaskExpired):
		return jsonrpc.Errorf(jsonrpc.CodeInternalError, "%v", ErrTaskExpired)
	case !foreignError(err):
		return jsonrpc.Errorf(jsonrpc.CodeInternalError, "%v", err)
	}
	ref := newErrorRef()
	msg := MsgUpstreamFailed
	switch {
	case upstream.ConnectionLost(err): // first: a reset is an errno too
		msg = MsgUpstreamLost
	case upstream.Unreachable(err):
		msg = MsgUpstreamUnreachable
	}
	if ce := log.Check(zap.WarnLevel, msg); ce != nil {
		ce.Write(append(fields, zap.String("ref", ref), zap.Error(task.CleanStoreError(err)))...)
	}
	return jsonrpc.Errorf(jsonrpc.CodeInternalError, "%s (ref %s)", msg, ref)
}

// The messages UpstreamFailure begins an upstream's failure with (a
// reference follows).
const (
	MsgUpstreamFailed      = "upstream call failed"
	MsgUpstreamLost        = "upstream connection lost before its answer"
	MsgUpstreamUnreachable = "upstream unreachable"
)

// IsUpstreamFailure reports whether msg is the message UpstreamFailure
// gives a call that never got the upstream's answer (unreachable,
// connection lost, or failed in the next handler).
func IsUpstreamFailure(msg string) bool {
	for _, m := range []string{MsgUpstreamFailed, MsgUpstreamLost, MsgUpstreamUnreachable} {
		if strings.HasPrefix(msg, m+" (ref ") {
			return true
		}
	}
	return false
}

// foreignError reports an error whose text the gateway did not write: the
// next handler's error or a panic in it, or a network error (network
// errors name addresses). Each is typed where it arises (upstream.NextError
// and Go's network errors), so the text is never read to tell.
func foreignError(err error) bool {
	return upstream.IsNextError(err) || upstream.Unreachable(err) || upstream.ConnectionLost(err)
}

// AnswerFailure is the error of a client's input answer that could not be
// delivered: forwarding it upstream or recording it failed.
func AnswerFailure(log *zap.Logger, err error, taskID string) *jsonrpc.Error {
	if fe := (*ForwardError)(nil); errors.As(err, &fe) {
		return UpstreamFailure(log, err, zap.String("task", taskID))
	}
	return ClientError(log, "answering an input request", err, zap.String("task", taskID))
}

// ForwardError is the failure of an exchange the gateway had with the
// upstream on a caller's behalf (forwarding an input answer): the
// upstream's failure, reported as one, not the gateway's.
type ForwardError struct{ Err error }

func (e *ForwardError) Error() string { return e.Err.Error() }
func (e *ForwardError) Unwrap() error { return e.Err }

// storeError marks an error of a worker's own store operation (recording
// the call's round or input, reading the answers) that ends its call: the
// store's text, not the upstream's, recorded as ClientError has it.
type storeError struct{ err error }

func (e *storeError) Error() string { return e.err.Error() }
func (e *storeError) Unwrap() error { return e.err }

// StoreFailed marks err, from a store operation whose fn returned fnErr,
// as the store's own error; fn's error (the gateway's account of the
// record) stays as it is.
func StoreFailed(err, fnErr error) error {
	if err == nil || (fnErr != nil && errors.Is(err, fnErr)) {
		return err
	}
	return &storeError{err}
}

// InterruptedError is the error recorded for a call that ended without an
// answer: the upstream's failure, or, when the worker's own store
// operation ended it, the store's, as a client gets it (its refusals with
// their text, anything else under a reference).
func InterruptedError(log *zap.Logger, err error, taskID string) *jsonrpc.Error {
	if se := (*storeError)(nil); errors.As(err, &se) {
		return ClientError(log, "recording the task's call", se.err, zap.String("task", taskID))
	}
	return UpstreamFailure(log, err, zap.String("task", taskID))
}

// ErrTaskExpired is the cause of a task call ended by the task's expiry.
var ErrTaskExpired = errors.New("task expired before completion")
