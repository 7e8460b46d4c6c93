package jsonrpc

import (
	"testing"
)

// A parsed message's raw parts are slices of the body, which the gateway
// hands on as it came (the request body reverse_proxy may send again) or
// which is the memory of an event's data string (read in place, where a
// write is undefined behaviour). Appending to a part must then make a new
// slice, never write past the part into the bytes after it.
func TestParsedPartsAppendOutsideTheBody(t *testing.T) {
	t.Parallel()
	for _, body := range []string{
		`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"x"},"x":0}`,
		`{"jsonrpc":"2.0","id":"a","result":{"content":[]},"x":0}`,
	} {
		data := []byte(body)
		m, err := Parse(data)
		if err != nil {
			t.Fatal(err)
		}
		for name, part := range map[string][]byte{"id": m.ID, "params": m.Params, "result": m.Result} {
			if part == nil {
				continue
			}
			_ = append(part, "!!!!"...)
			if string(data) != body {
				t.Fatalf("appending to the %s of %s wrote into the body: %s", name, body, data)
			}
		}
	}
}
