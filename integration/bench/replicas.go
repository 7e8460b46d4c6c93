package main

import (
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// measureThree measures creates, then tasks/get, through three replicas
// behind a round-robin Caddy.
func measureThree(cfg config, newDB func(string) (string, error), upstream string) (creates, gets result, err error) {
	dsn, err := newDB("bench_three")
	if err != nil {
		return result{}, result{}, err
	}
	url, _, stop, err := pgReplicas(cfg, dsn, upstream, 3)
	if err != nil {
		return result{}, result{}, err
	}
	defer stop()
	create := newCreator(url)
	if _, err := create.run(time.Second); err != nil {
		return result{}, result{}, err
	}
	if creates, err = create.run(cfg.duration); err != nil {
		return result{}, result{}, err
	}
	get := newGetter(url, create.taskIDs())
	_, _ = get(time.Second)
	gets, err = get(cfg.duration)
	return creates, gets, err
}

// startBadgerReference starts one Caddy on the Badger store, with
// sync_writes on so that a create is as durable: the reference of the
// tasks/get row. It returns the MCP endpoint.
func startBadgerReference(cfg config, upstream string) (string, *caddyProc, func(), error) {
	port := freePort()
	site := fmt.Sprintf("http://:%d {\n\tbind 127.0.0.1\n\tmcp_tasks /mcp* {\n\t\tstorage_dir %s\n\t\tsync_writes on\n\t\tmax_active_per_principal -1\n\t\trate_limit -1\n\t}\n\treverse_proxy /mcp* %s\n}",
		port, filepath.Join(cfg.work, "pg-badger-reference"), upstream)
	p, err := startCaddy(cfg.caddy, cfg.work, site, port)
	if err != nil {
		return "", nil, nil, err
	}
	var once sync.Once
	return fmt.Sprintf("http://127.0.0.1:%d/mcp", port), p, func() { once.Do(p.stop) }, nil
}

// pgReplicas starts n Caddy processes, each a gateway on the PostgreSQL
// store of dsn, and for n > 1 a Caddy balancing round robin in front; it
// returns the MCP endpoint clients use, the replicas' processes, and a
// function that stops them all (once).
func pgReplicas(cfg config, dsn, upstream string, n int) (string, []*caddyProc, func(), error) {
	var procs []*caddyProc
	var once sync.Once
	stop := func() {
		once.Do(func() {
			for _, p := range procs {
				p.stop()
			}
		})
	}
	var backends []string
	for range n {
		port := freePort()
		site := fmt.Sprintf("http://:%d {\n\tbind 127.0.0.1\n\tmcp_tasks /mcp* {\n\t\tstorage postgres {\n\t\t\tdsn `%s`\n\t\t\tmax_conns 16\n\t\t}\n\t\tmax_active_per_principal -1\n\t\trate_limit -1\n\t}\n\treverse_proxy /mcp* %s\n}",
			port, dsn, upstream)
		p, err := startCaddy(cfg.caddy, cfg.work, site, port)
		if err != nil {
			stop()
			return "", nil, nil, err
		}
		procs = append(procs, p)
		backends = append(backends, fmt.Sprintf("127.0.0.1:%d", port))
	}
	replicas := procs[:n:n]
	front := backends[0]
	if n > 1 {
		port := freePort()
		site := fmt.Sprintf("http://:%d {\n\tbind 127.0.0.1\n\treverse_proxy %s {\n\t\tlb_policy round_robin\n\t\tflush_interval -1\n\t}\n}", port, strings.Join(backends, " "))
		p, err := startCaddy(cfg.caddy, cfg.work, site, port)
		if err != nil {
			stop()
			return "", nil, nil, err
		}
		procs = append(procs, p)
		front = fmt.Sprintf("127.0.0.1:%d", port)
	}
	return "http://" + front + "/mcp", replicas, stop, nil
}

// creator creates tasks through an endpoint, and keeps their ids.
type creator struct {
	client *http.Client
	url    string
	mu     sync.Mutex
	ids    []string
}

func newCreator(url string) *creator { return &creator{client: newClient(pgClients), url: url} }

var (
	createBody   = []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fast","arguments":{"a":"benchmark"},"task":{"ttl":600000}}}`)
	v2025Headers = map[string]string{"Mcp-Protocol-Version": "2025-11-25"}
)

// run measures task creation for d.
func (c *creator) run(d time.Duration) (result, error) {
	r := closedLoop(pgClients, d, func(int, int) error {
		id, err := postCreate(c.client, c.url, createBody, v2025Headers)
		if err != nil {
			return err
		}
		c.mu.Lock()
		c.ids = append(c.ids, id)
		c.mu.Unlock()
		return nil
	})
	if r.errs > 0 {
		return r, fmt.Errorf("%d failed creates", r.errs)
	}
	return r, nil
}

// taskIDs returns the ids of the tasks created so far.
func (c *creator) taskIDs() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.ids)
}

// newGetter returns the measurement of tasks/get of random tasks among ids
// through url.
func newGetter(url string, ids []string) func(d time.Duration) (result, error) {
	c := newClient(pgClients)
	get := func(int, int) error {
		body := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":%q}}`, ids[rand.IntN(len(ids))])
		data, err := post(c, url, body, v2025Headers)
		if err == nil && !strings.Contains(string(data), `"status"`) {
			err = fmt.Errorf("not a task: %s", data)
		}
		return err
	}
	return func(d time.Duration) (result, error) {
		if len(ids) == 0 {
			return result{}, fmt.Errorf("no tasks to get")
		}
		r := closedLoop(pgClients, d, get)
		if r.errs > 0 {
			return r, fmt.Errorf("%d failed tasks/get", r.errs)
		}
		return r, nil
	}
}
