package wire

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/badgerstore"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runtime"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// Without a quota, admitting an anonymous caller's create makes no key of
// its client address: nothing is counted against it.
//
//nolint:paralleltest // testing.AllocsPerRun refuses to run in a parallel test
func TestCheckQuotaWithoutQuotaAllocs(t *testing.T) {
	store, err := badgerstore.Open(badgerstore.Options{InMemory: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = store.Close() })
	rt := runtime.New(store, nil, nil)
	t.Cleanup(func() { _ = rt.Close(time.Second) })
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fast","task":{}}}`
	msg, err := jsonrpc.Parse([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	x := &Exchange{Env: &Env{Runtime: rt}, R: httptest.NewRequest(http.MethodPost, "/mcp", strings.NewReader(body)), Msg: msg, Owner: task.Anonymous}
	if n := testing.AllocsPerRun(50, func() {
		if e := x.CheckQuota(); e != nil {
			t.Fatal(e)
		}
	}); n != 0 {
		t.Errorf("%.0f allocations, want none", n)
	}
}
