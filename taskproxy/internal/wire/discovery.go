package wire

import (
	"bytes"
	"encoding/json"
	"net/http"
	"strconv"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/sse"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Discovery rewriting: the upstream knows nothing of tasks, so the gateway
// adds what it serves to the upstream's own discovery answers, JSON or SSE,
// and leaves every other byte as the upstream sent it.

// rewriteFunc edits the result object of the response to the request being
// passed through; it returns the result unchanged when there is nothing to do.
type rewriteFunc func(result []byte) ([]byte, error)

// PassRewriting passes the request through, rewriting the result of the
// response to it. The client's Accept-Encoding is dropped so that the
// upstream's answer arrives readable.
func (c *Exchange) PassRewriting(fn rewriteFunc) error {
	c.R.Header.Del("Accept-Encoding")
	rw := &rewriteWriter{ResponseWriter: c.W, id: c.Msg.ID, fn: fn}
	err := upstream.ServeNext(c.Next, rw, c.R)
	rw.finish()
	return err
}

// RewriteInitialize adds capabilities.tasks to a 2025-11-25 initialize
// result. Older protocol versions know no tasks and are left alone.
func (p *ToolPolicy) RewriteInitialize(result []byte) ([]byte, error) {
	p.Caps.LearnInitialize(result)
	var head struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	if err := json.Unmarshal(result, &head); err != nil || head.ProtocolVersion != string(task.Era2025) {
		return result, nil
	}
	return jsonx.SetPathLast(result, []string{"capabilities", "tasks"}, p.v2025TasksCapability())
}

// V2025TasksCapability is the 2025-11-25 tasks capability the gateway
// declares in an initialize result it makes itself (the reverse version
// bridge's).
func (p *ToolPolicy) V2025TasksCapability() []byte { return p.v2025TasksCapability() }

// v2025TasksCapability is the server capability the gateway declares.
func (p *ToolPolicy) v2025TasksCapability() []byte {
	if p.listTasks {
		return []byte(`{"list":{},"cancel":{},"requests":{"tools":{"call":{}}}}`)
	}
	return []byte(`{"cancel":{},"requests":{"tools":{"call":{}}}}`)
}

// RewriteToolsList sets execution.taskSupport on every tool from the
// configured modes (EffectiveMode: the upstream's required wins), copying
// the result once. It learns the upstream's own modes first.
func (p *ToolPolicy) RewriteToolsList(result []byte) ([]byte, error) {
	m, found, _, _, err := jsonx.FindLast(result, "tools")
	if err != nil || !found {
		return result, err
	}
	tools := result[m.ValueStart:m.ValueEnd]
	elems, err := jsonx.ArrayElements(tools)
	if err != nil {
		return nil, err
	}
	p.Caps.learnToolElems(tools, elems) // before the rewrite: EffectiveMode reads the upstream's modes
	out := make([]byte, 0, len(result)+len(elems)*40)
	out = append(out, result[:m.ValueStart]...)
	last := 0
	for _, span := range elems {
		tool := tools[span[0]:span[1]]
		name, _ := toolName(tool) // a tool without one gets the default mode
		out = append(out, tools[last:span[0]]...)
		if out, err = appendWithTaskSupport(out, tool, quotedMode(p.EffectiveMode(string(name)))); err != nil {
			return nil, err
		}
		last = span[1]
	}
	out = append(out, tools[last:]...)
	return append(out, result[m.ValueEnd:]...), nil
}

// appendWithTaskSupport appends tool to out with execution.taskSupport set
// to mode (a JSON string).
func appendWithTaskSupport(out, tool, mode []byte) ([]byte, error) {
	_, found, closing, count, err := jsonx.FindLast(tool, "execution")
	if err != nil {
		return nil, err
	}
	if found {
		edited, err := jsonx.SetPathLast(tool, []string{"execution", "taskSupport"}, mode)
		return append(out, edited...), err
	}
	// The common case: add the whole member before the closing brace.
	out = append(out, tool[:closing]...)
	if count > 0 {
		out = append(out, ',')
	}
	out = append(out, `"execution":{"taskSupport":`...)
	out = append(out, mode...)
	out = append(out, '}')
	return append(out, tool[closing:]...), nil
}

var quotedModes = map[task.Support][]byte{
	task.SupportForbidden: []byte(`"forbidden"`),
	task.SupportOptional:  []byte(`"optional"`),
	task.SupportRequired:  []byte(`"required"`),
}

func quotedMode(m task.Support) []byte { return quotedModes[m] }

// rewriteMessage applies fn to the result of data when data is the
// response with id; anything else comes back unchanged.
func rewriteMessage(data []byte, id json.RawMessage, fn rewriteFunc) []byte {
	start, end, edited, ok := rewriteSpan(data, id, fn)
	if !ok {
		return data
	}
	return jsonx.Splice(data, start, end, edited)
}

// rewriteSpan finds the result of the response with id in data and returns
// its span and fn's edit of it; ok is false when there is nothing to edit.
// It scans the message rather than decoding it: results can be large.
func rewriteSpan(data []byte, id json.RawMessage, fn rewriteFunc) (start, end int, edited []byte, ok bool) {
	var result, gotID jsonx.Member
	var hasResult, hasID, isRequest bool
	_, err := jsonx.EachMember(data, func(m jsonx.Member) bool {
		switch {
		case m.Is(data, "result"):
			result, hasResult = m, true
		case m.Is(data, "id"):
			gotID, hasID = m, true
		case m.Is(data, "method"):
			isRequest = true
		}
		return true
	})
	if err != nil || !hasResult || !hasID || isRequest || !upstream.SameID(data[gotID.ValueStart:gotID.ValueEnd], id) {
		return 0, 0, nil, false
	}
	original := data[result.ValueStart:result.ValueEnd]
	edited, err = fn(original)
	if err != nil || bytes.Equal(edited, original) {
		return 0, 0, nil, false
	}
	return result.ValueStart, result.ValueEnd, edited, true
}

// maxRewriteBuffer bounds a JSON answer held for rewriting; a larger one
// passes through unedited.
const maxRewriteBuffer = 16 << 20

// rewriteWriter edits the response to one request on its way to the client.
// A JSON answer is held until complete; an SSE answer streams, each event
// passed on as soon as it is whole, and only the event carrying the response
// is re-encoded.
type rewriteWriter struct {
	http.ResponseWriter
	id json.RawMessage
	fn rewriteFunc

	mode        int // 0 until the head is written
	buf         []byte
	wroteHeader bool
}

const (
	modePass = iota + 1
	modeJSON
	modeSSE
)

func (rw *rewriteWriter) WriteHeader(code int) {
	if rw.wroteHeader || code < 200 {
		if code < 200 {
			rw.ResponseWriter.WriteHeader(code)
		}
		return
	}
	rw.wroteHeader = true
	rw.mode = modePass
	if code == http.StatusOK && rw.Header().Get("Content-Encoding") == "" {
		switch upstream.MediaType(rw.Header().Get("Content-Type")) {
		case "application/json":
			rw.mode = modeJSON
		case "text/event-stream":
			rw.mode = modeSSE
		}
	}
	if rw.mode == modeJSON {
		return // the head goes out with the edited body, which changes its length
	}
	if rw.mode == modeSSE {
		rw.Header().Del("Content-Length")
	}
	rw.ResponseWriter.WriteHeader(code)
}

func (rw *rewriteWriter) Write(p []byte) (int, error) {
	if !rw.wroteHeader {
		rw.WriteHeader(http.StatusOK)
	}
	switch rw.mode {
	case modeJSON:
		if len(rw.buf)+len(p) > maxRewriteBuffer {
			rw.mode = modePass
			rw.ResponseWriter.WriteHeader(http.StatusOK)
			if _, err := rw.ResponseWriter.Write(rw.buf); err != nil {
				return 0, err
			}
			rw.buf = nil
			return rw.ResponseWriter.Write(p)
		}
		rw.buf = append(rw.buf, p...)
		return len(p), nil
	case modeSSE:
		rw.buf = append(rw.buf, p...)
		n := sse.CompleteLen(rw.buf)
		if n == 0 {
			return len(p), nil
		}
		if err := rw.writeEvents(rw.buf[:n]); err != nil {
			return 0, err
		}
		rw.buf = append(rw.buf[:0], rw.buf[n:]...)
		return len(p), nil
	}
	return rw.ResponseWriter.Write(p)
}

// writeEvents passes whole events on, rewriting the one with the response.
func (rw *rewriteWriter) writeEvents(chunk []byte) error {
	events := sse.NewReader(bytes.NewReader(chunk))
	var out bytes.Buffer
	for {
		ev, err := events.Next()
		if err != nil {
			break // chunk holds whole events only, so this is its end
		}
		if ev.HasData && bytes.Contains([]byte(ev.Data), []byte(`"result"`)) {
			if edited := rewriteMessage([]byte(ev.Data), rw.id, rw.fn); !bytes.Equal(edited, []byte(ev.Data)) {
				sse.AppendEvent(&out, ev.ID, ev.HasID, ev.Type, edited)
				continue
			}
		}
		out.Write(ev.Raw)
	}
	_, err := rw.ResponseWriter.Write(out.Bytes())
	return err
}

// Flush passes whole events on; a partial event waits for its end.
func (rw *rewriteWriter) Flush() {
	if rw.mode == modeJSON {
		return
	}
	_ = http.NewResponseController(rw.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (rw *rewriteWriter) Unwrap() http.ResponseWriter { return rw.ResponseWriter }

// finish writes what is held back once the next handler has returned.
func (rw *rewriteWriter) finish() {
	switch rw.mode {
	case modeJSON:
		start, end, edited, ok := rewriteSpan(rw.buf, rw.id, rw.fn)
		if !ok {
			start, end, edited = len(rw.buf), len(rw.buf), nil
		}
		rw.Header().Set("Content-Length", strconv.Itoa(len(rw.buf)-(end-start)+len(edited)))
		rw.ResponseWriter.WriteHeader(http.StatusOK)
		for _, part := range [][]byte{rw.buf[:start], edited, rw.buf[end:]} {
			if len(part) > 0 {
				_, _ = rw.ResponseWriter.Write(part)
			}
		}
	case modeSSE:
		if len(rw.buf) > 0 {
			_, _ = rw.ResponseWriter.Write(rw.buf)
		}
	}
	rw.buf = nil
}
