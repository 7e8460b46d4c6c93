package task

import (
	"bytes"
	"encoding/json"
	"slices"
	"strconv"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
)

// EncodeRecord encodes a task record, for a Store to keep, to exactly the
// bytes json.Marshal gives, faster: every create and every update encodes one, and the reflective
// encoder showed in the profile of a task's life. Values of the usual
// shapes (plain ASCII strings, numbers, times, compact raw JSON) are
// appended by hand; any other value, and anything that fails, is left to
// encoding/json, for the value or for the whole record.
func EncodeRecord(t *Task) ([]byte, error) {
	if b, ok := t.appendJSON(make([]byte, 0, 512+len(t.Params)+len(t.Result))); ok {
		return b, nil
	}
	return json.Marshal(t)
}

// appendJSON appends t as json.Marshal encodes it, in the order and with
// the omissions of Task's field tags; false means it could not be sure to.
func (t *Task) appendJSON(b []byte) ([]byte, bool) {
	ok := true
	str := func(key, s string, omitEmpty bool) {
		if ok && !(omitEmpty && s == "") {
			b = appendKey(b, key)
			b, ok = jsonx.MarshalString(b, s)
		}
	}
	num := func(key string, n int64, omitEmpty bool) {
		if ok && !(omitEmpty && n == 0) {
			b = strconv.AppendInt(appendKey(b, key), n, 10)
		}
	}
	raw := func(key string, v json.RawMessage, omitEmpty bool) {
		if ok && !(omitEmpty && len(v) == 0) {
			b = appendKey(b, key)
			b, ok = appendRaw(b, v)
		}
	}
	stamp := func(key string, tm time.Time) {
		if ok {
			b = append(appendKey(b, key), '"')
			var err error
			b, err = tm.AppendText(b)
			b, ok = append(b, '"'), ok && err == nil
		}
	}
	value := func(key string, v any, omit bool) {
		if ok && !omit {
			data, err := json.Marshal(v)
			b, ok = append(appendKey(b, key), data...), err == nil
		}
	}
	b = append(b, '{')
	str("id", t.ID, false)
	str("owner", t.Owner, false)
	str("quotaKey", t.QuotaKey, true)
	str("principal", t.Principal, true)
	str("tenant", t.Tenant, true)
	str("status", string(t.Status), false)
	str("statusMessage", t.StatusMessage, true)
	stamp("createdAt", t.CreatedAt)
	stamp("updatedAt", t.UpdatedAt)
	num("ttl", int64(t.TTL), false)
	num("pollInterval", int64(t.PollInterval), false)
	str("era", string(t.Era), false)
	str("tool", t.Tool, false)
	raw("params", t.Params, false)
	str("session", t.Session, true)
	raw("upstreamId", t.UpstreamID, true)
	num("round", int64(t.Round), true)
	if ok && t.UpstreamTask {
		b = append(appendKey(b, "upstreamTask"), "true"...)
	}
	str("upstreamTaskId", t.UpstreamTaskID, true)
	if ok && t.UpstreamV2026 {
		b = append(appendKey(b, "upstreamV2026"), "true"...)
	}
	value("inputs", t.Inputs, len(t.Inputs) == 0)
	num("nextInputKey", int64(t.NextInputKey), true)
	raw("result", t.Result, true)
	value("error", t.Error, t.Error == nil)
	if ok && t.IsError {
		b = append(appendKey(b, "isError"), "true"...)
	}
	if ok && t.Lease != (Lease{}) { // by hand: every create writes one
		b = append(appendKey(b, "lease"), '{')
		str("holder", t.Lease.Holder, true)
		if !t.Lease.Expires.IsZero() {
			stamp("expires", t.Lease.Expires)
		}
		b = append(b, '}')
	}
	str("idempotencyKey", t.IdempotencyKey, true)
	str("fingerprint", t.Fingerprint, true)
	str("endpoint", t.Endpoint, true)
	str("entryUri", t.EntryURI, true)
	str("host", t.Host, true)
	if ok && len(t.Headers) > 0 {
		b = appendKey(b, "headers")
		b, ok = appendStringMap(b, t.Headers)
	}
	str("route", t.Route, true)
	str("requestState", t.RequestState, true)
	num("loadShed", int64(t.LoadShed), true)
	if ok && len(t.History) > 0 { // by hand: every task that ends writes one
		b = append(appendKey(b, "history"), '[')
		for i, h := range t.History {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, '{')
			str("from", string(h.From), false)
			str("to", string(h.To), false)
			str("message", h.Message, true)
			stamp("at", h.At)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	str("traceparent", t.TraceParent, true)
	str("tracestate", t.TraceState, true)
	return append(b, '}'), ok
}

// appendKey appends "key": after a comma unless it opens the object.
func appendKey(b []byte, key string) []byte {
	if b[len(b)-1] != '{' {
		b = append(b, ',')
	}
	b = append(b, '"')
	b = append(b, key...)
	return append(b, '"', ':')
}

// appendStringMap appends m as json.Marshal does: keys sorted.
func appendStringMap(b []byte, m map[string]string) ([]byte, bool) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	ok := true
	b = append(b, '{')
	for i, k := range keys {
		if i > 0 {
			b = append(b, ',')
		}
		var ok1, ok2 bool
		b, ok1 = jsonx.MarshalString(b, k)
		b = append(b, ':')
		b, ok2 = jsonx.MarshalString(b, m[k])
		ok = ok && ok1 && ok2
	}
	return append(b, '}'), ok
}

// appendRaw appends raw JSON as json.Marshal would (compacted, with HTML
// characters escaped): as is when it is valid and holds nothing compaction
// or escaping would change.
func appendRaw(b []byte, v json.RawMessage) ([]byte, bool) {
	if v == nil {
		return append(b, "null"...), true
	}
	if bytes.IndexFunc(v, func(r rune) bool { return r <= ' ' || r >= 0x7f || r == '<' || r == '>' || r == '&' }) < 0 && jsonx.Valid(v) {
		return append(b, v...), true
	}
	data, err := json.Marshal(v)
	return append(b, data...), err == nil
}
