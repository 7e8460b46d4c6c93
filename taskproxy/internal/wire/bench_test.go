package wire

import (
	"fmt"
	"strings"
	"testing"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

func benchToolsList(n int) []byte {
	var tools []string
	for i := range n {
		tools = append(tools, fmt.Sprintf(`{"name":"tool_%d","description":"A tool that does thing number %d.","inputSchema":{"type":"object","properties":{"a":{"type":"string"}}}}`, i, i))
	}
	return []byte(`{"tools":[` + strings.Join(tools, ",") + `]}`)
}

func BenchmarkRewriteToolsList(b *testing.B) {
	conf := struct {
		DefaultTaskSupport task.Support
		ListTasks          bool
		Tools              map[string]task.Support
	}{DefaultTaskSupport: task.SupportOptional, Tools: map[string]task.Support{"tool_3": task.SupportRequired}}
	p := NewToolPolicy(conf.Tools, conf.DefaultTaskSupport, conf.ListTasks)
	result := benchToolsList(20)
	b.SetBytes(int64(len(result)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.RewriteToolsList(result); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkRewriteInitialize(b *testing.B) {
	p := NewToolPolicy(nil, task.SupportOptional, false)
	result := []byte(`{"protocolVersion":"2025-11-25","capabilities":{"tools":{"listChanged":true},"logging":{}},"serverInfo":{"name":"up","version":"1"}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := p.RewriteInitialize(result); err != nil {
			b.Fatal(err)
		}
	}
}
