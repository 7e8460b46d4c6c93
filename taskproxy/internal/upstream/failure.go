package upstream

import (
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
)

// Failures of the next handler. The text of an error the next handler
// (normally reverse_proxy) ends a call with is not the gateway's: it may
// name addresses and must reach neither clients nor stored tasks. Such
// errors are classified by type where they arise: ServeNextRecovering
// wraps every error of the next handler, and every panic in it, in a
// NextError; Unreachable and ConnectionLost read Go's network errors; and
// the Caddy glue marks the errors of reverse_proxy's that do not unwrap
// (its dial errors) with an Unreachable method, which only it can know.

// NextError is an error the next handler ended a call with, or a panic in
// it.
type NextError struct {
	// Err is the handler's error, or says what it panicked with.
	Err error
	// Panicked says the handler panicked.
	Panicked bool
}

func (e *NextError) Error() string { return e.Err.Error() }
func (e *NextError) Unwrap() error { return e.Err }

// nextError wraps err, the next handler's, in a NextError (nil stays nil).
func nextError(err error) error {
	if err == nil {
		return nil
	}
	return &NextError{Err: err}
}

// nextPanic is the NextError of a panic in the next handler.
func nextPanic(v any) error {
	return &NextError{Err: fmt.Errorf("panic in the next handler: %v", v), Panicked: true}
}

// IsNextError reports whether err is, or wraps, the next handler's error.
func IsNextError(err error) bool {
	var ne *NextError
	return errors.As(err, &ne)
}

// errAnswerAborted is ServeNextRecovering's error for a next handler that
// aborted its answer (panicked with http.ErrAbortHandler). reverse_proxy
// does so, once it has written the head, whenever copying the upstream's
// body fails, without handing the failure on: when reading the upstream's
// body fails (its connection broke: an unexpected EOF, a reset) and when
// writing to the gateway's writer fails (an attempt's writer fails its
// writes only once its drain is over; a pipe's, once its reader closed).
var errAnswerAborted = errors.New("the upstream answer was aborted")

// ErrStreamBroke is in the failure of a call whose event stream broke on
// the upstream's side before the response and was not resumed (again):
// the upstream received the call and may run it on, since a lost stream is
// no cancellation on 2025-11-25.
var ErrStreamBroke = errors.New("the upstream's event stream broke before the response to the call")

// unreachableMarker is implemented by errors that say whether the call
// never reached the upstream (the glue's mark on reverse_proxy's dial
// errors).
type unreachableMarker interface{ Unreachable() bool }

// Unreachable reports an error of a call that did not reach the upstream:
// a failed dial or lookup, a network error of Go's, or an error marked so.
// (A connection lost mid-call is a network error too: ask ConnectionLost
// first.)
func Unreachable(err error) bool {
	var marked unreachableMarker
	if errors.As(err, &marked) && marked.Unreachable() {
		return true
	}
	var opErr *net.OpError
	var dnsErr *net.DNSError
	var errno syscall.Errno
	return errors.As(err, &opErr) || errors.As(err, &dnsErr) || errors.As(err, &errno)
}

// ConnectionLost reports a connection to the upstream that broke before its
// answer came (the upstream process died or restarted mid-call).
func ConnectionLost(err error) bool {
	return errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) ||
		errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
