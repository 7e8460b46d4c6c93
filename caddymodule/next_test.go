package caddymodule

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"syscall"
	"testing"

	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
)

// The next handler's errors reach the core marked when reverse_proxy could
// not reach an upstream (its dial error does not unwrap to the network
// error, and "no upstreams available" is an unexported sentinel), and as
// they were otherwise; marked or not, they unwrap to Caddy's HandlerError,
// so Caddy's error handling sees the same status.
func TestNextHandlerMarksUnreachable(t *testing.T) {
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	// As reverse_proxy returns it: its 503 passed through its statusError.
	noUpstreams := caddyhttp.Error(http.StatusBadGateway, caddyhttp.Error(http.StatusServiceUnavailable, errors.New(noUpstreamsMessage)))
	tests := []struct {
		name        string
		err         error
		unreachable bool
		status      int
	}{
		{"dial error", caddyhttp.Error(http.StatusBadGateway, reverseproxy.NewDialError(refused)), true, http.StatusBadGateway},
		{"no upstreams available", noUpstreams, true, http.StatusServiceUnavailable},
		{"upstream died mid-answer", caddyhttp.Error(http.StatusBadGateway, io.ErrUnexpectedEOF), false, http.StatusBadGateway},
		{"other error", caddyhttp.Error(http.StatusInternalServerError, fmt.Errorf("template failed")), false, http.StatusInternalServerError},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := nextHandler{next: caddyhttp.HandlerFunc(func(http.ResponseWriter, *http.Request) error { return tt.err })}
			err := n.ServeHTTPErr(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, "/mcp", nil))
			var marked interface{ Unreachable() bool }
			if got := errors.As(err, &marked) && marked.Unreachable(); got != tt.unreachable {
				t.Errorf("marked unreachable = %v, want %v (%v)", got, tt.unreachable, err)
			}
			var he caddyhttp.HandlerError
			if !errors.As(err, &he) || he.StatusCode != tt.status {
				t.Errorf("HandlerError status %d, want %d", he.StatusCode, tt.status)
			}
			if err.Error() != tt.err.Error() {
				t.Errorf("text %q, want the handler's %q", err, tt.err)
			}
		})
	}
}
