package v2025

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
)

// plainTTLParam is requestedTTL's fast path for params.task, read on every
// task creation: it finds ttl without the reflective decoder. It answers
// only when the answer is certainly the one decoding into
// struct{TTL *float64 `json:"ttl"`} gives (meta valid JSON and an object,
// no key that decoding could also match to ttl by escapes or case folding,
// the last ttl member null or a number in float64 range), and reports false
// otherwise, leaving the case to the decoder.
func plainTTLParam(meta []byte) (ttl *float64, ok bool) {
	if !json.Valid(meta) {
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
	if value == nil || string(value) == "null" {
		return nil, true
	}
	if c := value[0]; c != '-' && (c < '0' || c > '9') {
		return nil, false // not a number: the decoder's error
	}
	f, err := strconv.ParseFloat(string(value), 64)
	if err != nil {
		return nil, false // out of range: the decoder's error
	}
	return &f, true
}
