package gate

import (
	"net/http"
	"testing"
)

// A body the upstream could decode into other text than the gateway's UTF-8
// reading is refused; what MCP clients send passes.
func TestCheckBodyEncoding(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		header http.Header
		ok     bool
	}{
		{"no type", http.Header{}, true},
		{"plain json", http.Header{"Content-Type": {"application/json"}}, true},
		{"utf-8", http.Header{"Content-Type": {"application/json; charset=utf-8"}}, true},
		{"UTF-8 quoted", http.Header{"Content-Type": {`application/json;charset="UTF-8"`}}, true},
		{"utf8", http.Header{"Content-Type": {"application/json; charset=utf8"}}, true},
		{"sloppy parameters without a charset", http.Header{"Content-Type": {"application/json;"}}, true},
		{"identity", http.Header{"Content-Type": {"application/json"}, "Content-Encoding": {"identity"}}, true},
		{"utf-7", http.Header{"Content-Type": {"application/json; charset=utf-7"}}, false},
		{"UTF-7 upper case name", http.Header{"Content-Type": {"application/json; CHARSET=UTF-7"}}, false},
		{"latin1", http.Header{"Content-Type": {"application/json; charset=iso-8859-1"}}, false},
		{"charset twice", http.Header{"Content-Type": {"application/json; charset=utf-8; charset=utf-7"}}, false},
		{"second type header", http.Header{"Content-Type": {"application/json", "application/json; charset=utf-7"}}, false},
		{"gzip", http.Header{"Content-Type": {"application/json"}, "Content-Encoding": {"gzip"}}, false},
		{"br", http.Header{"Content-Type": {"application/json"}, "Content-Encoding": {"br"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := CheckBodyEncoding(&http.Request{Header: tc.header})
			if ok := err == nil; ok != tc.ok {
				t.Errorf("CheckBodyEncoding(%v) = %v; want ok %v", tc.header, err, tc.ok)
			}
		})
	}
}
