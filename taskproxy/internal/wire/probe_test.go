package wire

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"testing/synctest"
	"time"

	"go.uber.org/zap"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/internal/runners"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
)

func TestAdvertisesTasksExtension(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, result string
		want         bool
	}{
		{"listed", `{"capabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}`, true},
		{"listed with settings", `{"capabilities":{"tools":{},"extensions":{"io.modelcontextprotocol/tasks":{"x":1}}}}`, true},
		{"other extension", `{"capabilities":{"extensions":{"io.example/other":{}}}}`, false},
		{"not an object", `{"capabilities":{"extensions":{"io.modelcontextprotocol/tasks":true}}}`, false},
		{"no extensions", `{"capabilities":{"tools":{}}}`, false},
		{"no capabilities", `{"supportedVersions":["2026-07-28"]}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := advertisesTasksExtension([]byte(tt.result)); got != tt.want {
				t.Errorf("advertisesTasksExtension(%s) = %v, want %v", tt.result, got, tt.want)
			}
		})
	}
}

func TestWithoutV2025(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, result string
		want         bool
	}{
		{"2026-07-28 only (the task runtime fixture)", `{"supportedVersions":["2026-07-28"]}`, true},
		{"both (FastMCP, the gateway itself)", `{"supportedVersions":["2026-07-28","2025-11-25"]}`, false},
		{"2026-07-28 and an older one", `{"supportedVersions":["2026-07-28","2025-06-18"]}`, true},
		{"no list says nothing", `{"capabilities":{}}`, false},
		{"empty list says nothing", `{"supportedVersions":[]}`, false},
		{"not a list", `{"supportedVersions":"2026-07-28"}`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := withoutV2025([]byte(tt.result)); got != tt.want {
				t.Errorf("withoutV2025(%s) = %v, want %v", tt.result, got, tt.want)
			}
		})
	}
}

func TestClassifyProbe(t *testing.T) {
	t.Parallel()
	msg := func(s string) *jsonrpc.Message {
		m, err := jsonrpc.Parse([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	tests := []struct {
		name         string
		status       int
		answer       *jsonrpc.Message
		v2025, known bool
	}{
		{"discover result with 2026-07-28", 200, msg(`{"jsonrpc":"2.0","id":1,"result":{"supportedVersions":["2026-07-28"],"capabilities":{}}}`), false, true},
		{"discover result without it", 200, msg(`{"jsonrpc":"2.0","id":1,"result":{"supportedVersions":["2027-01-01"]}}`), true, true},
		{"session required (TS SDK v1)", 400, msg(`{"jsonrpc":"2.0","id":null,"error":{"code":-32000,"message":"Bad Request: Mcp-Session-Id header is required"}}`), true, true},
		{"method not found in 200", 200, msg(`{"jsonrpc":"2.0","id":1,"error":{"code":-32601,"message":"Method not found"}}`), true, true},
		{"header mismatch is a 2026-07-28 server", 400, msg(`{"jsonrpc":"2.0","id":1,"error":{"code":-32020,"message":"Header mismatch"}}`), false, true},
		{"unsupported version listing 2026-07-28", 400, msg(`{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"x","data":{"supported":["2026-07-28"],"requested":"2026-07-28"}}}`), false, true},
		{"unsupported version without it", 400, msg(`{"jsonrpc":"2.0","id":1,"error":{"code":-32022,"message":"x","data":{"supported":["2025-11-25"],"requested":"2026-07-28"}}}`), true, true},
		{"unreadable 200 says nothing", 200, nil, false, false},
		{"400 without a JSON-RPC body says nothing", 400, nil, false, false},
		{"429 without a JSON-RPC body says nothing", 429, nil, false, false},
		{"405 without body", 405, nil, true, true},
		{"404 without body", 404, nil, true, true},
		{"401 says nothing", 401, nil, false, false},
		{"403 says nothing", 403, nil, false, false},
		{"502 says nothing", 502, nil, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			v2025, known := classifyProbe(tt.status, tt.answer)
			if v2025 != tt.v2025 || known != tt.known {
				t.Errorf("classifyProbe = v2025 %v known %v, want %v %v", v2025, known, tt.v2025, tt.known)
			}
		})
	}
}

// discoverCounter is an upstream that answers server/discover as a
// 2026-07-28 server listing the tasks extension (or, with status set, with
// that status), after release is closed, and counts the probes.
type discoverCounter struct {
	mu      sync.Mutex
	probes  int
	status  int
	release chan struct{}
}

func (u *discoverCounter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	u.mu.Lock()
	u.probes++
	u.mu.Unlock()
	if u.release != nil {
		<-u.release
	}
	if u.status != 0 {
		w.WriteHeader(u.status)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":"mcp-tasks:probe","result":{"resultType":"complete","supportedVersions":["2026-07-28"],"capabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}`))
}

func (u *discoverCounter) count() int {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.probes
}

// bubblePool returns a pool of runners for a test in a testing/synctest
// bubble, for its probes' upstream calls: the shared pool's idle runners
// wait on a channel of no bubble, so the bubble's clock could not move.
// Its idle runners end, on the bubble's clock, as the test ends.
func bubblePool(t *testing.T) *runners.Pool {
	t.Helper()
	const idle = time.Minute
	t.Cleanup(func() { time.Sleep(idle + time.Second) })
	return runners.NewPool(idle)
}

// probeRequestOn is probeRequest whose probe calls the upstream on pool.
func probeRequestOn(pool *runners.Pool, host string) *http.Request {
	r := probeRequest(host)
	return r.WithContext(runners.WithPool(r.Context(), pool))
}

func probeRequest(host string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/mcp", nil)
	r.Host = host
	return r
}

// One probe per endpoint answers both questions (the protocol, the tasks
// extension) for every caller waiting meanwhile; a caller that leaves
// does not cancel it; a 404 is not kept; the table is bounded.
func TestProbesOnePerEndpoint(t *testing.T) {
	t.Parallel()
	detach := func(r *http.Request) *http.Request { return r.Clone(context.WithoutCancel(r.Context())) }
	t.Run("concurrent callers share one probe", func(t *testing.T) {
		t.Parallel()
		synctest.Test(t, func(t *testing.T) { concurrentCallersShareOneProbe(t, detach) })
	})
	t.Run("not found is not kept until confirmed", func(t *testing.T) {
		t.Parallel()
		up := &discoverCounter{status: http.StatusNotFound}
		p := NewProbes(zap.NewNop(), detach)
		for range 2 {
			if v, known := p.Verdict(probeRequest("b.example"), up); !known || !v.V2025 {
				t.Errorf("404: %+v %v, want bridged", v, known)
			}
		}
		if up.count() != 2 {
			t.Errorf("%d probes, want 2 (a 404 is not kept)", up.count())
		}
		p.ConfirmV2025("/mcp")
		p.Verdict(probeRequest("b.example"), up)
		if up.count() != 2 {
			t.Errorf("%d probes after ConfirmV2025, want 2", up.count())
		}
	})
	t.Run("bounded", func(t *testing.T) {
		t.Parallel()
		up := &discoverCounter{}
		p := NewProbes(zap.NewNop(), detach)
		for i := range 3 * MaxProbeVerdicts {
			r := probeRequest("h.example")
			r.URL.Path = fmt.Sprintf("/mcp/%d", i) // a route matching a prefix serves any path
			p.Verdict(r, up)
		}
		if p.Len() != MaxProbeVerdicts {
			t.Errorf("%d verdicts kept, want %d", p.Len(), MaxProbeVerdicts)
		}
	})
}

// concurrentCallersShareOneProbe: callers of one endpoint wait for one
// probe, which a caller that leaves does not end.
func concurrentCallersShareOneProbe(t *testing.T, detach func(*http.Request) *http.Request) {
	t.Helper()
	pool := bubblePool(t)
	up := &discoverCounter{release: make(chan struct{})}
	p := NewProbes(zap.NewNop(), detach)
	var wg sync.WaitGroup
	results := make([]Verdict, 8)
	for i := range results {
		wg.Go(func() {
			v, known := p.Verdict(probeRequestOn(pool, "a.example"), up)
			if !known {
				t.Error("verdict unknown")
			}
			results[i] = v
		})
	}
	synctest.Wait() // every caller waits, on the probe under way
	if n := up.count(); n != 1 {
		t.Fatalf("%d probes under way for 8 callers, want 1", n)
	}
	// A caller that gives up waiting does not end the probe.
	ctx, cancel := context.WithCancel(runners.WithPool(context.Background(), pool))
	cancel()
	if _, known := p.Verdict(probeRequest("a.example").WithContext(ctx), up); known {
		t.Error("a caller that left got a verdict")
	}
	close(up.release)
	wg.Wait()
	for _, v := range results {
		if v.V2025 || !v.TasksExtension {
			t.Errorf("verdict %+v, want a 2026-07-28 upstream that runs tasks", v)
		}
	}
	if v, known := p.Verdict(probeRequest("a.example"), up); !known || v.V2025 || up.count() != 1 {
		t.Errorf("after the probe: %+v %v, %d probes, want the kept verdict and 1 probe", v, known, up.count())
	}
	p.Forget("/mcp")
	p.Verdict(probeRequestOn(pool, "a.example"), up)
	if up.count() != 2 {
		t.Errorf("%d probes after Forget, want 2", up.count())
	}
}

// A probe that learned nothing for one caller (its credentials, or none,
// refused) is not another caller's answer: a caller with other
// credentials probes with its own.
func TestProbesWaiterProbesAgainAfterRefusal(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		pool := bubblePool(t)
		var probes atomic.Int32
		refuse := make(chan struct{}) // the anonymous probe answers once closed
		up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			probes.Add(1)
			if r.Header.Get("Authorization") == "" {
				<-refuse
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"jsonrpc":"2.0","id":"x","error":{"code":-32601,"message":"Method not found"}}`))
		})
		p := NewProbes(zap.NewNop(), func(r *http.Request) *http.Request { return r.Clone(context.WithoutCancel(r.Context())) })
		req := func(auth string) *http.Request {
			r := probeRequestOn(pool, "h")
			if auth != "" {
				r.Header.Set("Authorization", auth)
			}
			return r
		}
		anonymous := make(chan bool, 1)
		go func() {
			_, known := p.Verdict(req(""), up)
			anonymous <- known
		}()
		synctest.Wait() // the anonymous probe is under way
		withCredentials := make(chan Verdict, 1)
		go func() {
			v, known := p.Verdict(req("Bearer good"), up)
			if !known {
				t.Error("the caller with credentials got no verdict")
			}
			withCredentials <- v
		}()
		// The caller with credentials does not wait for the anonymous
		// probe under way: it probes with its own.
		synctest.Wait()
		select {
		case v := <-withCredentials:
			if !v.V2025 {
				t.Errorf("the caller with credentials: %+v, want its own verdict (a 2025-only upstream)", v)
			}
		default:
			t.Error("the caller with credentials waits for the anonymous probe")
		}
		close(refuse)
		if <-anonymous {
			t.Error("the refused caller got a verdict")
		}
		if n := probes.Load(); n != 2 {
			t.Errorf("%d probes, want 2 (the refused one and the caller's own)", n)
		}
	})
}

// The probe reads the caller's request only on the caller's goroutine: a
// caller that stops waiting goes on with its request (the discover
// rewrite drops Accept-Encoding) while the probe may still run. Run with
// -race.
func TestProbesLeaveTheCallersRequestAlone(t *testing.T) {
	t.Parallel()
	synctest.Test(t, func(t *testing.T) {
		pool := bubblePool(t)
		// The probes answer only once every caller has gone on with its
		// request: they run meanwhile.
		answer := make(chan struct{})
		up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			<-answer
			w.WriteHeader(http.StatusNotFound)
		})
		p := NewProbes(zap.NewNop(), func(r *http.Request) *http.Request { return r.Clone(context.WithoutCancel(r.Context())) })
		for i := range 50 {
			ctx, cancel := context.WithCancel(runners.WithPool(context.Background(), pool))
			cancel()
			r := probeRequest(fmt.Sprintf("h%d.example", i)).WithContext(ctx)
			r.Header.Set("Accept-Encoding", "gzip")
			r.Header.Set("Authorization", "Bearer a")
			p.Verdict(r, up)
			r.Header.Del("Accept-Encoding")
			r.Header.Set("X-Later", "1")
		}
		close(answer)
		synctest.Wait()
	})
}

// A panic while probing (a detach that fails, say) learns nothing; it
// does not end the process from the probe's goroutine.
func TestProbesRecoverAPanic(t *testing.T) {
	t.Parallel()
	p := NewProbes(zap.NewNop(), func(*http.Request) *http.Request { panic("detach failed") })
	defer func() {
		if v := recover(); v != nil {
			t.Logf("the panic reached the caller: %v", v)
		}
	}()
	if _, known := p.Verdict(probeRequest("h"), http.NotFoundHandler()); known {
		t.Error("a probe that panicked gave a verdict")
	}
}

// A caller that leaves while its probe runs (its connection dropped) does
// not end the probe: the probe runs on its own deadline, and what it
// learns is the verdict, not a 2025-only one read from a cut answer.
func TestProbeOutlivesItsCaller(t *testing.T) {
	t.Parallel()
	synctest.Test(t, probeOutlivesItsCaller)
}

func probeOutlivesItsCaller(t *testing.T) {
	pool := bubblePool(t)
	started, release := make(chan struct{}), make(chan struct{})
	up := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/event-stream")
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		close(started)
		select {
		case <-release:
		case <-r.Context().Done(): // as reverse_proxy ends a request whose context ends
			return
		}
		_, _ = w.Write([]byte("event: message\ndata: " + `{"jsonrpc":"2.0","id":"mcp-tasks:probe","result":{"supportedVersions":["2026-07-28"],"capabilities":{"extensions":{"io.modelcontextprotocol/tasks":{}}}}}` + "\n\n"))
	})
	p := NewProbes(zap.NewNop(), func(r *http.Request) *http.Request { return r.Clone(context.WithoutCancel(r.Context())) })
	ctx, cancel := context.WithCancel(runners.WithPool(context.Background(), pool))
	left := make(chan bool)
	go func() {
		_, known := p.Verdict(probeRequest("a.example").WithContext(ctx), up)
		left <- known
	}()
	<-started
	cancel()
	if <-left {
		t.Error("the caller that left got a verdict")
	}
	close(release)
	synctest.Wait() // the probe has ended
	v, ok := p.Cached(probeRequest("a.example"))
	if !ok {
		t.Fatal("no verdict kept: the probe ended with its caller")
	}
	if v.V2025 || !v.TasksExtension {
		t.Errorf("kept verdict %+v, want a 2026-07-28 upstream that runs tasks", v)
	}
}

// Verdicts are kept per endpoint of the route's upstream, whatever Host a
// client names: a client naming hosts at will neither probes again nor
// evicts the verdict others are served.
func TestProbeVerdictsIgnoreTheHost(t *testing.T) {
	t.Parallel()
	up := &discoverCounter{}
	p := NewProbes(zap.NewNop(), func(r *http.Request) *http.Request { return r.Clone(context.WithoutCancel(r.Context())) })
	for i := range 2 * MaxProbeVerdicts {
		if v, known := p.Verdict(probeRequest(fmt.Sprintf("h%d.example", i)), up); !known || v.V2025 {
			t.Fatalf("host %d: %+v %v, want the 2026-07-28 verdict", i, v, known)
		}
	}
	if n := up.count(); n != 1 {
		t.Errorf("%d probes for one endpoint named by %d hosts, want 1", n, 2*MaxProbeVerdicts)
	}
	if p.Len() != 1 {
		t.Errorf("%d verdicts kept, want 1", p.Len())
	}
}
