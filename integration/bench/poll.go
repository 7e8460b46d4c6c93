package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/badgerstore"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// benchPollAndMemory fills a store with cfg.tasks finished tasks, then
// measures tasks/get against it, a bare reverse_proxy round trip in the same
// process, and the resident memory of the gateway idle, with the tasks, and
// of a Caddy without the gateway.
func benchPollAndMemory(cfg config) ([]row, error) {
	up, err := startUpstream()
	if err != nil {
		return nil, err
	}
	defer up.srv.Close()

	bare, err := idleRSS(cfg, fmt.Sprintf("reverse_proxy /mcp* %s", up.addr))
	if err != nil {
		return nil, err
	}
	idle, err := idleRSS(cfg, fmt.Sprintf("mcp_tasks /mcp* {\n\t\tstorage_dir %s\n\t}\n\treverse_proxy /mcp* %s", filepath.Join(cfg.work, "idle-store"), up.addr))
	if err != nil {
		return nil, err
	}

	store := filepath.Join(cfg.work, "poll-store")
	ids, err := fillStore(store, cfg.tasks)
	if err != nil {
		return nil, err
	}
	portA, portB := freePort(), freePort()
	sites := fmt.Sprintf(`http://:%d {
	bind 127.0.0.1
	mcp_tasks /mcp* {
		storage_dir %s
		rate_limit -1
	}
	reverse_proxy /mcp* %s
}
http://:%d {
	bind 127.0.0.1
	reverse_proxy /mcp* %s
}`, portA, store, up.addr, portB, up.addr)
	p, err := startCaddy(cfg.caddy, cfg.work, sites, portA, portB)
	if err != nil {
		return nil, err
	}
	defer p.stop()
	const clients = 16
	c := newClient(clients)
	urlA, urlB := fmt.Sprintf("http://127.0.0.1:%d/mcp", portA), fmt.Sprintf("http://127.0.0.1:%d/mcp", portB)
	headers := map[string]string{"Mcp-Protocol-Version": "2025-11-25"}
	get := func(int, int) error {
		body := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":%q}}`, ids[rand.IntN(len(ids))])
		_, err := post(c, urlA, body, headers)
		return err
	}
	proxied := func(int, int) error {
		_, err := post(c, urlB, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), headers)
		return err
	}
	closedLoop(clients, time.Second, get)
	closedLoop(clients, time.Second, proxied)
	profiled := p.profile(cfg.profiles, "poll", cfg.duration)
	polls := closedLoop(clients, cfg.duration, get)
	<-profiled
	rp := closedLoop(clients, cfg.duration, proxied)
	if polls.errs > 0 {
		return nil, fmt.Errorf("%d failed tasks/get", polls.errs)
	}
	full := p.rss()
	mem, err := p.memoryNow(cfg.profiles, "retained-heap")
	if err != nil {
		return nil, err
	}
	ratio := polls.rate() / rp.rate()
	mib := func(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
	return []row{
		{measure: fmt.Sprintf("polling: tasks/get req/s and p99, store of %d tasks, vs a bare reverse_proxy round trip", len(ids)),
			result: fmt.Sprintf("%.0f req/s, p99 %s vs %.0f req/s (%.2f×)", polls.rate(), ms(polls.pct(0.99)), rp.rate(), ratio),
			target: "≥ 20k/s or ≥ 3× reverse_proxy", met: polls.rate() >= 20000 || ratio >= 3},
		{measure: "memory: RSS idle, gateway vs Caddy without it",
			result: fmt.Sprintf("%s vs %s (+%s)", mib(idle), mib(bare), mib(idle-bare)), target: "≤ 64 MiB above", met: idle-bare <= 64<<20},
		{measure: fmt.Sprintf("memory: RSS with %d retained tasks (after polling them), vs Caddy without the gateway", len(ids)),
			result: fmt.Sprintf("%s vs %s (+%s)", mib(full), mib(bare), mib(full-bare)), target: "≤ 64 MiB above", met: full-bare <= 64<<20},
		{measure: fmt.Sprintf("memory with %d retained tasks, after polling them: Caddy's live Go heap after a forced collection; its resident memory by kind", len(ids)),
			result: fmt.Sprintf("heap %s; resident %s anonymous (the heap, garbage not yet returned, stacks) + %s file-backed (the binary, Badger's mapped tables and logs)", mib(mem.heap), mib(mem.anon), mib(mem.file)),
			target: "report", informational: true},
	}, nil
}

// idleRSS starts Caddy with one site holding handlers, sends it a few
// requests and returns its resident memory.
func idleRSS(cfg config, handlers string) (int64, error) {
	port := freePort()
	p, err := startCaddy(cfg.caddy, cfg.work, fmt.Sprintf("http://:%d {\n\tbind 127.0.0.1\n\t%s\n}", port, handlers), port)
	if err != nil {
		return 0, err
	}
	defer p.stop()
	c := newClient(1)
	for range 200 {
		if _, err := post(c, fmt.Sprintf("http://127.0.0.1:%d/mcp", port), []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), nil); err != nil {
			return 0, err
		}
	}
	time.Sleep(time.Second)
	return p.rss(), nil
}

// fillStore writes n finished tasks of the anonymous principal.
func fillStore(dir string, n int) ([]string, error) {
	s, err := badgerstore.Open(badgerstore.Options{Dir: dir})
	if err != nil {
		return nil, err
	}
	defer s.Close()
	ids := make([]string, 0, n)
	for range n {
		t := sampleTask("")
		t.Lease = task.Lease{}
		t.Status, t.Result = task.StatusCompleted, []byte(`{"content":[{"type":"text","text":"done"}]}`)
		if err := s.Create(context.Background(), t); err != nil {
			return nil, err
		}
		ids = append(ids, t.ID)
	}
	return ids, nil
}
