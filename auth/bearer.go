package auth

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
)

// BearerToken extracts the bearer token of r. It reads only the
// Authorization header: it never parses forms, the query or the body, so
// the body stays unread for the handler (RFC 6750 form and query
// parameters are deliberately unsupported).
//
// The scheme is matched case-insensitively and may be followed by one or
// more spaces. Results:
//
//   - no Authorization header: "", false, nil;
//   - a header with another scheme (e.g. Basic): "", false, and an error
//     wrapping [ErrMissingToken] (RFC 6750 treats it as absent credentials);
//   - several Authorization headers, an empty token, or a token that is not
//     RFC 6750 b64token syntax: "", true, and an error wrapping
//     [ErrInvalidToken];
//   - otherwise the token, true, nil.
//
// Errors never contain the header value.
func BearerToken(r *http.Request) (token string, present bool, err error) {
	values := r.Header.Values("Authorization")
	switch len(values) {
	case 0:
		return "", false, nil
	case 1:
	default:
		return "", true, invalid("several Authorization headers", nil)
	}
	h := strings.Trim(values[0], " \t")
	scheme, rest, _ := strings.Cut(h, " ")
	if !strings.EqualFold(scheme, "Bearer") {
		return "", false, errSchemeNotBearer
	}
	token = strings.TrimLeft(rest, " ")
	if token == "" {
		return "", true, invalid("empty bearer token", nil)
	}
	if !isB64Token(token) {
		return "", true, invalid("malformed bearer token", nil)
	}
	return token, true, nil
}

// errSchemeNotBearer reports an Authorization header of another scheme.
var errSchemeNotBearer = fmt.Errorf("%w: authorization scheme is not Bearer", ErrMissingToken)

// isB64Token reports whether s matches RFC 6750's
// b64token = 1*( ALPHA / DIGIT / "-" / "." / "_" / "~" / "+" / "/" ) *"=".
func isB64Token(s string) bool {
	body := strings.TrimRight(s, "=")
	if body == "" {
		return false
	}
	for i := 0; i < len(body); i++ {
		c := body[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '-', c == '.', c == '_', c == '~', c == '+', c == '/':
		default:
			return false
		}
	}
	return true
}

// Challenge returns the WWW-Authenticate value answering err (RFC 6750
// section 3):
//
//   - err nil or wrapping [ErrMissingToken]: Bearer realm="…";
//   - any other err: Bearer realm="…", error="invalid_token",
//     error_description="…".
//
// resource_metadata="…" (RFC 9728, used by MCP clients to discover the
// authorization server) is appended when resourceMetadataURL is non-empty,
// and realm is omitted when empty. The description is the reason recorded
// by this package (a generic text for foreign errors); it never contains
// the token. Quoted values are escaped, and control characters dropped, so
// the result is always a single well-formed header value.
func Challenge(err error, realm, resourceMetadataURL string) string {
	var params []string
	if realm != "" {
		params = append(params, "realm="+quoteString(realm))
	}
	if err != nil && !errors.Is(err, ErrMissingToken) {
		params = append(params,
			`error="invalid_token"`,
			`error_description="`+descriptionChars(describe(err))+`"`)
	}
	if resourceMetadataURL != "" {
		params = append(params, "resource_metadata="+quoteString(resourceMetadataURL))
	}
	if len(params) == 0 {
		return "Bearer"
	}
	return "Bearer " + strings.Join(params, ", ")
}

// describe returns the human-readable reason of err.
func describe(err error) string {
	if te, ok := errors.AsType[*tokenError](err); ok {
		return te.reason
	}
	return "the access token is invalid"
}

// quoteString renders s as an RFC 9110 quoted-string: '"' and '\' are
// backslash-escaped and control characters (which could split the header)
// are dropped.
func quoteString(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"' || c == '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case c == '\t' || (c >= 0x20 && c != 0x7f):
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}

// descriptionChars keeps s within RFC 6750's error_description charset
// (%x20-21 / %x23-5B / %x5D-7E): double quotes become single quotes,
// backslashes become slashes, and other characters outside the set are
// dropped.
func descriptionChars(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"':
			b.WriteByte('\'')
		case c == '\\':
			b.WriteByte('/')
		case c >= 0x20 && c <= 0x7e:
			b.WriteByte(c)
		}
	}
	return b.String()
}
