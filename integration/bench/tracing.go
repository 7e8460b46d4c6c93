package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"time"
)

// benchTracingCPU measures what Caddy's tracing directive costs a task's
// life (create, upstream call, completion, one tasks/get of the finished
// task): the CPU of Caddy per lifecycle with `tracing` before mcp_tasks,
// exporting OTLP over HTTP to a receiver in this process that reads and
// drops the spans, against the same site without it. Both Caddys run side
// by side; rounds alternate between them.
func benchTracingCPU(cfg config) ([]row, error) {
	const clients = 32
	up, err := startUpstreamProc()
	if err != nil {
		return nil, err
	}
	defer up.stop()
	var exported atomic.Int64 // export requests received
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	receiver := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		exported.Add(1)
		w.Header().Set("Content-Type", "application/x-protobuf")
	})}
	go func() { _ = receiver.Serve(ln) }()
	defer receiver.Close()
	env := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=http://" + ln.Addr().String(), "OTEL_EXPORTER_OTLP_PROTOCOL=http/protobuf", "OTEL_TRACES_EXPORTER=otlp"}

	type site struct {
		p    *caddyProc
		url  string
		n    int
		cpu  time.Duration
		name string
	}
	var sites [2]*site
	for i, tracing := range []string{"", "\ttracing {\n\t\tspan mcp\n\t}\n"} {
		port := freePort()
		caddyfile := fmt.Sprintf("http://:%d {\n\tbind 127.0.0.1\n%s\tmcp_tasks /mcp* {\n\t\tstorage_dir %s\n\t\tmax_active_per_principal -1\n\t\trate_limit -1\n\t}\n\treverse_proxy /mcp* %s\n}",
			port, tracing, filepath.Join(cfg.work, fmt.Sprintf("tracing-store-%d", i)), up.addr)
		p, err := startCaddyEnv(cfg.caddy, cfg.work, caddyfile, logDefault, env, port)
		if err != nil {
			return nil, err
		}
		defer p.stop()
		sites[i] = &site{p: p, url: fmt.Sprintf("http://127.0.0.1:%d/mcp", port), name: []string{"off", "on"}[i]}
	}
	c := newClient(clients)
	headers := map[string]string{"Mcp-Protocol-Version": "2025-11-25"}
	createBody := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fast","arguments":{"a":"benchmark"},"task":{"ttl":600000}}}`)
	// lives creates tasks at url for d, each followed by tasks/get until
	// it is completed, and returns how many tasks lived.
	lives := func(url string, d time.Duration) (int, error) {
		r := closedLoop(clients, d, func(int, int) error {
			id, err := postCreate(c, url, createBody, headers)
			if err != nil {
				return err
			}
			body := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":%q}}`, id)
			for try := 0; ; try++ {
				data, err := post(c, url, body, headers)
				var g struct{ Result struct{ Status string } }
				if err != nil {
					return fmt.Errorf("tasks/get: %w", err)
				}
				if err := json.Unmarshal(data, &g); err != nil {
					return fmt.Errorf("tasks/get: reading %s: %w", data, err)
				}
				if g.Result.Status == "completed" {
					return nil
				}
				if try == 500 {
					return fmt.Errorf("task %s still %s", id, g.Result.Status)
				}
				time.Sleep(5 * time.Millisecond)
			}
		})
		if r.errs > 0 {
			return 0, fmt.Errorf("%d failed lifecycles", r.errs)
		}
		return r.n, nil
	}
	for _, s := range sites { // warm up
		if _, err := lives(s.url, time.Second); err != nil {
			return nil, err
		}
	}
	var ratios []float64
	for range cfg.rounds {
		var per [2]time.Duration
		for i, s := range sites {
			m, err := meterCPU(s.p.cmd.Process.Pid)
			if err != nil {
				return nil, err
			}
			n, err := lives(s.url, cfg.duration)
			if err != nil {
				return nil, fmt.Errorf("tracing %s: %w", s.name, err)
			}
			used, err := m.used()
			if err != nil {
				return nil, err
			}
			s.n, s.cpu = s.n+n, s.cpu+used[0]
			per[i] = used[0] / time.Duration(max(n, 1))
		}
		ratios = append(ratios, float64(per[1])/float64(per[0]))
	}
	if exported.Load() == 0 {
		return nil, fmt.Errorf("the traced Caddy exported no spans")
	}
	us := func(s *site) string {
		return fmt.Sprintf("%.0f µs", float64(s.cpu/time.Duration(max(s.n, 1)))/float64(time.Microsecond))
	}
	ratio := float64(sites[1].cpu/time.Duration(max(sites[1].n, 1))) / float64(sites[0].cpu/time.Duration(max(sites[0].n, 1)))
	return []row{{
		measure: fmt.Sprintf("CPU of Caddy per task lifecycle (create + upstream call + completion + tasks/get until completed), tracing on (OTLP/HTTP export, every request sampled) vs off, %d clients, %d + %d lifecycles, %d rounds", clients, sites[1].n, sites[0].n, len(ratios)),
		result:  fmt.Sprintf("%s vs %s (%.2f×, %s)", us(sites[1]), us(sites[0]), ratio, spread(ratios)),
		target:  "report", informational: true,
	}}, nil
}
