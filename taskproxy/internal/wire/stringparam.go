package wire

import (
	"bytes"
	"unicode/utf8"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
)

// plainStringParam is stringParam's fast path, for the task methods read on
// every poll: it finds the member without decoding params into a map. It
// answers only when the answer is certainly the one decoding gives (params
// valid JSON, every key and the value free of escapes, the value valid
// UTF-8 and not empty; the last of repeated members, as decoding takes),
// and reports false otherwise, leaving the case to the decoder.
func plainStringParam(params []byte, name string) (string, bool) {
	if len(params) == 0 || !jsonx.Valid(params) {
		return "", false
	}
	s, ok := plainStringMember(params, name)
	if !ok {
		return "", false
	}
	return string(s), true
}

// plainStringMember is plainStringParam for params already known to be
// valid JSON, returning the value's bytes: no copy is made.
func plainStringMember(params []byte, name string) ([]byte, bool) {
	var value []byte
	plain := true
	_, err := jsonx.EachMember(params, func(m jsonx.Member) bool {
		key := params[m.KeyStart+1 : m.KeyEnd-1]
		if bytes.IndexByte(key, '\\') >= 0 {
			plain = false
			return false
		}
		if string(key) == name {
			value = params[m.ValueStart:m.ValueEnd]
		}
		return true
	})
	if err != nil || !plain || len(value) < 3 || value[0] != '"' {
		return nil, false
	}
	s := value[1 : len(value)-1]
	if bytes.IndexByte(s, '\\') >= 0 || !utf8.Valid(s) {
		return nil, false
	}
	return s, true
}
