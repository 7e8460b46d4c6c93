package wire

import (
	"bytes"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/sse"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// The reference for the discovery rewrites is encoding/json decoding into
// map[string]any: exact keys, the last of duplicates winning, which is also
// what JavaScript's JSON.parse reads. Go clients decoding into structs match
// keys under case folding instead; for a key that folds to one the gateway
// reads ("NAME", "Execution") the two families of clients disagree with
// each other, so no answer is right and such inputs are skipped.

// discoveryNames are the keys the discovery rewrites read or write.
var discoveryNames = []string{"protocolVersion", "capabilities", "tasks", "requests", "tools", "call", "name", "execution", "taskSupport"}

// foldedName reports whether any object in v has a key that folds to one of
// discoveryNames without being it.
func foldedName(v any) bool {
	switch v := v.(type) {
	case map[string]any:
		for k, e := range v {
			for _, n := range discoveryNames {
				if k != n && strings.EqualFold(k, n) {
					return true
				}
			}
			if foldedName(e) {
				return true
			}
		}
	case []any:
		if slices.ContainsFunc(v, foldedName) {
			return true
		}
	}
	return false
}

// decodeJSON decodes b as encoding/json does, numbers kept as written.
func decodeJSON(b []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, err
	}
	return v, nil
}

// refTasksCall is what learnInitialize must learn from result: nil when
// encoding/json cannot read result into its struct (a member on the path of
// another type), else whether capabilities.tasks.requests.tools.call is an
// object.
func refTasksCall(result any) *bool {
	v := result
	for _, k := range []string{"capabilities", "tasks", "requests", "tools"} {
		switch o := v.(type) {
		case nil:
			f := false
			return &f
		case map[string]any:
			v = o[k]
		default:
			return nil
		}
	}
	call := false
	switch o := v.(type) {
	case nil:
	case map[string]any:
		_, isObject := o["call"].(map[string]any)
		call = isObject
	default:
		return nil
	}
	return &call
}

// refDeclared is the task mode a decoded tool declares, as the gateway must
// learn it: execution.taskSupport when valid, else forbidden.
func refDeclared(tool map[string]any) task.Support {
	exec, _ := tool["execution"].(map[string]any)
	s, _ := exec["taskSupport"].(string)
	if m, err := task.ParseSupport(s); err == nil {
		return m
	}
	return task.SupportForbidden
}

// discoverySeeds are the initialize and tools/list results of the real
// upstreams the end-to-end tests use (the go-sdk fixture and
// @modelcontextprotocol/server-everything), as they sent them.
func discoverySeeds(f *testing.F) (inits, lists [][]byte) {
	f.Helper()
	for _, name := range []string{"gosdk", "everything"} {
		for _, kind := range []string{"initialize", "tools-list"} {
			b, err := os.ReadFile(filepath.Join("testdata", "upstream-answers", name+"-"+kind+".json"))
			if err != nil {
				f.Fatal(err)
			}
			b = bytes.TrimSpace(b)
			if kind == "initialize" {
				inits = append(inits, b)
			} else {
				lists = append(lists, b)
			}
		}
	}
	return inits, lists
}

// FuzzDiscoveryRewrite checks the initialize and tools/list rewrites
// against encoding/json: the output is valid JSON, decodes to the input
// with only capabilities.tasks (2025-11-25 initialize) or each tool's
// execution.taskSupport (tools/list) changed, and the task modes the
// gateway learns from the answers are those encoding/json reads.
func FuzzDiscoveryRewrite(f *testing.F) {
	inits, lists := discoverySeeds(f)
	for i := range inits {
		for j := range lists {
			f.Add(inits[i], lists[j], byte(i+3*j))
		}
	}
	f.Add([]byte(`{"protocolVersion":"2025-06-18","capabilities":{"tasks":5}}`), []byte(`{"tools":[{"name":"x","execution":null},{"name":1}]}`), byte(0))
	f.Add([]byte(`{"protocolVers\u0069on":"2025-11-25"}`), []byte(`{"tools":[{"n\u0061me":"slow_compute","execution":{"taskSupport":"optional","x":[1.50]}}],"nextCursor":"c"}`), byte(42))
	// No initialize seen (another process or replica saw it): a tool
	// declaring required is taken at its word.
	f.Add([]byte(`not an initialize answer`), []byte(`{"tools":[{"name":"deep","execution":{"taskSupport":"required"}}]}`), byte(0))
	modes := []task.Support{task.SupportForbidden, task.SupportOptional, task.SupportRequired}
	f.Fuzz(func(t *testing.T, initResult, toolsResult []byte, cfg byte) {
		conf := struct {
			DefaultTaskSupport task.Support
			ListTasks          bool
			Tools              map[string]task.Support
		}{
			DefaultTaskSupport: modes[cfg%3],
			ListTasks:          cfg&4 != 0,
			Tools:              map[string]task.Support{"slow_compute": modes[(cfg>>3)%3], "a": modes[(cfg>>5)%3]},
		}
		p := NewToolPolicy(conf.Tools, conf.DefaultTaskSupport, conf.ListTasks)
		// Until an initialize answer says otherwise, the upstream may run
		// tasks: a tool declaring a task mode is taken at its word.
		mayRunTasks := true
		if in, err := decodeJSON(initResult); err == nil && json.Valid(initResult) && !foldedName(in) {
			if call := checkInitializeRewrite(t, p, initResult, in); call != nil {
				mayRunTasks = *call
			}
		}
		if in, err := decodeJSON(toolsResult); err == nil && json.Valid(toolsResult) && !foldedName(in) {
			checkToolsListRewrite(t, p, toolsResult, in, mayRunTasks)
			checkRewriteOnTheWire(t, p, toolsResult)
		}
	})
}

// lineBreak is an SSE line end: CRLF, LF or CR.
var lineBreak = regexp.MustCompile("\r\n|\r|\n")

// checkRewriteOnTheWire checks that the response carrying result, as a JSON
// body and as an SSE event (its JSON text split over data lines where it
// has line breaks), reaches the client as the rewrite of result alone.
func checkRewriteOnTheWire(t *testing.T, p *ToolPolicy, result []byte) {
	t.Helper()
	lines := lineBreak.Split(string(result), -1)
	result = []byte(strings.Join(lines, "\n")) // what an SSE reader rejoins
	message := []byte(`{"jsonrpc":"2.0","id":7,"result":` + string(result) + `}`)
	want := message
	if edited, err := p.RewriteToolsList(result); err == nil && !bytes.Equal(edited, result) {
		want = []byte(`{"jsonrpc":"2.0","id":7,"result":` + string(edited) + `}`)
	}
	for _, contentType := range []string{"application/json", "text/event-stream"} {
		body := message
		if contentType == "text/event-stream" {
			body = []byte("event: message\nid: e1\ndata: " + strings.ReplaceAll(string(message), "\n", "\ndata: ") + "\n\n")
		}
		rec := httptest.NewRecorder()
		rw := &rewriteWriter{ResponseWriter: rec, id: json.RawMessage(`7`), fn: p.RewriteToolsList}
		rw.Header().Set("Content-Type", contentType)
		rw.WriteHeader(http.StatusOK)
		_, _ = rw.Write(body)
		rw.finish()
		got := rec.Body.Bytes()
		if contentType == "text/event-stream" {
			ev, err := sse.NewReader(bytes.NewReader(got)).Next()
			if err != nil || ev.ID != "e1" || ev.Type != "message" {
				t.Fatalf("SSE answer %q rewritten as %q: event %+v, %v", body, got, ev, err)
			}
			got = []byte(ev.Data)
		}
		if a, b := mustDecode(t, got), mustDecode(t, want); !reflect.DeepEqual(a, b) {
			t.Fatalf("%s answer %s reached the client as %s, want %s", contentType, body, got, want)
		}
	}
}

func mustDecode(t *testing.T, b []byte) any {
	t.Helper()
	v, err := decodeJSON(b)
	if err != nil || !json.Valid(b) {
		t.Fatalf("%s: not valid JSON: %v", b, err)
	}
	return v
}

// checkInitializeRewrite checks one initialize rewrite and what it learned;
// it returns whether the upstream declared task-augmented tools/call, nil
// when the answer said nothing of it (nothing was learned).
func checkInitializeRewrite(t *testing.T, p *ToolPolicy, result []byte, in any) *bool {
	t.Helper()
	out, err := p.RewriteInitialize(result)
	obj, isObject := in.(map[string]any)
	if err != nil {
		if isObject {
			t.Fatalf("rewriteInitialize(%s): %v", result, err)
		}
		return nil
	}
	if !json.Valid(out) {
		t.Fatalf("rewriteInitialize(%s) = %s: not valid JSON", result, out)
	}
	got, _ := decodeJSON(out)
	want, _ := decodeJSON(result)
	if pv, _ := obj["protocolVersion"].(string); isObject && pv == "2025-11-25" {
		w := want.(map[string]any)
		caps, ok := w["capabilities"].(map[string]any)
		if !ok {
			caps = map[string]any{}
			w["capabilities"] = caps
		}
		caps["tasks"], _ = decodeJSON(p.v2025TasksCapability())
	} else if !bytes.Equal(out, result) {
		t.Fatalf("rewriteInitialize(%s) = %s, want it unchanged", result, out)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("rewriteInitialize(%s) = %s\ndecodes to %v\nwant       %v", result, out, got, want)
	}
	wantCall := refTasksCall(in)
	p.Caps.mu.RLock()
	gotCall := p.Caps.tasksCall
	p.Caps.mu.RUnlock()
	if (gotCall == nil) != (wantCall == nil) || gotCall != nil && *gotCall != *wantCall {
		t.Fatalf("rewriteInitialize(%s) learned tasks call %v, encoding/json reads %v", result, ptrString(gotCall), ptrString(wantCall))
	}
	return wantCall
}

// checkToolsListRewrite checks one tools/list rewrite and the modes
// learned; mayRunTasks says whether the upstream may run tasks (its
// initialize answer declared task calls, or none is known).
func checkToolsListRewrite(t *testing.T, p *ToolPolicy, result []byte, in any, mayRunTasks bool) {
	t.Helper()
	out, err := p.RewriteToolsList(result)
	obj, isObject := in.(map[string]any)
	tools, hasTools := obj["tools"]
	list, isList := tools.([]any)
	if err != nil {
		if isObject && (!hasTools || isList && allObjects(list)) {
			t.Fatalf("rewriteToolsList(%s): %v", result, err)
		}
		return // not an object, tools not an array, or a tool not an object: passed on as sent
	}
	if !json.Valid(out) {
		t.Fatalf("rewriteToolsList(%s) = %s: not valid JSON", result, out)
	}
	if !isObject || !hasTools {
		if !bytes.Equal(out, result) {
			t.Fatalf("rewriteToolsList(%s) = %s, want it unchanged", result, out)
		}
		return
	}
	if !isList || !allObjects(list) {
		t.Fatalf("rewriteToolsList(%s) = %s, want an error: tools is not an array of objects", result, out)
	}
	learned := map[string]task.Support{}
	for _, e := range list {
		tool := e.(map[string]any)
		if name, ok := tool["name"].(string); ok {
			learned[name] = refDeclared(tool)
		}
	}
	p.Caps.mu.RLock()
	gotLearned := p.Caps.tools
	p.Caps.mu.RUnlock()
	if len(learned) > 0 && !reflect.DeepEqual(gotLearned, learned) || len(learned) == 0 && len(gotLearned) > 0 {
		t.Fatalf("rewriteToolsList(%s) learned %v, encoding/json reads %v", result, gotLearned, learned)
	}
	want, _ := decodeJSON(result)
	for _, e := range want.(map[string]any)["tools"].([]any) {
		tool := e.(map[string]any)
		name, _ := tool["name"].(string)
		mode := p.configured(name)
		if learned[name] == task.SupportRequired && mayRunTasks {
			mode = task.SupportRequired
		}
		exec, ok := tool["execution"].(map[string]any)
		if !ok {
			exec = map[string]any{}
			tool["execution"] = exec
		}
		exec["taskSupport"] = string(mode)
	}
	got, _ := decodeJSON(out)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("rewriteToolsList(%s) = %s\ndecodes to %v\nwant       %v", result, out, got, want)
	}
}

func allObjects(list []any) bool {
	for _, e := range list {
		if _, ok := e.(map[string]any); !ok {
			return false
		}
	}
	return true
}

func ptrString(b *bool) string {
	if b == nil {
		return "nothing"
	}
	if *b {
		return "true"
	}
	return "false"
}
