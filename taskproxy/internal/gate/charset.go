package gate

import (
	"mime"
	"net/http"
	"strings"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

// The gateway reads a body's bytes as UTF-8 JSON. An upstream may not: the
// TypeScript SDK's createMcpExpressApp parses with express.json(), which
// decodes the body in the charset the Content-Type names (UTF-7 too, where
// "+AG4-ame" is "name") and inflates a Content-Encoding. A body the upstream
// would decode into other text than the gateway read is refused like any
// other body the gateway cannot read as the upstream will.

// ErrForeignEncoding is a POST declared in a charset other than UTF-8, or
// with a Content-Encoding.
var ErrForeignEncoding = &jsonrpc.ReadError{Code: jsonrpc.CodeInvalidRequest,
	Reason: "the body must be UTF-8 JSON: no charset but utf-8, no Content-Encoding"}

// CheckBodyEncoding refuses, with ErrForeignEncoding, a request whose
// Content-Type names a charset other than UTF-8 (or names one in a way Go
// cannot parse, such as twice: another parser may take the other one), or
// whose body has a Content-Encoding other than identity.
func CheckBodyEncoding(r *http.Request) error {
	for _, ce := range r.Header["Content-Encoding"] {
		if !strings.EqualFold(strings.TrimSpace(ce), "identity") {
			return ErrForeignEncoding
		}
	}
	for _, ct := range r.Header["Content-Type"] {
		if !strings.Contains(strings.ToLower(ct), "charset") {
			continue
		}
		_, params, err := mime.ParseMediaType(ct)
		if err != nil {
			return ErrForeignEncoding
		}
		if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") && !strings.EqualFold(cs, "utf8") {
			return ErrForeignEncoding
		}
	}
	return nil
}
