package runtime

import (
	"testing"
	"time"
)

func TestTakeoverQuiet(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 12, 2, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name     string
		troubled []time.Duration // failures seen, after t0
		at       time.Duration
		want     bool
	}{
		{"never troubled", nil, 0, false},
		{"just after a failure", []time.Duration{0}, time.Second, true},
		{"a lease's length after it", []time.Duration{0}, LeaseTTL, false},
		{"the latest failure counts", []time.Duration{0, 20 * time.Second}, LeaseTTL + time.Second, true},
		{"an older failure reported late does not shorten it", []time.Duration{20 * time.Second, 0}, LeaseTTL + time.Second, true},
		{"over after the latest", []time.Duration{0, 20 * time.Second}, LeaseTTL + 20*time.Second, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var q takeoverQuiet
			for _, d := range tt.troubled {
				q.troubled(t0.Add(d), LeaseTTL)
			}
			if got := q.quiet(t0.Add(tt.at)); got != tt.want {
				t.Errorf("quiet at +%s = %v, want %v", tt.at, got, tt.want)
			}
		})
	}
}
