package badgerstore

import (
	"testing"
	"time"

	"github.com/dgraph-io/badger/v4"
)

// An expiry is never earlier than asked, whatever the fraction of a
// second the write falls on.
func TestWithTTLRoundsUp(t *testing.T) {
	t.Parallel()
	base := time.Unix(1_000, 0)
	tests := []struct {
		name string
		now  time.Time
		ttl  time.Duration
		want uint64
	}{
		{"on a whole second", base, time.Second, 1_001},
		{"just after a second", base.Add(time.Nanosecond), time.Second, 1_002},
		{"late in a second", base.Add(950 * time.Millisecond), time.Second, 1_002},
		{"a ttl of a fraction", base.Add(100 * time.Millisecond), 300 * time.Millisecond, 1_001},
		{"an hour", base.Add(500 * time.Millisecond), time.Hour, 4_601},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			e := withTTL(badger.NewEntry([]byte("k"), nil), tt.now, tt.ttl)
			if e.ExpiresAt != tt.want {
				t.Errorf("ExpiresAt = %d, want %d", e.ExpiresAt, tt.want)
			}
			if expires := time.Unix(int64(e.ExpiresAt), 0); expires.Before(tt.now.Add(tt.ttl)) {
				t.Errorf("expires at %v, before %v", expires, tt.now.Add(tt.ttl))
			}
		})
	}
}
