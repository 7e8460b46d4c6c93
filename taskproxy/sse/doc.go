// Package sse reads and writes Server-Sent Events (text/event-stream), the
// stream format of MCP's Streamable HTTP transport.
//
// The Reader follows the WHATWG event-stream rules (CR, LF and CRLF line
// ends; comments; one leading byte order mark ignored; an empty id field
// that resets the last event id; a retry field only of ASCII digits) and
// keeps each event's raw bytes, so that a proxy can pass an event on
// unchanged or rewrite just the one it must. It bounds the size of one event.
// The Writer flushes every event and bounds each write with a deadline, so
// that a client that stops reading cannot hold its handler.
//
// The package imports nothing else of this module.
package sse
