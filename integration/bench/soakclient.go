package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"mime"
	"net"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/jsonrpc"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/sse"
)

// soakClient speaks JSON-RPC over Streamable HTTP to the gateway and reads
// answers as JSON or as event streams. Answers are decoded with
// encoding/json, not the gateway's own parser, so that a fault of the
// gateway's parser cannot hide itself.
type soakClient struct {
	hc  *http.Client
	url string
	ids atomic.Int64
}

// newSoakClient returns a client of url whose connections come from the
// address local.
func newSoakClient(url string, local net.IP) *soakClient {
	dialer := &net.Dialer{LocalAddr: &net.TCPAddr{IP: local}}
	// No client timeout: long-lived answers (tasks/result, listen) end when
	// the task does; every flow has a deadline of its own instead.
	return &soakClient{url: url, hc: &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext, MaxIdleConnsPerHost: 64}}}
}

func (c *soakClient) nextID() json.RawMessage {
	return json.RawMessage(strconv.FormatInt(c.ids.Add(1), 10))
}

// exchange posts body and hands every message of the answer to each until
// each returns false or the answer ends. It returns the answer's headers
// and HTTP status.
func (c *soakClient) exchange(ctx context.Context, h http.Header, body []byte, each func(*jsonrpc.Message) bool) (http.Header, int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url, bytes.NewReader(body))
	if err != nil {
		return nil, 0, fmt.Errorf("making a request: %w", err)
	}
	maps.Copy(req.Header, h)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, 0, fmt.Errorf("posting %.120s: %w", body, err)
	}
	defer resp.Body.Close()
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	switch mt {
	case "application/json":
		data, err := io.ReadAll(resp.Body)
		if err != nil {
			return nil, resp.StatusCode, fmt.Errorf("reading the answer to %.120s: %w", body, err)
		}
		var m jsonrpc.Message
		if err := json.Unmarshal(data, &m); err != nil {
			return nil, resp.StatusCode, fmt.Errorf("HTTP %d answer %.200q: %w", resp.StatusCode, data, err)
		}
		each(&m)
	case "text/event-stream":
		events := sse.NewReader(resp.Body)
		for {
			ev, err := events.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return nil, resp.StatusCode, fmt.Errorf("reading the event stream answering %.120s: %w", body, err)
			}
			if !ev.HasData || strings.TrimSpace(ev.Data) == "" {
				continue
			}
			var m jsonrpc.Message
			if err := json.Unmarshal([]byte(ev.Data), &m); err != nil {
				return nil, resp.StatusCode, fmt.Errorf("event %.200q: %w", ev.Data, err)
			}
			if !each(&m) {
				break
			}
		}
	default:
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		if resp.StatusCode >= 300 {
			return resp.Header, resp.StatusCode, fmt.Errorf("HTTP %d answering %.120s: %.200q", resp.StatusCode, body, data)
		}
	}
	return resp.Header, resp.StatusCode, nil
}

// call sends a request and returns its response.
func (c *soakClient) call(ctx context.Context, h http.Header, method string, params any) (*jsonrpc.Message, http.Header, error) {
	id := c.nextID()
	body, err := jsonrpc.RequestBytes(id, method, params)
	if err != nil {
		return nil, nil, err
	}
	var resp *jsonrpc.Message
	hdr, status, err := c.exchange(ctx, h, body, func(m *jsonrpc.Message) bool {
		if m.Method == "" && string(m.ID) == string(id) {
			resp = m
			return false
		}
		return true
	})
	if err != nil {
		return nil, hdr, fmt.Errorf("%s: %w", method, err)
	}
	if resp == nil {
		return nil, hdr, fmt.Errorf("%s: HTTP %d without a response", method, status)
	}
	return resp, hdr, nil
}

// answered describes a response for an error message: its error's code
// and message, or the start of its result.
func answered(m *jsonrpc.Message) string {
	if m.Error != nil {
		return fmt.Sprintf("error %d %s", m.Error.Code, m.Error.Message)
	}
	return fmt.Sprintf("%.200s", m.Result)
}

// send posts a notification or a response and wants HTTP 202.
func (c *soakClient) send(ctx context.Context, h http.Header, body []byte) error {
	_, status, err := c.exchange(ctx, h, body, func(*jsonrpc.Message) bool { return true })
	if err != nil {
		return err
	}
	if status != http.StatusAccepted {
		return fmt.Errorf("posting %.120s: HTTP %d, want 202", body, status)
	}
	return nil
}

// tally counts requests by label and outcome, and the flows that failed.
type tally struct {
	mu     sync.Mutex
	counts map[string]map[string]int64 // label -> outcome -> n
	flows  map[string][2]int64         // flow -> {done, failed}
	errs   []string                    // the first unexpected errors
	failed int64
}

// Outcomes of a request. A refusal is one the soak provokes on purpose and
// checks (its code and message); a tool error is a tool's own isError
// result, as the upstream's failing_job gives.
const (
	outcomeOK        = "ok"
	outcomeRefused   = "refused"
	outcomeToolError = "tool error"
)

func newTally() *tally {
	return &tally{counts: map[string]map[string]int64{}, flows: map[string][2]int64{}}
}

func (t *tally) add(label, outcome string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.counts[label] == nil {
		t.counts[label] = map[string]int64{}
	}
	t.counts[label][outcome]++
}

// flowDone records a flow's end; err is an unexpected error.
func (t *tally) flowDone(name string, err error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	f := t.flows[name]
	f[0]++
	if err != nil {
		f[1]++
		t.failed++
		if len(t.errs) < 20 {
			t.errs = append(t.errs, name+": "+err.Error())
		}
	}
	t.flows[name] = f
}

// totals returns the requests by outcome and the failed flows.
func (t *tally) totals() (map[string]int64, int64, int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := map[string]int64{}
	for _, byOutcome := range t.counts {
		for o, n := range byOutcome {
			out[o] += n
		}
	}
	var flows int64
	for _, f := range t.flows {
		flows += f[0]
	}
	return out, flows, t.failed
}

// print writes the counts per request label and per flow.
func (t *tally) print(w io.Writer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	labels := make([]string, 0, len(t.counts))
	for l := range t.counts {
		labels = append(labels, l)
	}
	sort.Strings(labels)
	fmt.Fprintln(w, "requests by outcome:")
	for _, l := range labels {
		var parts []string
		for _, o := range []string{outcomeOK, outcomeToolError, outcomeRefused} {
			if n := t.counts[l][o]; n > 0 {
				parts = append(parts, fmt.Sprintf("%s %d", o, n))
			}
		}
		fmt.Fprintf(w, "  %-34s %s\n", l, strings.Join(parts, ", "))
	}
	names := make([]string, 0, len(t.flows))
	for n := range t.flows {
		names = append(names, n)
	}
	sort.Strings(names)
	fmt.Fprintln(w, "flows (done / failed with an unexpected error):")
	for _, n := range names {
		fmt.Fprintf(w, "  %-34s %d / %d\n", n, t.flows[n][0], t.flows[n][1])
	}
	for _, e := range t.errs {
		fmt.Fprintln(w, "  unexpected:", e)
	}
}
