package jsonrpc

import "testing"

// BenchmarkParse reads the envelopes of the requests a client repeats
// most: a poll and a call.
func BenchmarkParse(b *testing.B) {
	for _, tc := range []struct{ name, body string }{
		{"tasks_get", `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"9sle5G8nJypWiKEpw-_TZA"}}`},
		{"tools_call", `{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"slow_compute","arguments":{"seconds":1,"label":"x","items":[1,2,3,{"k":"v"}]},"_meta":{"progressToken":"p"},"task":{"ttl":60000}}}`},
		{"result", `{"jsonrpc":"2.0","id":7,"result":{"content":[{"type":"text","text":"` + longText + `"}],"structuredContent":{"n":[1,2,3,4,5,6,7,8,9]},"isError":false}}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			body := []byte(tc.body)
			var m Message
			b.ReportAllocs()
			b.SetBytes(int64(len(body)))
			for b.Loop() {
				if err := ParseInto(&m, body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// longText is a tool's text result of a few hundred bytes.
const longText = "Lorem ipsum dolor sit amet, consectetur adipiscing elit, sed do eiusmod tempor incididunt ut labore et dolore magna aliqua. " +
	"Ut enim ad minim veniam, quis nostrud exercitation ullamco laboris nisi ut aliquip ex ea commodo consequat. " +
	"Duis aute irure dolor in reprehenderit in voluptate velit esse cillum dolore eu fugiat nulla pariatur."
