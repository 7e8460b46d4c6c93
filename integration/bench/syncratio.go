package main

import (
	"fmt"
	"path/filepath"
	"time"
)

// benchSyncRatio measures durable task creation with sync_writes on against
// off: two sites of one Caddy, each with its own store, the same 64 clients
// and calls, alternating A B A B; medians. Group commit (one fsync per batch
// of concurrent writes) is what should make the two close.
func benchSyncRatio(cfg config) ([]row, error) {
	const clients = 64
	up, err := startUpstream()
	if err != nil {
		return nil, err
	}
	defer up.srv.Close()
	site := func(port int, store, sync string) string {
		return fmt.Sprintf("http://:%d {\n\tbind 127.0.0.1\n\tmcp_tasks /mcp* {\n\t\tstorage_dir %s\n\t\tsync_writes %s\n\t\tmax_active_per_principal -1\n\t\trate_limit -1\n\t}\n\treverse_proxy /mcp* %s\n}\n",
			port, filepath.Join(cfg.work, store), sync, up.addr)
	}
	portOn, portOff := freePort(), freePort()
	p, err := startCaddy(cfg.caddy, cfg.work, site(portOn, "sync-on-store", "on")+site(portOff, "sync-off-store", "off"), portOn, portOff)
	if err != nil {
		return nil, err
	}
	defer p.stop()
	c := newClient(clients)
	body := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fast","arguments":{"a":"benchmark"},"task":{"ttl":600000}}}`)
	headers := map[string]string{"Mcp-Protocol-Version": "2025-11-25"}
	measure := func(url string, d time.Duration) result {
		return closedLoop(clients, d, func(int, int) error {
			_, err := postCreate(c, url, body, headers)
			return err
		})
	}
	urlOn, urlOff := fmt.Sprintf("http://127.0.0.1:%d/mcp", portOn), fmt.Sprintf("http://127.0.0.1:%d/mcp", portOff)
	measure(urlOn, time.Second)
	measure(urlOff, time.Second)
	var on, off, ratios []float64
	for round := range cfg.rounds {
		var profiled <-chan struct{}
		if round == 0 {
			profiled = p.profile(cfg.profiles, "create-sync-on", cfg.duration)
		}
		a := measure(urlOn, cfg.duration)
		if profiled != nil {
			<-profiled
		}
		b := measure(urlOff, cfg.duration)
		if a.errs+b.errs > 0 {
			return nil, fmt.Errorf("durable create: %d and %d failed creates", a.errs, b.errs)
		}
		on, off = append(on, a.rate()), append(off, b.rate())
		ratios = append(ratios, a.rate()/b.rate())
	}
	ratio := median(on) / median(off)
	return []row{{
		measure: fmt.Sprintf("durable create (%d clients): tasks/s with sync_writes on vs off, two stores of one Caddy, %d rounds A B, medians", clients, len(on)),
		result:  fmt.Sprintf("%.0f vs %.0f (ratio %.2f, %s)", median(on), median(off), ratio, spread(ratios)),
		target:  "ratio ≥ 0.9", met: ratio >= 0.9,
	}}, nil
}
