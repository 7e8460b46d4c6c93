package runtime

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
)

// A failed upstream call's message says what kind of failure it was, and
// nothing of its details (addresses stay in the log).
func TestUpstreamFailureKinds(t *testing.T) {
	reset := &net.OpError{Op: "read", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 9100}, Err: os.NewSyscallError("read", syscall.ECONNRESET)}
	refused := &net.OpError{Op: "dial", Net: "tcp", Addr: &net.TCPAddr{IP: net.IPv4(10, 1, 2, 3), Port: 9100}, Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)}
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"reverse_proxy's 502 after the upstream died", errors.New("calling the upstream: calling upstream: {id=x} reverseproxy.statusError (reverseproxy.go:1776): HTTP 502: EOF"), "upstream connection lost before its answer (ref "},
		{"unexpected EOF", fmt.Errorf("reading the answer: %w", io.ErrUnexpectedEOF), "upstream connection lost before its answer (ref "},
		{"connection reset", fmt.Errorf("calling the upstream: %w", reset), "upstream connection lost before its answer (ref "},
		{"refused", fmt.Errorf("calling the upstream: %w", refused), "upstream unreachable (ref "},
		{"other", errors.New("calling upstream: panic in the next handler"), "upstream call failed (ref "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
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
