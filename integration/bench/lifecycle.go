package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// benchLifecycleCPU measures the CPU time Caddy spends on one task's whole
// life (the create, the call to the upstream, storing its completion, and
// one tasks/get of the finished task) against one pass-through tools/call
// through the same site, from /proc/<pid>/stat (utime+stime) before and
// after each phase divided by its operations. The upstream runs in a
// process of its own and is reported apart. Phases alternate, and each
// kind's CPU and operations are summed over the rounds; the spread is that
// of each round's ratio. Caddy logs as by default; with -silenced the same
// rows follow with its log silenced.
//
// The tool called answers with JSON. The same rows follow with a tool that
// answers as an event stream, as the MCP SDKs' servers (go-sdk,
// TypeScript) answer a tools/call by default: a pass-through then also
// streams the answer through Caddy, and the gateway decodes it event by
// event.
func benchLifecycleCPU(cfg config) ([]row, error) {
	rows, err := lifecycleCPU(cfg, logDefault, "", "fast")
	if err != nil {
		return rows, err
	}
	streamed, err := lifecycleCPU(cfg, logDefault, " (the upstream answering as an event stream)", "fast_stream")
	if rows = append(rows, streamed...); err != nil || !cfg.silenced {
		return rows, err
	}
	quiet, err := lifecycleCPU(cfg, logSilenced, " (log silenced)", "fast")
	return append(rows, quiet...), err
}

// lifecycleCPU measures the lifecycle rows of calls of tool with Caddy's
// global log option logging; label marks the rows.
func lifecycleCPU(cfg config, logging, label, tool string) ([]row, error) {
	const clients = 32
	up, err := startUpstreamProc()
	if err != nil {
		return nil, err
	}
	defer up.stop()
	port := freePort()
	sites := fmt.Sprintf("http://:%d {\n\tbind 127.0.0.1\n\tmcp_tasks /mcp* {\n\t\tstorage_dir %s\n\t\tmax_active_per_principal -1\n\t\tmax_finished_per_principal -1\n\t\trate_limit -1\n\t}\n\treverse_proxy /mcp* %s\n}",
		port, filepath.Join(cfg.work, "lifecycle-store"+strings.ReplaceAll(label, " ", "-")), up.addr)
	p, err := startCaddyLogging(cfg.caddy, cfg.work, sites, logging, port)
	if err != nil {
		return nil, err
	}
	defer p.stop()
	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	c := newClient(clients)
	headers := map[string]string{"Mcp-Protocol-Version": "2025-11-25"}
	createBody := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":%q,"arguments":{"a":"benchmark"},"task":{"ttl":600000}}}`, tool)
	plainBody := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":%q,"arguments":{"a":"benchmark"}}}`, tool)

	// lifecycles creates tasks for d, then reads each once it has finished
	// with one tasks/get; it returns how many tasks lived and how many
	// extra reads found one not finished yet.
	lifecycles := func(d time.Duration) (int, int, error) {
		var mu sync.Mutex
		var ids []string
		r := closedLoop(clients, d, func(int, int) error {
			id, err := postCreate(c, url, createBody, headers)
			if err != nil {
				return err
			}
			mu.Lock()
			ids = append(ids, id)
			mu.Unlock()
			return nil
		})
		if r.errs > 0 {
			return 0, 0, fmt.Errorf("%d failed creates", r.errs)
		}
		next, extra := make(chan string, len(ids)), 0
		for _, id := range ids {
			next <- id
		}
		close(next)
		var wg sync.WaitGroup
		var getErr error
		for range clients {
			wg.Go(func() {
				for id := range next {
					body := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":%q}}`, id)
					for try := 0; ; try++ {
						data, err := post(c, url, body, headers)
						var m struct{ Result struct{ Status string } }
						if err == nil && json.Unmarshal(data, &m) != nil {
							err = fmt.Errorf("not a task: %s", data)
						}
						if err == nil && m.Result.Status != "completed" && try < 500 {
							mu.Lock()
							extra++
							mu.Unlock()
							time.Sleep(10 * time.Millisecond)
							continue
						}
						if err == nil && m.Result.Status != "completed" {
							err = fmt.Errorf("task %s still %s", id, m.Result.Status)
						}
						if err != nil {
							mu.Lock()
							getErr = err
							mu.Unlock()
						}
						break
					}
				}
			})
		}
		wg.Wait()
		return len(ids), extra, getErr
	}
	passes := func(d time.Duration) (int, error) {
		r := closedLoop(clients, d, func(int, int) error {
			_, err := post(c, url, plainBody, headers)
			return err
		})
		if r.errs > 0 {
			return 0, fmt.Errorf("%d failed pass-through calls", r.errs)
		}
		return r.n, nil
	}
	if _, _, err := lifecycles(time.Second); err != nil { // warm up
		return nil, err
	}
	if _, err := passes(time.Second); err != nil {
		return nil, err
	}
	var lifeN, passN, extra int
	var lifeCPU, passCPU [2]time.Duration // Caddy, upstream
	var lifeAlloc, passAlloc [2]uint64    // Caddy's allocations: objects, bytes
	// allocs runs phase and adds what Caddy allocated during it to sum.
	allocs := func(sum *[2]uint64, phase func() error) error {
		o0, b0, err := p.allocated()
		if err != nil {
			return err
		}
		if err := phase(); err != nil {
			return err
		}
		o1, b1, err := p.allocated()
		if err != nil {
			return err
		}
		sum[0], sum[1] = sum[0]+o1-o0, sum[1]+b1-b0
		return nil
	}
	var ratios []float64 // Caddy's, per round
	var logBytes int64   // written during the lifecycles
	pids := []int{p.cmd.Process.Pid, up.cmd.Process.Pid}
	per := func(d time.Duration, n int) time.Duration { return d / time.Duration(max(n, 1)) }
	profileName := "lifecycle" + strings.ReplaceAll(label, " ", "-")
	for round := range cfg.rounds {
		var profiled <-chan struct{}
		if round == 0 {
			profiled = p.profile(cfg.profiles, profileName, cfg.duration)
		}
		logBefore := p.logSize()
		m, err := meterCPU(pids...)
		if err != nil {
			return nil, err
		}
		var n, x int
		if err := allocs(&lifeAlloc, func() (err error) {
			n, x, err = lifecycles(cfg.duration)
			return err
		}); err != nil {
			return nil, err
		}
		used, err := m.used()
		if err != nil {
			return nil, err
		}
		logBytes += p.logSize() - logBefore
		if profiled != nil {
			<-profiled
		}
		lifeN, extra = lifeN+n, extra+x
		lifeCPU[0], lifeCPU[1] = lifeCPU[0]+used[0], lifeCPU[1]+used[1]
		roundLife := per(used[0], n)

		if round == 0 { // the same profile of the pass-through, to compare
			profiled = p.profile(cfg.profiles, profileName+"-passthrough", cfg.duration)
		}
		if m, err = meterCPU(pids...); err != nil {
			return nil, err
		}
		if err := allocs(&passAlloc, func() (err error) {
			n, err = passes(cfg.duration)
			return err
		}); err != nil {
			return nil, err
		}
		if used, err = m.used(); err != nil {
			return nil, err
		}
		if profiled != nil {
			<-profiled
		}
		passN += n
		passCPU[0], passCPU[1] = passCPU[0]+used[0], passCPU[1]+used[1]
		ratios = append(ratios, float64(roundLife)/float64(per(used[0], n)))
	}
	perOp := func(total uint64, n int) float64 { return float64(total) / float64(max(n, 1)) }
	us := func(d time.Duration) string { return fmt.Sprintf("%.0f µs", float64(d)/float64(time.Microsecond)) }
	ratio := float64(per(lifeCPU[0], lifeN)) / float64(per(passCPU[0], passN))
	upRatio := float64(per(lifeCPU[1], lifeN)) / float64(per(passCPU[1], passN))
	return []row{
		{measure: fmt.Sprintf("CPU of Caddy per task lifecycle (create + upstream call + completion + one tasks/get) vs per pass-through tools/call%s, same site, %d clients, %d + %d operations, %d rounds", label, clients, lifeN, passN, len(ratios)),
			result: fmt.Sprintf("%s vs %s (%.2f×, %s; %d extra tasks/get of unfinished tasks; %.0f B of log per lifecycle)", us(per(lifeCPU[0], lifeN)), us(per(passCPU[0], passN)), ratio, spread(ratios), extra,
				float64(logBytes)/float64(max(lifeN, 1))),
			target: "≤ 2.5×", met: ratio <= 2.5},
		{measure: "allocations of Caddy (Go's memstats) per task lifecycle vs per pass-through tools/call" + label,
			result: fmt.Sprintf("%.0f objects, %.1f KB vs %.0f objects, %.1f KB", perOp(lifeAlloc[0], lifeN), perOp(lifeAlloc[1], lifeN)/1000,
				perOp(passAlloc[0], passN), perOp(passAlloc[1], passN)/1000),
			target: "report", informational: true},
		{measure: "CPU of the upstream (its own process) per task lifecycle vs per pass-through tools/call" + label,
			result: fmt.Sprintf("%s vs %s (%.2f×)", us(per(lifeCPU[1], lifeN)), us(per(passCPU[1], passN)), upRatio),
			target: "report", informational: true},
	}, nil
}
