package gate

import "net/http"

// Header is h.Get(key) for a key written in canonical form (as
// http.CanonicalHeaderKey writes it): the first value, or "". It skips
// the canonicalisation Get makes of its key on every call, which a request
// the gateway answers itself would otherwise pay for each header it reads.
// Servers store a request's header names canonical, so both find the same
// values.
func Header(h http.Header, key string) string {
	if v := h[key]; len(v) > 0 {
		return v[0]
	}
	return ""
}
