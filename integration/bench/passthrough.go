package main

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// benchPassThrough compares mcp_tasks + reverse_proxy with reverse_proxy
// alone, same binary, same process, same upstream, alternating A B A B.
func benchPassThrough(cfg config) ([]row, error) {
	up, err := startUpstream()
	if err != nil {
		return nil, err
	}
	defer up.srv.Close()
	portA, portB := freePort(), freePort()
	sites := fmt.Sprintf(`http://:%d {
	bind 127.0.0.1
	mcp_tasks /mcp* {
		storage_dir %s
	}
	reverse_proxy /mcp* %s
}
http://:%d {
	bind 127.0.0.1
	reverse_proxy /mcp* %s
}`, portA, filepath.Join(cfg.work, "pass-store"), up.addr, portB, up.addr)
	p, err := startCaddy(cfg.caddy, cfg.work, sites, portA, portB)
	if err != nil {
		return nil, err
	}
	defer p.stop()

	headers := map[string]string{"Mcp-Protocol-Version": "2025-11-25"}
	kinds := []struct{ name, body string }{
		{"tools/list", `{"jsonrpc":"2.0","id":1,"method":"tools/list"}`},
		{"fast tools/call", `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fast","arguments":{}}}`},
	}
	const clients = 8
	var rows []row
	for _, k := range kinds {
		c := newClient(clients)
		urlA, urlB := fmt.Sprintf("http://127.0.0.1:%d/mcp", portA), fmt.Sprintf("http://127.0.0.1:%d/mcp", portB)
		measure := func(url string, d time.Duration) result {
			return closedLoop(clients, d, func(int, int) error {
				_, err := post(c, url, []byte(k.body), headers)
				return err
			})
		}
		measure(urlA, time.Second) // warm up both paths
		measure(urlB, time.Second)
		var rateA, rateB, p50A, p50B, p99A, p99B, ratios []float64
		for round := range cfg.rounds {
			var profiled <-chan struct{}
			if round == 0 {
				profiled = p.profile(cfg.profiles, "passthrough-"+strings.ReplaceAll(k.name, "/", "-"), cfg.duration)
			}
			a := measure(urlA, cfg.duration)
			if profiled != nil {
				<-profiled
			}
			b := measure(urlB, cfg.duration)
			if a.errs+b.errs > 0 {
				return nil, fmt.Errorf("%s: %d and %d errors", k.name, a.errs, b.errs)
			}
			rateA, rateB = append(rateA, a.rate()), append(rateB, b.rate())
			ratios = append(ratios, a.rate()/b.rate())
			p50A, p50B = append(p50A, float64(a.pct(0.5))), append(p50B, float64(b.pct(0.5)))
			p99A, p99B = append(p99A, float64(a.pct(0.99))), append(p99B, float64(b.pct(0.99)))
		}
		ra, rb := median(rateA), median(rateB)
		added := time.Duration(median(p50A) - median(p50B))
		rows = append(rows,
			row{measure: "pass-through " + k.name + ": req/s, gateway vs reverse_proxy alone",
				result: fmt.Sprintf("%.0f vs %.0f (ratio %.3f, %s)", ra, rb, ra/rb, spread(ratios)), target: "ratio ≥ 0.97", met: ra/rb >= 0.97},
			row{measure: "pass-through " + k.name + ": p50 / p99 latency",
				result: fmt.Sprintf("%s / %s vs %s / %s (p50 +%dµs)", ms(time.Duration(median(p50A))), ms(time.Duration(median(p99A))),
					ms(time.Duration(median(p50B))), ms(time.Duration(median(p99B))), added.Microseconds()),
				target: "≤ 50 µs added at p50", met: added <= 50*time.Microsecond},
		)
	}
	return rows, nil
}

func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	return s[len(s)/2]
}
