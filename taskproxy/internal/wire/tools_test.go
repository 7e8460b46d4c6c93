package wire

import (
	"bytes"
	"encoding/json"
	"maps"
	"runtime"
	"strings"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/jsonx"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// decodedToolModes is what learnTools recorded before it scanned instead of
// decoding: the reference for well-formed answers.
func decodedToolModes(t *testing.T, result []byte) map[string]task.Support {
	t.Helper()
	var r struct {
		Tools []struct {
			Name      string `json:"name"`
			Execution *struct {
				TaskSupport string `json:"taskSupport"`
			} `json:"execution"`
		} `json:"tools"`
	}
	if err := json.Unmarshal(result, &r); err != nil {
		t.Fatalf("reference decode: %v", err)
	}
	out := map[string]task.Support{}
	for _, tool := range r.Tools {
		mode := task.SupportForbidden
		if tool.Execution != nil {
			if m, err := task.ParseSupport(tool.Execution.TaskSupport); err == nil {
				mode = m
			}
		}
		out[tool.Name] = mode
	}
	return out
}

func TestLearnTools(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		result string
		want   map[string]task.Support
		// decodes is set when encoding/json reads the answer too, so
		// that the scan must agree with it.
		decodes bool
	}{
		{"modes", `{"tools":[{"name":"a"},{"name":"b","execution":{"taskSupport":"required"}},{"name":"c","execution":{"taskSupport":"optional"}},{"name":"d","execution":{"taskSupport":"forbidden"}}]}`,
			map[string]task.Support{"a": task.SupportForbidden, "b": task.SupportRequired, "c": task.SupportOptional, "d": task.SupportForbidden}, true},
		{"escaped and unicode names", `{"tools":[{"name":"tab\tq\"uote","execution":{"taskSupport":"required"}},{"name":"\u00e9t\u00e9","execution":{"taskSupport":"optional"}},{"name":"日本"}]}`,
			map[string]task.Support{"tab\tq\"uote": task.SupportRequired, "été": task.SupportOptional, "日本": task.SupportForbidden}, true},
		{"members in any order, whitespace, nesting", "{ \"nextCursor\":\"x\" , \"tools\" : [ { \"inputSchema\":{\"name\":\"not me\",\"execution\":{\"taskSupport\":\"required\"}}, \"execution\" : { \"other\":[1,{\"taskSupport\":\"required\"}], \"taskSupport\" : \"optional\" } , \"name\" : \"e\" } ] }",
			map[string]task.Support{"e": task.SupportOptional}, true},
		{"execution null or without taskSupport", `{"tools":[{"name":"f","execution":null},{"name":"g","execution":{}}]}`,
			map[string]task.Support{"f": task.SupportForbidden, "g": task.SupportForbidden}, true},
		{"unknown taskSupport", `{"tools":[{"name":"h","execution":{"taskSupport":"always"}}]}`,
			map[string]task.Support{"h": task.SupportForbidden}, true},
		{"odd values count as none", `{"tools":[{"name":"i","execution":"required"},{"name":"j","execution":{"taskSupport":true}}]}`,
			map[string]task.Support{"i": task.SupportForbidden, "j": task.SupportForbidden}, false},
		{"tools without a string name are passed over", `{"tools":[{"name":7,"execution":{"taskSupport":"required"}},{"execution":{"taskSupport":"required"}},"x",{"name":"k"}]}`,
			map[string]task.Support{"k": task.SupportForbidden}, false},
		{"no tools", `{"tools":[]}`, nil, false},
		{"not a list", `{"tools":{"name":"l"}}`, nil, false},
		{"malformed", `{"tools":[{"name":"m"`, nil, false},
		{"no tools member", `{"nextCursor":"x"}`, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			var u UpstreamCaps
			u.LearnTools([]byte(tt.result))
			if !maps.Equal(u.tools, tt.want) {
				t.Errorf("learned %v, want %v", u.tools, tt.want)
			}
			if tt.decodes {
				if ref := decodedToolModes(t, []byte(tt.result)); !maps.Equal(u.tools, ref) {
					t.Errorf("learned %v, encoding/json reads %v", u.tools, ref)
				}
			}
		})
	}
}

// TestLearnToolsReplaces checks that a later answer replaces what an
// earlier one said of a tool and keeps the tools it does not list.
func TestLearnToolsReplaces(t *testing.T) {
	t.Parallel()
	var u UpstreamCaps
	u.LearnTools([]byte(`{"tools":[{"name":"a","execution":{"taskSupport":"required"}},{"name":"b"}]}`))
	u.LearnTools([]byte(`{"tools":[{"name":"a"}]}`))
	want := map[string]task.Support{"a": task.SupportForbidden, "b": task.SupportForbidden}
	if !maps.Equal(u.tools, want) {
		t.Errorf("learned %v, want %v", u.tools, want)
	}
}

// TestRewriteToolsListAllocs holds the rewrite of every tools/list passing
// through to a few allocations whatever the number of tools: it once
// decoded the whole answer to learn the upstream's modes (62 allocations
// for 20 tools).
//
//nolint:paralleltest // testing.AllocsPerRun refuses to run in a parallel test
func TestRewriteToolsListAllocs(t *testing.T) {
	conf := struct {
		DefaultTaskSupport task.Support
		ListTasks          bool
		Tools              map[string]task.Support
	}{DefaultTaskSupport: task.SupportOptional, Tools: map[string]task.Support{"tool_3": task.SupportRequired}}
	p := NewToolPolicy(conf.Tools, conf.DefaultTaskSupport, conf.ListTasks)
	result := benchToolsList(20)
	if out, err := p.RewriteToolsList(result); err != nil || !json.Valid(out) || !bytes.Contains(out, []byte(`"taskSupport":"required"`)) {
		t.Fatalf("rewrite = %s, %v", out, err)
	}
	allocs := testing.AllocsPerRun(50, func() {
		if _, err := p.RewriteToolsList(result); err != nil {
			t.Fatal(err)
		}
	})
	if allocs > 8 {
		t.Errorf("rewriting a tools/list of 20 tools made %.0f allocations, want at most 8", allocs)
	}
}

// TestLearnToolsMemoryFollowsTools holds what the learned modes keep to the
// tools actually named: a map sized by the answer's element count once
// kept 312 MiB, for ever (maps do not shrink), of an 8 MiB answer listing
// four million elements that are no tools, which encoding/json had refused.
//
//nolint:paralleltest // runtime.MemStats counts the allocations of every test running alongside
func TestLearnToolsMemoryFollowsTools(t *testing.T) {
	tools := []byte("[{}" + strings.Repeat(",{}", 200_000-1) + "]")
	elems, err := jsonx.ArrayElements(tools)
	if err != nil {
		t.Fatal(err)
	}
	var u UpstreamCaps
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	u.learnToolElems(tools, elems)
	runtime.ReadMemStats(&after)
	if len(u.tools) != 0 {
		t.Fatalf("learned %d tools from elements without names", len(u.tools))
	}
	if grown := after.TotalAlloc - before.TotalAlloc; grown > 1<<20 {
		t.Errorf("learning %d elements without a tool among them allocated %d KiB, want under 1 MiB", len(elems), grown>>10)
	}
}
