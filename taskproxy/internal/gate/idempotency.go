package gate

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// Idempotent task creation. A task-creating tools/call may carry an
// idempotency key, in the Idempotency-Key HTTP header or, as this gateway's
// own convention (not part of the MCP specification), in
// params._meta["io.modelcontextprotocol/idempotency-key"]. Within one
// principal, a second create with the key of a live task returns that task
// instead of starting another call; the same key with other arguments is
// refused.

const (
	HeaderIdempotencyKey = "Idempotency-Key"
	MetaIdempotencyKey   = "io.modelcontextprotocol/idempotency-key"
)

// IdempotencyOf returns the hashed idempotency key of a request ("" when it
// has none) and the fingerprint of its tool and arguments.
func IdempotencyOf(r *http.Request, params json.RawMessage) (key, fingerprint string) {
	raw := r.Header.Get(HeaderIdempotencyKey)
	if raw == "" {
		if meta, ok := jsonx.Get(params, "_meta"); ok {
			if v, ok := jsonx.Get(meta, MetaIdempotencyKey); ok {
				_ = json.Unmarshal(v, &raw)
			}
		}
	}
	if raw == "" {
		return "", ""
	}
	var call struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	}
	_ = json.Unmarshal(params, &call)
	return HashHex(raw), HashHex(call.Name + "\x00" + CanonicalJSON(call.Arguments))
}

// HasIdempotencyKey reports whether a request carries an idempotency key,
// without the cost of fingerprinting it.
func HasIdempotencyKey(r *http.Request, params json.RawMessage) bool {
	if r.Header.Get(HeaderIdempotencyKey) != "" {
		return true
	}
	meta, ok := jsonx.Get(params, "_meta")
	if !ok {
		return false
	}
	v, ok := jsonx.Get(meta, MetaIdempotencyKey)
	return ok && string(v) != `""` && string(v) != "null"
}

// CanonicalJSON re-encodes a value with sorted keys and no spacing, so that
// equal arguments fingerprint equally however they were written. Numbers
// keep their literal digits: decoded as float64, 9007199254740993 and
// 9007199254740992 would fingerprint the same.
func CanonicalJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return string(raw)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil || dec.Decode(new(any)) != io.EOF {
		return string(raw)
	}
	out, err := json.Marshal(v)
	if err != nil {
		return string(raw)
	}
	return string(out)
}

func HashHex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

// IdempotencyMismatch is the JSON-RPC answer to a reused key.
func IdempotencyMismatch() *jsonrpc.Error {
	return jsonrpc.Errorf(jsonrpc.CodeInvalidParams, "idempotency key reused with different arguments")
}
