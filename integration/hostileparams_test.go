package integration

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/integration/upstream"
)

// recordedBodies keeps the bodies of the tools/call requests an upstream got.
type recordedBodies struct {
	mu     sync.Mutex
	bodies [][]byte
}

func (r *recordedBodies) add(b []byte) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.bodies = append(r.bodies, b)
}

// find returns the tools/call body that holds marker, or nil.
func (r *recordedBodies) find(marker string) []byte {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, b := range r.bodies {
		if bytes.Contains(b, []byte(`"tools/call"`)) && bytes.Contains(b, []byte(marker)) {
			return b
		}
	}
	return nil
}

// topLevelKeys reads the keys of the object in data in order, duplicates
// included, and fails on anything that is not one JSON object.
func topLevelKeys(t *testing.T, data []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("upstream got %q: not an object", data)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("upstream got %q: %v", data, err)
		}
		keys = append(keys, tok.(string))
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			t.Fatalf("upstream got %q: %v", data, err)
		}
	}
	if _, err := dec.Token(); err != nil {
		t.Fatalf("upstream got %q: %v", data, err)
	}
	if _, err := dec.Token(); err != io.EOF {
		t.Fatalf("upstream got %q: something after the object", data)
	}
	return keys
}

// A client's arguments reach the upstream as they were sent, inside the
// params of one well-formed request: no key, id or method of the client's
// making, whatever the arguments hold.
func TestHostileArgumentsReachUpstreamIntact(t *testing.T) {
	t.Parallel()
	up := upstream.New(upstream.Options{})
	rec := &recordedBodies{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		rec.add(body)
		r.Body = io.NopCloser(bytes.NewReader(body))
		up.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	gw := startGateway(t, gatewayOptions{Upstream: strings.TrimPrefix(srv.URL, "http://")})
	c := newRPCClient(t, gw.URL)
	c.initialize("")

	cases := []struct{ name, args string }{
		{"quote break-out", `{"name":"M1\"},\"id\":99,\"method\":\"x\",\"p\":{\""}`},
		{"html", `{"name":"M2</script><b>&amp;"}`},
		{"line separators", "{\"name\":\"M3\u2028\u2029\"}"},
		{"escaped line separators", `{"name":"M4\u2028\u2029\u003c"}`},
		{"invalid utf-8", "{\"name\":\"M5\xff\xfe\"}"},
		{"control escapes", `{"name":"M6\u0000\u001f\b\f\n\r\t\/"}`},
		{"duplicate keys", `{"name":"M7a","name":"M7b"}`},
		{"spacing", "{ \"name\" :\t\"M8\" ,\r\n \"extra\" : [ 1 , 2 ] }"},
		{"keys like the envelope", `{"name":"M9","id":5,"method":"tools/list","jsonrpc":"1.0","params":{}}`},
		{"big numbers", `{"name":"M10","n":1e999,"m":-0.0e-0,"k":123456789012345678901234567890}`},
	}
	for i, tc := range cases {
		body := []byte(`{"jsonrpc":"2.0","id":` + strconv.Itoa(100+i) + `,"method":"tools/call","params":{"name":"greet","arguments":` + tc.args + `,"task":{"ttl":60000}}}`)
		s := c.open(context.Background(), body)
		m := s.next()
		s.close()
		if m == nil || m.Error != nil {
			t.Errorf("%s: tools/call answered %+v", tc.name, m)
			continue
		}
	}
	markers := []string{"M1", "M2", "M3", "M4", "M5", "M6", "M7", "M8", "M9", "M10"}
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		n := 0
		for _, m := range markers {
			if rec.find(`"`+m) != nil {
				n++
			}
		}
		if n == len(markers) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d calls reached the upstream", n, len(markers))
		}
	}
	for i, tc := range cases {
		marker := markers[i]
		got := rec.find(`"` + marker)
		if got == nil {
			t.Errorf("%s: no call with %s reached the upstream", tc.name, marker)
			continue
		}
		keys := topLevelKeys(t, got)
		if !reflect.DeepEqual(keys, []string{"jsonrpc", "id", "method", "params"}) {
			t.Errorf("%s: upstream got keys %v in %q", tc.name, keys, got)
		}
		var env struct {
			Method string `json:"method"`
			Params struct {
				Name      string          `json:"name"`
				Arguments json.RawMessage `json:"arguments"`
			} `json:"params"`
		}
		if err := json.Unmarshal(got, &env); err != nil {
			t.Errorf("%s: %v", tc.name, err)
			continue
		}
		if env.Method != "tools/call" || env.Params.Name != "greet" {
			t.Errorf("%s: upstream got method %q name %q", tc.name, env.Method, env.Params.Name)
		}
		var want, have any
		_ = json.Unmarshal([]byte(tc.args), &want)
		_ = json.Unmarshal(env.Params.Arguments, &have)
		if !reflect.DeepEqual(want, have) {
			t.Errorf("%s: arguments %s reached the upstream as %s", tc.name, tc.args, env.Params.Arguments)
		}
		t.Logf("%s: %s", tc.name, got)
	}
}
