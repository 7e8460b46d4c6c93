package badgerstore

import (
	"time"

	"github.com/dgraph-io/badger/v4"
)

// withTTL sets e to expire no sooner than ttl after now. Badger keeps
// expiries in whole seconds and its own WithTTL truncates, so a key
// written at 10.9 s with a ttl of 1 s would expire at 11 s, a tenth of
// its ttl later: the expiry is rounded up instead.
func withTTL(e *badger.Entry, now time.Time, ttl time.Duration) *badger.Entry {
	at := now.Add(ttl)
	secs := at.Unix()
	if at.Nanosecond() > 0 {
		secs++
	}
	e.ExpiresAt = uint64(max(secs, 0))
	return e
}
