package sse_test

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/sse"
)

// A stream starts with its headers, and each event is written and flushed
// in turn.
func ExampleWriter() {
	rec := httptest.NewRecorder()
	w := sse.Start(rec, time.Second)
	if err := w.WriteEvent("1", []byte(`{"jsonrpc":"2.0","method":"notifications/progress"}`)); err != nil {
		fmt.Println(err)
		return
	}
	if err := w.WriteComment("keep-alive"); err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(rec.Header().Get("Content-Type"))
	fmt.Print(rec.Body.String())
	// Output:
	// text/event-stream
	// id: 1
	// data: {"jsonrpc":"2.0","method":"notifications/progress"}
	//
	// : keep-alive
}

// A reader gives the events of a body one by one, each with the raw bytes
// it came in; a block of comments only comes as an event without data, so
// that a pass-through can send it on.
func ExampleReader() {
	r := sse.NewReader(strings.NewReader("id: 1\ndata: one\n\n: a comment\n\nevent: note\ndata: two\ndata: lines\n\n"))
	for {
		ev, err := r.Next()
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Printf("id=%q type=%q data=%q hasData=%v raw=%q\n", ev.ID, ev.Type, ev.Data, ev.HasData, ev.Raw)
	}
	// Output:
	// id="1" type="" data="one" hasData=true raw="id: 1\ndata: one\n\n"
	// id="" type="" data="" hasData=false raw=": a comment\n\n"
	// id="" type="note" data="two\nlines" hasData=true raw="event: note\ndata: two\ndata: lines\n\n"
	// EOF
}
