package runtime

import "time"

// clock is the time the runtime stamps on records: UTC, as the stores keep it.
func clock() time.Time { return time.Now().UTC() }
