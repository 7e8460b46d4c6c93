package follow

import "unicode/utf8"

// MaxUpstreamStatusMessage bounds the status message taken from an
// upstream's task, in bytes.
const MaxUpstreamStatusMessage = 1024

// UpstreamStatusMessage is the part of an upstream task's status message
// the gateway keeps: at most MaxUpstreamStatusMessage bytes, cut on a rune
// boundary and marked.
func UpstreamStatusMessage(s string) string { return TruncateText(s, MaxUpstreamStatusMessage) }

// TruncateText cuts s to at most n bytes on a rune boundary, marking the cut.
func TruncateText(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}
