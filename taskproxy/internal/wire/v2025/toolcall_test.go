package v2025

import (
	"encoding/json"
	"testing"
)

// A tools/call's name and params.task are read in place exactly as
// encoding/json reads them from params decoded into an object: the last
// member of a name, escaped keys unescaped, a name that is not a string
// empty, absent or null params naming nothing, params of another type
// refused.
func TestToolCallRead(t *testing.T) {
	t.Parallel()
	tests := []string{
		``,
		`null`,
		`{}`,
		` {"name":"fast","arguments":{"name":"inner","task":{}},"task":{"ttl":60000}} `,
		`{"name":"fast"}`,
		`{"name":"a","name":"b","task":null,"task":{"ttl":1}}`,
		`{"\u006eame":"escaped","t\u0061sk":{}}`,
		`{"name":5,"task":[]}`,
		`{"name":null}`,
		`{"name":"caf\u00e9 \"q\""}`,
		`{"Name":"folded","TASK":{}}`,
		`[]`,
		`"name"`,
		`5`,
	}
	for _, params := range tests {
		t.Run(params, func(t *testing.T) {
			t.Parallel()
			var got ToolCall
			err := got.read(json.RawMessage(params))
			var obj map[string]json.RawMessage
			wantErr := len(params) > 0 && params != "null" && json.Unmarshal([]byte(params), &obj) != nil
			if (err != nil) != wantErr {
				t.Fatalf("error %v, want one: %v", err, wantErr)
			}
			if wantErr {
				return
			}
			var want ToolCall
			_ = json.Unmarshal(obj["name"], &want.Name)
			want.TaskMeta, want.Augmented = obj["task"]
			if got.Name != want.Name || string(got.TaskMeta) != string(want.TaskMeta) || got.Augmented != want.Augmented {
				t.Errorf("read %+v, encoding/json reads %+v", got, want)
			}
		})
	}
}

// Reading a tools/call's name and params.task allocates the name's string
// only: the arguments are not decoded, nor is a map of the members built.
//
//nolint:paralleltest // testing.AllocsPerRun refuses to run in a parallel test
func TestToolCallReadAllocs(t *testing.T) {
	params := json.RawMessage(`{"name":"slow_compute","arguments":{"seconds":1,"label":"x"},"_meta":{"progressToken":"p"},"task":{"ttl":60000}}`)
	var tc ToolCall
	if n := testing.AllocsPerRun(100, func() { tc = ToolCall{}; _ = tc.read(params) }); n > 1 || tc.Name != "slow_compute" {
		t.Errorf("%v allocations reading %s (name %q), want at most 1", n, params, tc.Name)
	}
}
