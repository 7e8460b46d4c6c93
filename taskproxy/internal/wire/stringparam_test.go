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
