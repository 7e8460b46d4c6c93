// Package jsonrpc holds the JSON-RPC 2.0 messages MCP is made of: the
// envelope, errors and the codes both protocol versions answer with, the
// encoders, the reader of untrusted request bodies, and the formats of the
// ids the gateway makes up for its own requests (they are sent upstream and
// stored in task records, so they never change).
//
// Parse is fail-closed: it accepts a body only when it reads it exactly as
// Go's encoding/json (and the other readers MCP SDKs use) would, and says
// with a *ReadError which JSON-RPC error answers anything else.
//
// The package imports nothing of the module but the JSON scanner.
package jsonrpc
