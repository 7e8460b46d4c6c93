package main

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"time"
)

// respondTasks is how many finished tasks the clients poll: a working set
// that the gateway's view cache (2 MiB, about 5000 tasks) holds. The poll
// measurement reads 100000, mostly from the store.
const respondTasks = 4000

// benchGetVsRespond measures tasks/get of finished tasks through the
// gateway against the ceiling of Caddy answering by itself: a second site
// of the same Caddy that answers the same request with `respond` and a body
// of exactly the bytes of a tasks/get answer. Same clients, same request,
// alternating A B A B; medians, and the spread of each round's ratio. Caddy
// logs as by default; with -silenced the row follows with its log silenced.
func benchGetVsRespond(cfg config) ([]row, error) {
	rows, err := getVsRespond(cfg, logDefault, "")
	if err != nil || !cfg.silenced {
		return rows, err
	}
	quiet, err := getVsRespond(cfg, logSilenced, " (log silenced)")
	return append(rows, quiet...), err
}

// getVsRespond measures the row with Caddy's global log option logging;
// label marks the row.
func getVsRespond(cfg config, logging, label string) ([]row, error) {
	up, err := startUpstream()
	if err != nil {
		return nil, err
	}
	defer up.srv.Close()
	store := filepath.Join(cfg.work, "respond-store")
	ids, err := fillStore(store, min(cfg.tasks, respondTasks))
	if err != nil {
		return nil, err
	}
	gateway := func(port int) string {
		return fmt.Sprintf("http://:%d {\n\tbind 127.0.0.1\n\tmcp_tasks /mcp* {\n\t\tstorage_dir %s\n\t\trate_limit -1\n\t}\n\treverse_proxy /mcp* %s\n}", port, store, up.addr)
	}
	headers := map[string]string{"Mcp-Protocol-Version": "2025-11-25"}
	getBody := func(id string) []byte {
		return fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":%q}}`, id)
	}

	// One real answer, from a Caddy serving the gateway alone: its bytes
	// are what the respond site answers.
	portA := freePort()
	p, err := startCaddy(cfg.caddy, cfg.work, gateway(portA), portA)
	if err != nil {
		return nil, err
	}
	answer, err := post(newClient(1), fmt.Sprintf("http://127.0.0.1:%d/mcp", portA), getBody(ids[0]), headers)
	p.stop()
	if err != nil {
		return nil, fmt.Errorf("a first tasks/get: %w", err)
	}
	if !bytes.Contains(answer, []byte(`"status":"completed"`)) || bytes.ContainsRune(answer, '`') {
		return nil, fmt.Errorf("unexpected tasks/get answer: %s", answer)
	}

	portA, portB := freePort(), freePort()
	sites := gateway(portA) + fmt.Sprintf("\nhttp://:%d {\n\tbind 127.0.0.1\n\theader Content-Type application/json\n\trespond `%s` 200\n}", portB, answer)
	p, err = startCaddyLogging(cfg.caddy, cfg.work, sites, logging, portA, portB)
	if err != nil {
		return nil, err
	}
	defer p.stop()
	const clients = 16
	c := newClient(clients)
	urlA, urlB := fmt.Sprintf("http://127.0.0.1:%d/mcp", portA), fmt.Sprintf("http://127.0.0.1:%d/mcp", portB)
	got, err := post(c, urlB, getBody(ids[0]), headers)
	if err != nil {
		return nil, fmt.Errorf("asking the respond site: %w", err)
	}
	if !bytes.Equal(got, answer) {
		return nil, fmt.Errorf("the respond site answers %q, not the tasks/get answer %q", got, answer)
	}
	measure := func(url string, d time.Duration) result {
		return closedLoop(clients, d, func(int, int) error {
			data, err := post(c, url, getBody(ids[rand.IntN(len(ids))]), headers)
			if err == nil && len(data) != len(answer) {
				err = fmt.Errorf("answer of %d bytes, want %d: %s", len(data), len(answer), data)
			}
			return err
		})
	}
	measure(urlA, time.Second)
	measure(urlB, time.Second)
	var rateA, rateB, p50A, p50B, ratios, cpuA, cpuB, cpuRatios []float64
	pid := p.cmd.Process.Pid
	// metered measures through url, and Caddy's CPU per request (µs).
	metered := func(url string) (result, float64, error) {
		m, err := meterCPU(pid)
		if err != nil {
			return result{}, 0, err
		}
		r := measure(url, cfg.duration)
		used, err := m.used()
		if err != nil || r.n == 0 {
			return r, 0, err
		}
		return r, float64(used[0]) / float64(time.Microsecond) / float64(r.n), nil
	}
	for round := range cfg.rounds {
		var profiled <-chan struct{}
		if round == 0 {
			profiled = p.profile(cfg.profiles, "get-vs-respond"+strings.ReplaceAll(label, " ", "-"), cfg.duration)
		}
		a, ca, err := metered(urlA)
		if profiled != nil {
			<-profiled
		}
		if err != nil {
			return nil, err
		}
		if round == 0 { // the respond phase too, to set the two side by side
			profiled = p.profile(cfg.profiles, "respond"+strings.ReplaceAll(label, " ", "-"), cfg.duration)
		}
		b, cb, err := metered(urlB)
		if profiled != nil {
			<-profiled
		}
		if err != nil {
			return nil, err
		}
		if a.errs+b.errs > 0 {
			return nil, fmt.Errorf("tasks/get vs respond: %d and %d errors", a.errs, b.errs)
		}
		cpuA, cpuB = append(cpuA, ca), append(cpuB, cb)
		if cb > 0 {
			cpuRatios = append(cpuRatios, ca/cb)
		}
		rateA, rateB = append(rateA, a.rate()), append(rateB, b.rate())
		ratios = append(ratios, a.rate()/b.rate())
		p50A, p50B = append(p50A, float64(a.pct(0.5))), append(p50B, float64(b.pct(0.5)))
	}
	ra, rb := median(rateA), median(rateB)
	ratio := ra / rb
	return []row{{
		measure: fmt.Sprintf("tasks/get of a finished task%s (%d finished tasks polled at random, %d B answer): req/s through the gateway vs Caddy `respond` of the same bytes, %d clients, %d rounds A B, medians",
			label, len(ids), len(answer), clients, len(rateA)),
		result: fmt.Sprintf("%.0f vs %.0f (ratio %.2f, %s); p50 %s vs %s", ra, rb, ratio, spread(ratios),
			ms(time.Duration(median(p50A))), ms(time.Duration(median(p50B)))),
		target: "ratio ≥ 0.9", met: ratio >= 0.9,
	}, {
		measure: fmt.Sprintf("CPU of Caddy per request of the row above%s: tasks/get through the gateway vs `respond`, medians of the rounds", label),
		result:  fmt.Sprintf("%.1f µs vs %.1f µs (%.2f×, %s)", median(cpuA), median(cpuB), median(cpuA)/median(cpuB), spread(cpuRatios)),
		target:  "report", informational: true,
	}}, nil
}
