package jsonrpc_test

import (
	"errors"
	"fmt"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// A request is parsed with its id and params kept as raw bytes, and
// answered with an error response for the same id.
func ExampleParse() {
	m, err := jsonrpc.Parse([]byte(`{"jsonrpc":"2.0","id":7,"method":"tasks/get","params":{"taskId":"t1"}}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(m.IsRequest(), m.Method, string(m.ID), string(m.Params))
	fmt.Println(string(jsonrpc.ErrorBytes(m.ID, jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "no task %s", "t1"))))
	// Output:
	// true tasks/get 7 {"taskId":"t1"}
	// {"jsonrpc":"2.0","id":7,"error":{"code":-32602,"message":"no task t1"}}
}

// What is not JSON-RPC 2.0 is refused with an error that says so.
func ExampleParse_invalid() {
	_, err := jsonrpc.Parse([]byte(`{"id":1,"method":"ping"}`))
	fmt.Println(errors.Is(err, jsonrpc.ErrNotJSONRPC))
	fmt.Println(err)
	// Output:
	// true
	// not a JSON-RPC 2.0 message: "jsonrpc" must be "2.0"
}

func ExampleResponseBytes() {
	b, err := jsonrpc.ResponseBytes([]byte(`"a"`), map[string]string{"status": "working"})
	fmt.Println(string(b), err)
	// Output: {"jsonrpc":"2.0","id":"a","result":{"status":"working"}} <nil>
}
