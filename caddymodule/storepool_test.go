package caddymodule

import (
	"testing"
	"time"
)

// The stores of a configuration that stops share one grace period, counted
// from its stopping event, since Caddy closes them one after the other.
func TestGraceLeft(t *testing.T) {
	defer stoppingSince.Store(stoppingSince.Load())
	now := time.Now()
	tests := []struct {
		name     string
		stopping time.Time // zero: no stopping event yet
		want     time.Duration
	}{
		{"no stopping event", time.Time{}, shutdownGrace},
		{"stopping now", now, shutdownGrace},
		{"stopping 2s ago", now.Add(-2 * time.Second), shutdownGrace - 2*time.Second},
		{"grace used up", now.Add(-10 * time.Second), 0},
		{"clock stepped back", now.Add(time.Minute), shutdownGrace},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			stoppingSince.Store(0)
			if !tt.stopping.IsZero() {
				stoppingSince.Store(tt.stopping.UnixNano())
			}
			if got := graceLeft(now); got != tt.want {
				t.Errorf("graceLeft = %s, want %s", got, tt.want)
			}
		})
	}
}
