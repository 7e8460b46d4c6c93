package runtime

import "time"

// Now is the time the gateway stamps on records: UTC, as the stores keep
// it.
func Now() time.Time { return time.Now().UTC() }
