package task

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
)

// DecodeRecord decodes a stored task record (EncodeRecord's or
// json.Marshal's) into t (a zero Task) exactly as json.Unmarshal does, faster: every read of a task (each tasks/get that
// misses the view cache, each compare-and-set of an update) decodes one,
// and the profile showed the reflective decoder as the larger part of a
// store read. The fast path walks the record's members and decodes the
// common shapes by hand, handing each unusual value to json.Unmarshal on
// its own; anything it does not know (a key it does not recognise exactly,
// a value that does not decode) sends the whole record to json.Unmarshal,
// so that the result and the error are always the decoder's.
func DecodeRecord(data []byte, t *Task) error {
	if decodeRecordFast(data, t) {
		return nil
	}
	*t = Task{}
	return json.Unmarshal(data, t)
}

func decodeRecordFast(data []byte, t *Task) bool {
	i := jsonx.SkipSpace(data, 0)
	if i >= len(data) || data[i] != '{' || !jsonx.Valid(data) {
		return false
	}
	ok := true
	_, err := jsonx.EachMember(data, func(m jsonx.Member) bool {
		ok = t.decodeMember(data[m.KeyStart+1:m.KeyEnd-1], data[m.ValueStart:m.ValueEnd])
		return ok
	})
	return err == nil && ok
}

// decodeMember decodes one member of a record, reporting false when it
// cannot be sure to do as json.Unmarshal would.
func (t *Task) decodeMember(key, v []byte) bool {
	switch string(key) {
	case "id":
		return plainString(v, &t.ID)
	case "owner":
		return plainString(v, &t.Owner)
	case "principal":
		return plainString(v, &t.Principal)
	case "tenant":
		return plainString(v, &t.Tenant)
	case "quotaKey":
		return plainString(v, &t.QuotaKey)
	case "status":
		return plainString(v, &t.Status)
	case "statusMessage":
		return plainString(v, &t.StatusMessage)
	case "createdAt":
		return t.CreatedAt.UnmarshalJSON(v) == nil
	case "updatedAt":
		return t.UpdatedAt.UnmarshalJSON(v) == nil
	case "ttl":
		return plainInt(v, &t.TTL)
	case "pollInterval":
		return plainInt(v, &t.PollInterval)
	case "era":
		return plainString(v, &t.Era)
	case "tool":
		return plainString(v, &t.Tool)
	case "params":
		return t.Params.UnmarshalJSON(v) == nil
	case "session":
		return plainString(v, &t.Session)
	case "upstreamId":
		return t.UpstreamID.UnmarshalJSON(v) == nil
	case "round":
		return plainInt(v, &t.Round)
	case "upstreamTask":
		return json.Unmarshal(v, &t.UpstreamTask) == nil
	case "upstreamTaskId":
		return plainString(v, &t.UpstreamTaskID)
	case "upstreamV2026":
		return json.Unmarshal(v, &t.UpstreamV2026) == nil
	case "inputs":
		return json.Unmarshal(v, &t.Inputs) == nil
	case "nextInputKey":
		return plainInt(v, &t.NextInputKey)
	case "result":
		return t.Result.UnmarshalJSON(v) == nil
	case "error":
		return json.Unmarshal(v, &t.Error) == nil
	case "isError":
		return plainBool(v, &t.IsError)
	case "lease":
		return json.Unmarshal(v, &t.Lease) == nil
	case "idempotencyKey":
		return plainString(v, &t.IdempotencyKey)
	case "fingerprint":
		return plainString(v, &t.Fingerprint)
	case "endpoint":
		return plainString(v, &t.Endpoint)
	case "entryUri":
		return plainString(v, &t.EntryURI)
	case "host":
		return plainString(v, &t.Host)
	case "headers":
		return plainStringMap(v, &t.Headers)
	case "route":
		return plainString(v, &t.Route)
	case "requestState":
		return plainString(v, &t.RequestState)
	case "loadShed":
		return plainInt(v, &t.LoadShed)
	case "history":
		return json.Unmarshal(v, &t.History) == nil
	case "traceparent":
		return plainString(v, &t.TraceParent)
	case "tracestate":
		return plainString(v, &t.TraceState)
	}
	return false // another key, or one json.Unmarshal would match ignoring case
}

// plainString decodes a JSON string without escapes by slicing it, and
// leaves any other value to json.Unmarshal.
func plainString[T ~string](v []byte, dst *T) bool {
	if s, ok := unescaped(v); ok {
		*dst = T(s)
		return true
	}
	return json.Unmarshal(v, dst) == nil
}

// unescaped returns the content of a JSON string value that has no escapes
// and is valid UTF-8, which is then exactly its decoded value.
func unescaped(v []byte) (string, bool) {
	if len(v) < 2 || v[0] != '"' {
		return "", false
	}
	s := v[1 : len(v)-1]
	if bytes.IndexByte(s, '\\') >= 0 || !utf8.Valid(s) {
		return "", false
	}
	return string(s), true
}

// plainInt decodes an integer literal; json.Unmarshal has the others.
func plainInt[T ~int | ~int64](v []byte, dst *T) bool {
	if n, err := strconv.ParseInt(string(v), 10, 64); err == nil && int64(T(n)) == n {
		*dst = T(n)
		return true
	}
	return json.Unmarshal(v, dst) == nil
}

func plainBool(v []byte, dst *bool) bool {
	switch string(v) {
	case "true":
		*dst = true
		return true
	case "false":
		*dst = false
		return true
	}
	return json.Unmarshal(v, dst) == nil
}

// plainStringMap decodes an object of plain strings into *dst, adding to
// it as json.Unmarshal does; any other value is left to json.Unmarshal.
func plainStringMap(v []byte, dst *map[string]string) bool {
	if len(v) == 0 || v[0] != '{' {
		return json.Unmarshal(v, dst) == nil
	}
	var keys, values [16]string
	n, plain := 0, true
	_, err := jsonx.EachMember(v, func(m jsonx.Member) bool {
		k, ok1 := unescaped(v[m.KeyStart:m.KeyEnd])
		s, ok2 := unescaped(v[m.ValueStart:m.ValueEnd])
		if !ok1 || !ok2 || n == len(keys) {
			plain = false
			return false
		}
		keys[n], values[n] = k, s
		n++
		return true
	})
	if err != nil || !plain {
		return json.Unmarshal(v, dst) == nil
	}
	if *dst == nil {
		*dst = make(map[string]string, n)
	}
	for i := range n {
		(*dst)[keys[i]] = values[i]
	}
	return true
}
