package taskproxy

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// BenchmarkTaskLifecycle is one 2025-11-25 task's whole life through the
// gateway, as the end-to-end lifecycle row measures it in Caddy: the
// create (tools/call with params.task), the background call to the next
// handler (a fast in-process upstream standing in for reverse_proxy), the
// completion written to a Badger store on disk, and one tasks/get of the
// finished task. The logs go, as Caddy's do by default, to a JSON encoder
// at info level (into io.Discard here). Read allocs/op and B/op: they are
// deterministic, the time per op is not on a shared machine.
func BenchmarkTaskLifecycle(b *testing.B) {
	s := benchStore(b, b.TempDir(), false)
	rt := NewRuntime(s)
	b.Cleanup(func() { _ = rt.Close(0) })
	log := zap.New(zapcore.NewCore(zapcore.NewJSONEncoder(zap.NewProductionEncoderConfig()), zapcore.AddSync(io.Discard), zapcore.InfoLevel))
	ended := make(chan task.Status, 1)
	g, err := New(Config{DefaultTTL: time.Minute, MaxTTL: time.Hour, MaxBody: 1 << 20,
		Logger: log, AuditLogger: log.Named("audit"), Observer: endObserver(ended)}, rt)
	if err != nil {
		b.Fatal(err)
	}
	next := fastUpstream()
	create := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fast","arguments":{"a":"benchmark"},"task":{"ttl":600000}}}`)
	get := []byte(`{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":"` + strings.Repeat("x", 64) + `"}}`)
	idAt := bytes.IndexByte(get, 'x')
	w := httptest.NewRecorder()
	serve := func(body []byte) []byte {
		w.Body.Reset()
		if err := g.ServeHTTP(w, benchRequest(body), next); err != nil {
			b.Fatal(err)
		}
		return w.Body.Bytes()
	}
	lifecycle := func() {
		created := serve(create)
		id, ok := createdTaskID(created)
		if !ok {
			b.Fatalf("not a CreateTaskResult: %s", created)
		}
		if st := <-ended; st != task.StatusCompleted {
			b.Fatalf("task %s ended %s", id, st)
		}
		body := append(append(append(get[:0:0], get[:idAt]...), id...), `"}}`...)
		if got := serve(body); !bytes.Contains(got, []byte(`"completed"`)) {
			b.Fatalf("tasks/get of a finished task: %s", got)
		}
	}
	lifecycle() // the first create fetches the upstream's tools/list
	b.ReportAllocs()
	for b.Loop() {
		lifecycle()
	}
}

// benchRequest is a 2025-11-25 POST of body as the server hands it to a
// handler, made without httptest.NewRequest's parsing of a request's
// text, whose buffers would count in the figures.
func benchRequest(body []byte) *http.Request {
	return &http.Request{
		Method: http.MethodPost, URL: benchURL, Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": benchJSON, "Mcp-Protocol-Version": benchVersion},
		Body:   io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)),
		Host: "example.com", RemoteAddr: "192.0.2.1:1234", RequestURI: "/mcp",
	}
}

// loopbackRequest is benchRequest as it arrives on a loopback listener,
// as the end-to-end benchmarks send it: the DNS rebinding guard looks at
// its Host.
func loopbackRequest(body []byte) *http.Request {
	r := benchRequest(body)
	r.Host = "127.0.0.1:8080"
	return r.WithContext(context.WithValue(r.Context(), http.LocalAddrContextKey, benchListener))
}

var (
	benchListener = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 8080}
	benchURL      = &url.URL{Path: "/mcp"}
	benchJSON     = []string{"application/json"}
	benchVersion  = []string{"2025-11-25"}
)

// createdTaskID finds the task id of a CreateTaskResult without decoding
// the whole answer.
func createdTaskID(answer []byte) (string, bool) {
	_, rest, found := bytes.Cut(answer, []byte(`"taskId":"`))
	id, _, closed := bytes.Cut(rest, []byte(`"`))
	if !found || !closed || len(id) == 0 {
		return "", false
	}
	return string(id), true
}

// endObserver reports each task's terminal status on ended.
type endObserver chan<- task.Status

func (endObserver) TaskCreated(task.Era)                                    {}
func (o endObserver) TaskEnded(_ task.Era, st task.Status, _ time.Duration) { o <- st }
func (endObserver) Refused(string)                                          {}

// fastUpstream answers tools/list with one tool, which declares no task
// support (the end-to-end bench's upstream's "fast": the gateway runs its
// task-augmented calls as plain calls), and every tools/call at once with
// a short text result, echoing the request's id.
func fastUpstream() http.Handler {
	result := json.RawMessage(`{"content":[{"type":"text","text":"done"}]}`)
	tools := json.RawMessage(`{"tools":[{"name":"fast","inputSchema":{"type":"object"}}]}`)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		msg, perr := jsonrpc.Parse(body)
		if err != nil || perr != nil {
			http.Error(w, "unreadable", http.StatusBadRequest)
			return
		}
		answer := result
		if msg.Method == "tools/list" {
			answer = tools
		}
		data, _ := jsonrpc.ResponseBytes(msg.ID, answer)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(data)
	})
}
