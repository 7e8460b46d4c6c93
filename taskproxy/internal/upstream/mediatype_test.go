package upstream

import (
	"mime"
	"strings"
	"testing"
)

// MediaType reads a Content-Type as mime.ParseMediaType does, falling back
// to the part before any parameters, lower-cased, for a value it refuses.
func TestMediaType(t *testing.T) {
	t.Parallel()
	for _, ct := range []string{
		"application/json", "text/event-stream", "Application/JSON", "application/json; charset=utf-8",
		"application/json;charset=UTF-8", " application/json ", "text/event-stream;x=1", "", "application/json; bad",
		"text/html", "application/json\x00",
	} {
		want, _, err := mime.ParseMediaType(ct)
		if err != nil {
			want = strings.ToLower(strings.TrimSpace(strings.Split(ct, ";")[0]))
		}
		if got := MediaType(ct); got != want {
			t.Errorf("MediaType(%q) = %q, want %q", ct, got, want)
		}
	}
}

// The media types MCP sends, written plainly, are read without allocating:
// every request and answer has one.
//
//nolint:paralleltest // testing.AllocsPerRun refuses to run in a parallel test
func TestMediaTypeAllocs(t *testing.T) {
	for _, ct := range []string{"application/json", "text/event-stream"} {
		if n := testing.AllocsPerRun(50, func() { _ = MediaType(ct) }); n != 0 {
			t.Errorf("MediaType(%q): %.0f allocations, want none", ct, n)
		}
	}
}
