package taskruntime

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strings"
)

// Integral floats. Runtimes that keep integer fields as floats (Python's
// fastmcp-tasks declares ttlMs and pollIntervalMs as float) write them as
// 900000.0 and 5000.0, and progress as 3.0 of 6.0. JSON Schema's integer
// includes those, so a reader must take them as the integers they are.
// With [Options.IntegralFloats] the runtime answers that way: every
// integer value of a member named in floatKeys, at any depth of an answer
// (results, errors' data, SSE events), is written with ".0".

// floatKeys are the members written as floats.
var floatKeys = map[string]bool{"ttlMs": true, "pollIntervalMs": true, "progress": true, "total": true}

// floatWriter rewrites what the runtime writes: a JSON body whole, an SSE
// event's data lines one by one. Every write of the runtime is one whole
// body or one whole event.
type floatWriter struct {
	http.ResponseWriter
}

func (f floatWriter) Write(b []byte) (int, error) {
	var out []byte
	if t := bytes.TrimSpace(b); len(t) > 0 && t[0] == '{' {
		out = append(integralFloats(t), '\n')
	} else {
		lines := bytes.Split(b, []byte("\n"))
		for i, line := range lines {
			if data, ok := bytes.CutPrefix(line, []byte("data: ")); ok {
				lines[i] = append([]byte("data: "), integralFloats(data)...)
			}
		}
		out = bytes.Join(lines, []byte("\n"))
	}
	if _, err := f.ResponseWriter.Write(out); err != nil {
		return 0, err
	}
	return len(b), nil
}

// Flush passes flushes on: SSE answers flush after each event.
func (f floatWriter) Flush() {
	if fl, ok := f.ResponseWriter.(http.Flusher); ok {
		fl.Flush()
	}
}

// Unwrap serves http.ResponseController.
func (f floatWriter) Unwrap() http.ResponseWriter { return f.ResponseWriter }

// integralFloats rewrites one JSON value; what it cannot decode it leaves.
func integralFloats(b []byte) []byte {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return b
	}
	floatMembers(v)
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return b
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

func floatMembers(v any) {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			if n, ok := e.(json.Number); ok && floatKeys[k] && !strings.ContainsAny(string(n), ".eE") {
				v[k] = n + ".0"
				continue
			}
			floatMembers(e)
		}
	case []any:
		for _, e := range v {
			floatMembers(e)
		}
	}
}
