package caddymodule

import (
	"errors"
	"net/http"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
)

// nextHandler presents Caddy's next handler to the core as an http.Handler
// that can also report its error (taskproxy.ErrorHandler), and tells the
// route's upstream state how each call ended (observe; nil: nothing is).
type nextHandler struct {
	next    caddyhttp.Handler
	observe func(error)
}

// ServeHTTP writes the status of an error, for callers that cannot take it.
func (n nextHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if err := n.ServeHTTPErr(w, r); err != nil {
		status := http.StatusBadGateway
		var he caddyhttp.HandlerError
		if errors.As(err, &he) && he.StatusCode != 0 {
			status = he.StatusCode
		}
		http.Error(w, http.StatusText(status), status)
	}
}

// ServeHTTPErr returns the error of Caddy's handler chain, marked as
// unreachableError when it says the upstream could not be reached.
func (n nextHandler) ServeHTTPErr(w http.ResponseWriter, r *http.Request) error {
	err := n.next.ServeHTTP(w, r)
	if err != nil && upstreamUnreachable(err) {
		err = unreachableError{err}
	}
	if n.observe != nil {
		n.observe(withoutHandlerFrame(err))
	}
	return err
}

// withoutHandlerFrame is err reading as the failure it carries: Caddy's
// HandlerError prefixes its text with the request id and the Go frame
// that made it ("{id=…} reverseproxy.statusError (reverseproxy.go:1400):
// HTTP 502: dial tcp …"), which tells an operator reading the route's last
// error nothing. It still unwraps to err, so nothing that reads the
// error by type sees a difference.
func withoutHandlerFrame(err error) error {
	var he caddyhttp.HandlerError
	if err == nil || !errors.As(err, &he) || he.Err == nil {
		return err
	}
	return describedError{err: err, text: he.Err.Error()}
}

// describedError is err with another text.
type describedError struct {
	err  error
	text string
}

func (e describedError) Error() string { return e.text }
func (e describedError) Unwrap() error { return e.err }

// noUpstreamsMessage is the text of reverse_proxy's error when no upstream
// is available (all down, or none configured); Caddy does not export it.
const noUpstreamsMessage = "no upstreams available"

// upstreamUnreachable reports reverse_proxy's errors for a call that never
// reached an upstream. Its dial error (reverseproxy.DialError) does not
// unwrap to the network error it holds, so the core, which reads Go's
// network errors by type, cannot see it: the glue, which knows Caddy's
// types, says so.
func upstreamUnreachable(err error) bool {
	if _, ok := errors.AsType[reverseproxy.DialError](err); ok {
		return true
	}
	for e := err; e != nil; e = errors.Unwrap(e) { // Caddy's sentinel, by its exact text
		if e.Error() == noUpstreamsMessage {
			return true
		}
	}
	return false
}

// unreachableError marks an error of the next handler's as a call that
// never reached the upstream (the core's upstream.Unreachable reads the
// mark); it unwraps to the error, so Caddy's handling of it is unchanged.
type unreachableError struct{ err error }

func (e unreachableError) Error() string     { return e.err.Error() }
func (e unreachableError) Unwrap() error     { return e.err }
func (e unreachableError) Unreachable() bool { return true }
