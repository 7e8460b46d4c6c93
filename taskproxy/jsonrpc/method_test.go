package jsonrpc

import (
	"encoding/json"
	"testing"
)

// Parse reads the method as encoding/json decodes it, the common names
// included, however they are escaped.
func TestParseMethod(t *testing.T) {
	t.Parallel()
	for _, raw := range []string{
		`"tools/call"`, `"tasks/get"`, `"tasks/result"`, `"initialize"`, `"notifications/initialized"`, `"ping"`,
		`"subscriptions/listen"`, `"tasks\/get"`, `"t\u0061sks/get"`, `"tasks/get "`, `"Tasks/get"`, `""`, `"x/y"`, `"caf\u00e9"`,
	} {
		msg, err := Parse([]byte(`{"jsonrpc":"2.0","id":1,"method":` + raw + `}`))
		if err != nil {
			t.Fatalf("%s: %v", raw, err)
		}
		var want string
		if err := json.Unmarshal([]byte(raw), &want); err != nil {
			t.Fatal(err)
		}
		if msg.Method != want {
			t.Errorf("method %s read as %q, want %q", raw, msg.Method, want)
		}
	}
}

// Parsing a request of a common method allocates the message only: the
// method's name is not copied out of the body.
//
//nolint:paralleltest // testing.AllocsPerRun refuses to run in a parallel test
func TestParseAllocs(t *testing.T) {
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"9sle5G8nJypWiKEpw-_TZA"}}`)
	if n := testing.AllocsPerRun(50, func() {
		if _, err := Parse(body); err != nil {
			t.Fatal(err)
		}
	}); n > 1 {
		t.Errorf("%.0f allocations, want 1", n)
	}
}
