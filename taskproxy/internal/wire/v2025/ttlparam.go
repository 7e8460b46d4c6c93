package v2025

import (
	"bytes"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
)

// plainTTLParam is requestedTTL's fast path for params.task, read on every
// task creation: it finds ttl's value without the reflective decoder. It
// answers only when the answer is certainly the one decoding into
// struct{TTL json.RawMessage `json:"ttl"`} gives (meta valid JSON and an
// object, no key that decoding could also match to ttl by escapes or case
// folding), and reports false otherwise, leaving the case to the decoder.
// ttl is nil when the member is absent or null.
func plainTTLParam(meta []byte) (ttl []byte, ok bool) {
	if !jsonx.Valid(meta) {
		return nil, false
	}
	var value []byte
	plain := true
	_, err := jsonx.EachMember(meta, func(m jsonx.Member) bool {
		key := meta[m.KeyStart+1 : m.KeyEnd-1]
		switch {
		case string(key) == "ttl":
			value = meta[m.ValueStart:m.ValueEnd]
		case bytes.IndexByte(key, '\\') >= 0 || bytes.EqualFold(key, []byte("ttl")):
			plain = false
			return false
		}
		return true
	})
	if err != nil || !plain {
		return nil, false
	}
	if string(value) == "null" {
		return nil, true
	}
	return value, true
}
