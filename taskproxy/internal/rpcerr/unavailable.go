package rpcerr

import (
	"errors"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// A store that is unavailable for now (task.ErrUnavailable: its database
// down, its disk full or read-only) is a condition the client can wait
// out, not a fault of its request: the answer says so, as HTTP 503 with
// Retry-After whenever the HTTP status is still to be sent (the JSON-RPC
// error is marked Unavailable), and its message begins with
// MsgStoreUnavailable.

// MsgStoreUnavailable begins the message of an error caused by a store
// that is unavailable for now.
const MsgStoreUnavailable = "task store unavailable; retry later"

// StoreRetryAfter is the Retry-After of a 503 answer, in seconds.
const StoreRetryAfter = "2"

// unavailableError logs err under a new reference and returns the client's
// error for a store that is unavailable.
func unavailableError(log *zap.Logger, what string, err error, fields ...zap.Field) *jsonrpc.Error {
	ref := newErrorRef()
	if ce := log.Check(zap.WarnLevel, what); ce != nil {
		ce.Write(append(fields, zap.String("ref", ref), zap.Error(task.CleanStoreError(err)))...)
	}
	e := jsonrpc.Errorf(jsonrpc.CodeInternalError, "%s (ref %s)", MsgStoreUnavailable, ref)
	e.Unavailable = true
	return e
}

// StoreUnavailable reports an error of a store that is unavailable for now.
func StoreUnavailable(err error) bool { return errors.Is(err, task.ErrUnavailable) }
