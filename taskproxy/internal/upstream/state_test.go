package upstream

import (
	"context"
	"errors"
	"net"
	"syscall"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
	"go.uber.org/zap/zaptest/observer"
)

// markedUnreachable stands for the glue's mark on reverse_proxy's dial
// errors.
type markedUnreachable struct{}

func (markedUnreachable) Error() string     { return "dial tcp 127.0.0.1:1: connect: connection refused" }
func (markedUnreachable) Unreachable() bool { return true }

func TestStateObserve(t *testing.T) {
	t.Parallel()
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}
	yes, no := true, false
	tests := []struct {
		name          string
		calls         []error
		wantReachable *bool
		wantWarnings  int
		wantRecovered int
	}{
		{"no call", nil, nil, 0, 0},
		{"reached", []error{nil}, &yes, 0, 0},
		{"refused, warned once", []error{refused, markedUnreachable{}, refused}, &no, 1, 0},
		{"the client left, the answer broke off: says nothing", []error{context.Canceled, errors.New("the upstream answer was aborted"),
			&net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}}, nil, 0, 0},
		{"down, up, down: warned each time it went down", []error{refused, nil, nil, refused}, &no, 2, 1},
		{"up, then down", []error{nil, refused}, &no, 1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			core, logs := observer.New(zapcore.InfoLevel)
			s := NewState(zap.New(core))
			at := time.Unix(1_000_000, 0)
			for i, err := range tt.calls {
				s.Observe(err, at.Add(time.Duration(i)*time.Second))
			}
			r := s.Report()
			if (r.Reachable == nil) != (tt.wantReachable == nil) || r.Reachable != nil && *r.Reachable != *tt.wantReachable {
				t.Errorf("reachable %v, want %v", r.Reachable, tt.wantReachable)
			}
			if got := logs.FilterLevelExact(zapcore.WarnLevel).Len(); got != tt.wantWarnings {
				t.Errorf("%d warnings, want %d", got, tt.wantWarnings)
			}
			if got := logs.FilterMessage("upstream reachable again").Len(); got != tt.wantRecovered {
				t.Errorf("%d recoveries logged, want %d", got, tt.wantRecovered)
			}
			if tt.wantWarnings > 0 && (r.LastError == "" || r.LastErrorAt.IsZero()) {
				t.Errorf("report %+v: want the last error and its time", r)
			}
		})
	}
}

// A nil State (a route without one) ignores what it is told.
func TestNilStateIgnores(t *testing.T) {
	t.Parallel()
	var s *State
	s.Observe(errors.New("x"), time.Now())
	s.Probed([]string{"2026-07-28"}, false, time.Now())
}
