package rpcerr

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// A failed upstream call's message says what kind of failure it was, and
// nothing of its details (addresses stay in the log).
func TestUpstreamFailureKinds(t *testing.T) {
	t.Parallel()
	reset := &net.OpError{Op: "read", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 9100}, Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	refused := &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 9100}, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"reverse_proxy's 502 after the upstream died", fmt.Errorf("calling the upstream: %w", &upstream.NextError{Err: handlerError{502, io.EOF}}), "upstream connection lost before its answer (ref "},
		{"unexpected EOF", fmt.Errorf("reading the answer: %w", io.ErrUnexpectedEOF), "upstream connection lost before its answer (ref "},
		{"connection reset", fmt.Errorf("calling the upstream: %w", reset), "upstream connection lost before its answer (ref "},
		{"refused", fmt.Errorf("calling the upstream: %w", refused), "upstream unreachable (ref "},
		{"marked unreachable by the glue", fmt.Errorf("calling the upstream: %w", &upstream.NextError{Err: markedUnreachable{errors.New("dial tcp 10.1.2.3:9100: no route")}}), "upstream unreachable (ref "},
		{"the next handler's other error", fmt.Errorf("calling upstream: %w", &upstream.NextError{Err: handlerError{500, errors.New("reverseproxy failed at 10.1.2.3")}}), "upstream call failed (ref "},
		{"a panic in it", fmt.Errorf("calling upstream: %w", &upstream.NextError{Err: errors.New("panic in the next handler: 10.1.2.3"), Panicked: true}), "upstream call failed (ref "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := UpstreamFailure(zap.NewNop(), tt.err).Message
			if !strings.HasPrefix(got, tt.want) {
				t.Errorf("message %q, want it to start with %q", got, tt.want)
			}
			if strings.Contains(got, "10.1.2.3") || strings.Contains(got, "reverseproxy") {
				t.Errorf("message %q shows the error's details", got)
			}
		})
	}
}

// handlerError is shaped as Caddy's HandlerError: a status and an error it
// unwraps to, with its text around the error's.
type handlerError struct {
	status int
	err    error
}

func (e handlerError) Error() string {
	return fmt.Sprintf("{id=x} reverseproxy.statusError: HTTP %d: %v", e.status, e.err)
}
func (e handlerError) Unwrap() error { return e.err }

// markedUnreachable is the Caddy glue's mark on reverse_proxy's dial errors.
type markedUnreachable struct{ error }

func (e markedUnreachable) Unwrap() error     { return e.error }
func (e markedUnreachable) Unreachable() bool { return true }

// The gateway's own account of an error keeps its text, whatever words it
// uses: only the type of an error says whose it is.
func TestUpstreamFailureKeepsTheGatewaysAccount(t *testing.T) {
	t.Parallel()
	for _, text := range []string{"the upstream ended its answer without a response to the call", "calling upstream: EOF seen in dial panic"} {
		if got := UpstreamFailure(zap.NewNop(), errors.New(text)).Message; got != text {
			t.Errorf("message %q, want %q kept", got, text)
		}
	}
}

// An input answer the gateway could not forward is the upstream's failure;
// any other error of answering is the gateway's (its text hidden), whatever
// words it holds.
func TestAnswerFailure(t *testing.T) {
	t.Parallel()
	refused := &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 9100}, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"forwarding failed", &ForwardError{Err: fmt.Errorf("forwarding the answer upstream: %w", &upstream.NextError{Err: refused})}, "upstream unreachable (ref "},
		{"refused by the upstream", &ForwardError{Err: errors.New("the upstream refused the answer with HTTP 400")}, "the upstream refused the answer with HTTP 400"},
		{"the gateway's own", errors.New("recording the upstream answer at /var/lib/x"), "internal error (ref "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := AnswerFailure(zap.NewNop(), tt.err, "t1").Message
			if !strings.HasPrefix(got, tt.want) {
				t.Errorf("message %q, want it to start with %q", got, tt.want)
			}
		})
	}
}

// A call ended by the worker's own store operation records the store's
// error as a client gets it: a refusal with its text, anything else under
// a reference (a backend's text names files and keys), an outage as one;
// the gateway's own account of the record (fn's error) and the upstream's
// failures are as before.
func TestInterruptedError(t *testing.T) {
	t.Parallel()
	backend := errors.New("badger: corrupt value log at /var/lib/caddy/mcp-tasks/000001.vlog")
	account := errors.New("the upstream asked for more than 64 inputs")
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"a backend's error", StoreFailed(fmt.Errorf("updating task x: %w", backend), nil), "internal error (ref "},
		{"the store unavailable", StoreFailed(fmt.Errorf("reading task x: %w", task.ErrUnavailable), nil), MsgStoreUnavailable},
		{"a refusal", StoreFailed(fmt.Errorf("reading task x: %w", task.ErrNotFound), nil), task.ErrNotFound.Error()},
		{"fn's own account", StoreFailed(account, account), account.Error()},
		{"the upstream's failure", &upstream.NextError{Err: handlerError{502, io.EOF}}, "upstream connection lost before its answer (ref "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := InterruptedError(zap.NewNop(), tt.err, "t1").Message
			if !strings.Contains(got, tt.want) {
				t.Errorf("message %q, want it to hold %q", got, tt.want)
			}
			if strings.Contains(got, "/var/lib") {
				t.Errorf("message %q shows the backend's text", got)
			}
		})
	}
}
