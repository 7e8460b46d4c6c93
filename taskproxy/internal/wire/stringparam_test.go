package wire

import (
	"encoding/json"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
)

// stringParam answers exactly as decoding params does, with or without its
// fast path.
func TestStringParamFastPath(t *testing.T) {
	t.Parallel()
	for _, params := range []string{
		``, `null`, `{}`, `[]`, `"x"`, `{"taskId":"abc"}`, `{ "taskId" : "abc" , "x":1 }`,
		`{"taskId":""}`, `{"taskId":1}`, `{"taskId":null}`, `{"taskId":"a\"b"}`, `{"taskId":"\u0061"}`,
		`{"taskId":"a","taskId":"b"}`, `{"task\u0049d":"b","taskId":"a"}`, `{"taskId":"a","task\u0049d":"b"}`,
		`{"taskid":"a"}`, `{"TaskId":"a"}`, `{"taskId":"a","x":tru}`, `{"taskId":"a",}`, `{"taskId":"a"`,
		"{\"taskId\":\"a\xffb\"}", `{"taskId":"é"}`, `{"x":{"taskId":"inner"},"taskId":"outer"}`, `{"x":{"taskId":"inner"}}`,
	} {
		old := func() (string, error) { // stringParam before the fast path
			obj, err := ParamsObject(json.RawMessage(params))
			if err != nil {
				return "", err
			}
			raw, ok := obj["taskId"]
			if !ok {
				return "", jsonx.ErrMalformed
			}
			var s string
			if err := json.Unmarshal(raw, &s); err != nil || s == "" {
				return "", jsonx.ErrMalformed
			}
			return s, nil
		}
		want, wantErr := old()
		got, err := StringParam(json.RawMessage(params), "taskId")
		if got != want || (err == nil) != (wantErr == nil) {
			t.Errorf("%s: got %q, %v; want %q, %v", params, got, err, want, wantErr)
		}
	}
}

// Only the very params the envelope parser read count as validated: an
// equal copy, a part of them or other params are validated again.
func TestValidParams(t *testing.T) {
	t.Parallel()
	parsed := []byte(`{"taskId":"abc"}`)
	x := &Exchange{ParsedParams: parsed}
	for _, tc := range []struct {
		name   string
		params []byte
		want   bool
	}{
		{"the parsed params", parsed, true},
		{"an equal copy", []byte(string(parsed)), false},
		{"a prefix", parsed[:len(parsed)-1], false},
		{"a suffix", parsed[1:], false},
		{"none", nil, false},
	} {
		if got := x.validParams(tc.params); got != tc.want {
			t.Errorf("%s: validParams = %v, want %v", tc.name, got, tc.want)
		}
	}
	if (&Exchange{}).validParams(parsed) {
		t.Error("an exchange without parsed params takes params as validated")
	}
}
