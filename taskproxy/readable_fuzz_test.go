package taskproxy

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/gate"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
)

// callParams are the params members the gateway reads, as Go's encoding/json
// reads them.
type callParams struct {
	Name   *string         `json:"name"`
	TaskID *string         `json:"taskId"`
	Task   json.RawMessage `json:"task"`
	Meta   json.RawMessage `json:"_meta"`
}

// FuzzCheckReadMembers checks that params gate.CheckReadMembers accepts read the
// same to the gateway's scanner (the first member of a name) as to
// encoding/json (any member that folds to it, the last one winning).
func FuzzCheckReadMembers(f *testing.F) {
	for _, s := range []string{
		`{"name":"x","arguments":{},"task":{"ttl":1}}`,
		`{"name":"safe","NAME":"dangerous"}`,
		`{"taskId":"a","tas\u212aId":"b"}`,
		`{"name":"x","name":"y"}`,
		`{"_meta":{"progressToken":1},"_meta":{}}`,
		`{"n\u0061me":"x"}`,
		`{"task":{"ttl":1,"TTL":2}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, params []byte) {
		if !json.Valid(params) || gate.CheckReadMembers(params, paramsRead) != nil {
			return
		}
		var p callParams
		if json.Unmarshal(params, &p) != nil {
			return // not an object, or a member of another type: both refuse it
		}
		for _, c := range []struct {
			name    string
			decoded []byte
		}{
			{"name", marshalOrNil(p.Name)},
			{"taskId", marshalOrNil(p.TaskID)},
			{"task", p.Task},
			{"_meta", p.Meta},
		} {
			scanned, _ := jsonx.Get(params, c.name)
			if !sameJSON(scanned, c.decoded) {
				t.Fatalf("params %q: the gateway reads %s = %s, encoding/json %s", params, c.name, scanned, c.decoded)
			}
		}
	})
}

func marshalOrNil(s *string) []byte {
	if s == nil {
		return nil
	}
	b, _ := json.Marshal(*s)
	return b
}

// sameJSON reports whether a and b are both absent or decode to equal values.
func sameJSON(a, b []byte) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b) || string(a) == "null" || string(b) == "null"
	}
	var va, vb any
	if json.Unmarshal(a, &va) != nil || json.Unmarshal(b, &vb) != nil {
		return false
	}
	ea, _ := json.Marshal(va)
	eb, _ := json.Marshal(vb)
	return bytes.Equal(ea, eb)
}
