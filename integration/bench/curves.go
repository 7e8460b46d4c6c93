package main

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/auth"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/badgerstore"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

// The curves measure how the gateway's cost grows with the work it holds:
// finished tasks retained in the store, and tasks running at once. Each
// prints a row per size and rows comparing the largest size with the
// smallest against their goals.

// polledTasks is how many of a retained store's finished tasks belong to
// the caller the bench polls: the same at every size, and more
// than the gateway's view cache holds (about 5000), so most reads go to the
// store. The rest belong to other principals (at most
// task.DefaultMaxFinished each), as a store of many users holds them.
const polledTasks = 10_000

// The retained curve's caller is a named principal, since tasks/list
// answers only callers who are: the header benchHeader names it, under the
// trust domain benchTrustDomain.
const (
	benchHeader      = "X-Bench-Principal"
	benchPrincipal   = "bench"
	benchTrustDomain = "bench"
	benchDirective   = "\t\tprincipal {http.request.header." + benchHeader + "}\n\t\ttrust_domain " + benchTrustDomain + "\n"
)

// benchOwner is the owner key the gateway gives the bench's principal: as
// caddymodule derives it for a principal placeholder (the trust domain
// named after the configured one and the placeholder), so that tasks the
// bench writes into the store are that caller's. A mismatch shows as
// tasks/get answering "not found", which the bench counts as a failure.
func benchOwner() string {
	h := sha256.New()
	for _, f := range []string{"pd1", benchTrustDomain, "{http.request.header." + benchHeader + "}"} {
		h.Write([]byte(strconv.Itoa(len(f)) + ":" + f))
	}
	return auth.Principal{TrustDomain: "principal:" + hex.EncodeToString(h.Sum(nil)[:16]), Subject: benchPrincipal}.Key()
}

// retainedOwners is how many principals own the rest of a retained store.
const retainedOwners = 1000

// parseSizes reads a comma-separated list of counts.
func parseSizes(s string) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("size %q: want a positive count", f)
		}
		out = append(out, n)
	}
	if len(out) == 0 {
		return nil, errors.New("no sizes")
	}
	return out, nil
}

// fillRetained writes n finished tasks into a Badger store at dir, and
// returns the ids of the bench principal's.
func fillRetained(dir string, n int) ([]string, error) {
	s, err := badgerstore.Open(badgerstore.Options{Dir: dir})
	if err != nil {
		return nil, fmt.Errorf("opening the store %s: %w", dir, err)
	}
	defer s.Close()
	return fillStoreWith(s, n)
}

// fillStoreWith writes n finished tasks into s through the store's API
// from 32 goroutines (its committer groups them), and returns the ids of
// the bench principal's.
func fillStoreWith(s task.Store, n int) ([]string, error) {
	polled := min(n, polledTasks)
	ids := make([]string, polled)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	const writers = 32
	for w := range writers {
		wg.Go(func() {
			for i := w; i < n; i += writers {
				t := sampleTask("")
				t.Lease = task.Lease{}
				t.TTL = 6 * time.Hour
				t.Status, t.Result = task.StatusCompleted, []byte(`{"content":[{"type":"text","text":"done"}]}`)
				t.Owner, t.Principal = benchOwner(), benchPrincipal
				if i >= polled {
					owner := fmt.Sprintf("bench-owner-%d", i%retainedOwners)
					t.Owner, t.Principal = owner, owner
				}
				if err := s.Create(context.Background(), t); err != nil {
					mu.Lock()
					first = cmpErr(first, fmt.Errorf("creating task %d of %d: %w", i, n, err))
					mu.Unlock()
					return
				}
				if i < polled {
					ids[i] = t.ID
				}
			}
		})
	}
	wg.Wait()
	return ids, first
}

func cmpErr(first, err error) error {
	if first != nil {
		return first
	}
	return err
}

// diskUsage is the space allocated to the files under dir.
func diskUsage(dir string) int64 {
	var total int64
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil //nolint:nilerr // an unreadable entry counts nothing
		}
		info, err := d.Info()
		if err != nil {
			return nil //nolint:nilerr // a file removed meanwhile counts nothing
		}
		total += allocated(info)
		return nil
	})
	return total
}

// retainedStore is one size of the retained curve: a Caddy serving a store
// of n finished tasks.
type retainedStore struct {
	n          int
	ids        []string
	disk       int64
	p          *caddyProc
	url        string
	gets, adds []float64
}

// retainedBackend is a store of the retained curve: prepare fills one of
// n finished tasks and returns the polled ids, the mcp_tasks lines that
// configure it, and the space it takes on disk.
type retainedBackend struct {
	name    string
	prepare func(n int) (ids []string, storage string, disk int64, err error)
}

// benchRetained is the retained curve on Badger, for each size of
// cfg.retained.
func benchRetained(cfg config) ([]row, error) {
	sizes, err := parseSizes(cfg.retained)
	if err != nil {
		return nil, fmt.Errorf("-retained: %w", err)
	}
	return retainedCurve(cfg, sizes, retainedBackend{name: "Badger", prepare: func(n int) ([]string, string, int64, error) {
		dir := filepath.Join(cfg.work, fmt.Sprintf("retained-%d", n))
		ids, err := fillRetained(dir, n)
		return ids, "storage_dir " + dir, diskUsage(dir), err
	}})
}

// retainedCurve measures tasks/get, creates and a tasks/list page against
// stores of b holding each size of finished tasks, one Caddy per size, all
// running at once and measured in alternating rounds; then each one's
// memory and disk per task.
func retainedCurve(cfg config, sizes []int, b retainedBackend) ([]row, error) {
	up, err := startUpstream()
	if err != nil {
		return nil, err
	}
	defer up.srv.Close()
	var stores []*retainedStore
	defer func() {
		for _, s := range stores {
			s.p.stop()
		}
	}()
	for _, n := range sizes {
		fmt.Fprintf(os.Stderr, "  filling a %s store with %d finished tasks…\n", b.name, n)
		ids, storage, disk, err := b.prepare(n)
		if err != nil {
			return nil, err
		}
		s := &retainedStore{n: n, ids: ids, disk: disk}
		port := freePort()
		site := fmt.Sprintf("http://:%d {\n\tbind 127.0.0.1\n\tmcp_tasks /mcp* {\n\t\t%s\n\t\trate_limit -1\n\t\tmax_active_per_principal -1\n%s\t}\n\treverse_proxy /mcp* %s\n}", port, storage, benchDirective, up.addr)
		if s.p, err = startCaddy(cfg.caddy, cfg.work, site, port); err != nil {
			return nil, err
		}
		s.url = fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
		stores = append(stores, s)
	}

	const clients = 16
	c := newClient(clients)
	headers := map[string]string{"Mcp-Protocol-Version": "2025-11-25", benchHeader: benchPrincipal}
	get := func(s *retainedStore) func(int, int) error {
		return func(int, int) error {
			body := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":%q}}`, s.ids[rand.IntN(len(s.ids))])
			data, err := post(c, s.url, body, headers)
			if err == nil && !bytes.Contains(data, []byte(`"status":"completed"`)) {
				err = fmt.Errorf("not a finished task: %s", data)
			}
			return err
		}
	}
	createBody := []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"fast","arguments":{"a":"benchmark"},"task":{"ttl":600000}}}`)
	create := func(s *retainedStore) func(int, int) error {
		return func(int, int) error {
			data, err := post(c, s.url, createBody, headers)
			if err == nil && !bytes.Contains(data, []byte(`"taskId"`)) {
				err = fmt.Errorf("not a CreateTaskResult: %s", data)
			}
			return err
		}
	}
	// Memory first, with the store holding its n tasks, once every
	// polled task has been read and Badger's compactions after the fill
	// are over (their table builders hold tens of MiB while they run).
	var mems []heldMemory
	for _, s := range stores {
		closedLoop(clients, 2*time.Second, get(s))
		mem, err := settled(s.p, cfg.profiles, fmt.Sprintf("retained-%d-heap", s.n))
		if err != nil {
			return nil, err
		}
		mems = append(mems, mem)
		closedLoop(clients, time.Second, create(s))
	}
	rounds := max(1, min(cfg.rounds, 3))
	for range rounds {
		for _, s := range stores {
			r := closedLoop(clients, cfg.duration, get(s))
			if r.errs > 0 {
				return nil, fmt.Errorf("%d failed tasks/get against %d tasks", r.errs, s.n)
			}
			s.gets = append(s.gets, r.rate())
		}
		for _, s := range stores {
			var profiled <-chan struct{}
			if len(s.adds) == 0 {
				profiled = s.p.profile(cfg.profiles, fmt.Sprintf("retained-%d-create", s.n), cfg.duration)
			}
			r := closedLoop(clients, cfg.duration, create(s))
			if profiled != nil {
				<-profiled
			}
			if r.errs > 0 {
				return nil, fmt.Errorf("%d failed creates against %d tasks", r.errs, s.n)
			}
			s.adds = append(s.adds, r.rate())
		}
	}

	kib := func(b float64) string { return fmt.Sprintf("%.2f KiB", b/1024) }
	mib := func(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }
	var rows []row
	for i, s := range stores {
		list := closedLoop(1, cfg.duration, func(int, int) error {
			data, err := post(c, s.url, []byte(`{"jsonrpc":"2.0","id":1,"method":"tasks/list","params":{}}`), headers)
			if err == nil && !bytes.Contains(data, []byte(`"nextCursor"`)) {
				err = fmt.Errorf("not a first page of many tasks: %.300s", data)
			}
			return err
		})
		if list.errs > 0 {
			return nil, fmt.Errorf("%d failed tasks/list against %d tasks", list.errs, s.n)
		}
		rows = append(rows, row{
			measure: fmt.Sprintf("retained %d finished tasks (%s; %d of them the polled caller's, the rest 1000 others'): tasks/get req/s, creates/s (16 clients, medians of %d alternating rounds), a tasks/list page p50 / p99, Caddy's resident memory: anonymous + file-backed (the binary; on Badger its mapped tables), and its Go heap, all once the heap holds still and before the creates; disk per task",
				s.n, b.name, len(s.ids), rounds),
			result: fmt.Sprintf("%.0f get/s, %.0f creates/s, list %s / %s, %s + %s (heap %s), %s per task",
				median(s.gets), median(s.adds), ms(list.pct(0.5)), ms(list.pct(0.99)), mib(mems[i].anon), mib(mems[i].file), mib(mems[i].heap), kib(float64(s.disk)/float64(s.n))),
			target: "report", informational: true,
		})
	}
	if len(stores) < 2 {
		return rows, nil
	}
	lo, hi := stores[0], stores[len(stores)-1]
	getRatio, addRatio := median(hi.gets)/median(lo.gets), median(hi.adds)/median(lo.adds)
	growth := func(f func(heldMemory) int64) float64 {
		return float64(f(mems[len(mems)-1])-f(mems[0])) / float64(hi.n-lo.n)
	}
	perTask := growth(func(m heldMemory) int64 { return m.anon })
	perTaskFile := growth(func(m heldMemory) int64 { return m.file })
	return append(rows,
		row{measure: fmt.Sprintf("retained curve (%s): tasks/get req/s at %d tasks ÷ at %d", b.name, hi.n, lo.n),
			result: fmt.Sprintf("%.2f", getRatio), target: "≥ 0.8", met: getRatio >= 0.8},
		row{measure: fmt.Sprintf("retained curve (%s): creates/s at %d tasks ÷ at %d", b.name, hi.n, lo.n),
			result: fmt.Sprintf("%.2f", addRatio), target: "≥ 0.8", met: addRatio >= 0.8},
		row{measure: fmt.Sprintf("retained curve (%s): Caddy's resident memory growth per retained task, %d → %d: the process's own (anonymous); beside it, mapped files (on Badger its tables: page cache the kernel reclaims)", b.name, lo.n, hi.n),
			result: fmt.Sprintf("%s per task; mapped files %s per task", kib(perTask), kib(perTaskFile)), target: "< 1 KiB", met: perTask < 1024},
	), nil
}

// settled waits until Caddy's live heap after a collection holds still
// (two readings a second apart within 2 MiB; at most 60 s) and returns it.
func settled(p *caddyProc, dir, name string) (heldMemory, error) {
	prev, err := p.memoryNow("", "")
	if err != nil {
		return prev, err
	}
	deadline := time.Now().Add(time.Minute)
	for {
		time.Sleep(time.Second)
		m, err := p.memoryNow(dir, name)
		if err != nil {
			return m, err
		}
		if d := m.heap - prev.heap; (d < 2<<20 && d > -2<<20) || time.Now().After(deadline) {
			return m, nil
		}
		prev = m
	}
}

// benchRunning measures Caddy's resident memory and goroutines per task
// running at once, for each size of cfg.running: tasks of the hold tool,
// whose upstream call lasts until it is cancelled, so every task holds its
// worker and its upstream call while measured. Each size has a Caddy and a
// store of its own; the figures are the growth over the same Caddy before
// the tasks, after a forced collection. The curve is measured twice: with
// reverse_proxy's default transport (HTTP/1.1, where every call in flight
// holds a connection of its own) and with an upstream reached over h2c
// (`transport http { versions h2c }`), where the calls share connections.
func benchRunning(cfg config) ([]row, error) {
	sizes, err := parseSizes(cfg.running)
	if err != nil {
		return nil, fmt.Errorf("-running: %w", err)
	}
	var rows []row
	for _, tr := range []upstreamTransport{transportHTTP1, transportH2C} {
		r, err := runningCurve(cfg, sizes, tr)
		if err != nil {
			return nil, fmt.Errorf("running curve over %s: %w", tr.name, err)
		}
		rows = append(rows, r...)
	}
	return rows, nil
}

// upstreamTransport is how Caddy's reverse_proxy reaches the upstream.
type upstreamTransport struct {
	name string
	// h2c makes the upstream serve HTTP/2 without TLS beside HTTP/1.1.
	h2c bool
	// proxy is the reverse_proxy directive's block, to the upstream at %s.
	proxy string
}

var (
	transportHTTP1 = upstreamTransport{name: "HTTP/1.1", proxy: "reverse_proxy /mcp* %s"}
	transportH2C   = upstreamTransport{name: "h2c", h2c: true,
		proxy: "reverse_proxy /mcp* h2c://%s {\n\t\ttransport http {\n\t\t\tversions h2c\n\t\t}\n\t}"}
)

// runningCurve measures the running curve's sizes with the upstream
// reached over tr.
func runningCurve(cfg config, sizes []int, tr upstreamTransport) ([]row, error) {
	up, err := startUpstreamOver(tr.h2c)
	if err != nil {
		return nil, err
	}
	defer up.srv.Close()
	type point struct {
		n int
		runningFigures
	}
	var points []point
	for _, n := range sizes {
		port := freePort()
		site := fmt.Sprintf("http://:%d {\n\tbind 127.0.0.1\n\tmcp_tasks /mcp* {\n\t\tstorage_dir %s\n\t\trate_limit -1\n\t\tmax_active_per_principal -1\n\t}\n\t"+tr.proxy+"\n}",
			port, filepath.Join(cfg.work, fmt.Sprintf("running-%s-%d", strings.ReplaceAll(tr.name, "/", ""), n)), up.addr)
		p, err := startCaddy(cfg.caddy, cfg.work, site, port)
		if err != nil {
			return nil, err
		}
		pt, err := runningPoint(cfg, p, up, fmt.Sprintf("http://127.0.0.1:%d/mcp", port), n, strings.ReplaceAll(tr.name, "/", ""))
		p.stop()
		if err != nil {
			return nil, err
		}
		points = append(points, point{n: n, runningFigures: pt})
	}
	var rows []row
	minGor, maxGor := points[0].gorPer, points[0].gorPer
	for _, pt := range points {
		rows = append(rows, row{
			measure: fmt.Sprintf("running curve, upstream over %s: %d tasks running at once (an upstream call that lasts), Caddy's growth per running task", tr.name, pt.n),
			result:  fmt.Sprintf("%.1f KiB resident (live heap %.1f KiB, goroutine stacks %.1f KiB), %.2f goroutines", pt.bytesPer/1024, pt.heapPer/1024, pt.stackPer/1024, pt.gorPer),
			target:  "≤ 16 KiB", met: pt.bytesPer <= 16<<10,
		})
		minGor, maxGor = min(minGor, pt.gorPer), max(maxGor, pt.gorPer)
	}
	bounded := maxGor <= minGor*1.1+0.1
	return append(rows, row{
		measure: fmt.Sprintf("running curve, upstream over %s: goroutines per running task, %d → %d tasks", tr.name, points[0].n, points[len(points)-1].n),
		result:  fmt.Sprintf("%.2f – %.2f", minGor, maxGor),
		target:  "bounded: the same at every size (within 10 %)", met: bounded,
	}), nil
}

// runningFigures are a running point's growth per task: resident bytes,
// of which live heap and goroutine stacks, and goroutines.
type runningFigures struct{ bytesPer, heapPer, stackPer, gorPer float64 }

// runningPoint starts n hold tasks on the Caddy p serves at url, waits
// until the upstream holds every call, and returns the growth per task.
func runningPoint(cfg config, p *caddyProc, up *trivialUpstream, url string, n int, transport string) (runningFigures, error) {
	c := newClient(64)
	headers := map[string]string{"Mcp-Protocol-Version": "2025-11-25"}
	for range 100 {
		if _, err := post(c, url, []byte(`{"jsonrpc":"2.0","id":1,"method":"tools/list"}`), headers); err != nil {
			return runningFigures{}, fmt.Errorf("warming up: %w", err)
		}
	}
	before, err := p.memoryNow("", "")
	if err != nil {
		return runningFigures{}, err
	}
	baseRSS, baseGor := p.rss(), goroutines(p)
	// The calls of the previous size end as its Caddy exits; counting
	// starts once they have.
	for deadline := time.Now().Add(30 * time.Second); up.holding.Load() != 0; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			return runningFigures{}, fmt.Errorf("%d calls of an earlier Caddy still held", up.holding.Load())
		}
	}
	held := int64(0)
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	const workers = 32
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				body := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"hold","arguments":{"label":"run-%d-%d"},"task":{"ttl":600000}}}`, n, i)
				data, err := post(c, url, body, headers)
				if err == nil && !bytes.Contains(data, []byte(`"taskId"`)) {
					err = fmt.Errorf("not a CreateTaskResult: %s", data)
				}
				if err != nil {
					mu.Lock()
					first = cmpErr(first, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	if first != nil {
		return runningFigures{}, fmt.Errorf("creating %d running tasks: %w", n, first)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for up.holding.Load()-held < int64(n) {
		if time.Now().After(deadline) {
			return runningFigures{}, fmt.Errorf("%d of %d tasks reached the upstream", up.holding.Load()-held, n)
		}
		time.Sleep(50 * time.Millisecond)
	}
	after, err := p.memoryNow(cfg.profiles, fmt.Sprintf("running-%s-%d-heap", transport, n))
	if err != nil {
		return runningFigures{}, err
	}
	rss, gor := p.rss(), goroutines(p)
	if cfg.profiles != "" {
		saveGoroutines(p, filepath.Join(cfg.profiles, fmt.Sprintf("running-%s-%d-goroutines.txt", transport, n)))
	}
	per := func(a, b int64) float64 { return float64(b-a) / float64(n) }
	return runningFigures{bytesPer: per(baseRSS, rss), heapPer: per(before.heap, after.heap), stackPer: per(before.stacks, after.stacks), gorPer: per(int64(baseGor), int64(gor))}, nil
}

// goroutines reads how many goroutines Caddy runs, from its admin
// endpoint's goroutine profile; -1 when it cannot.
func goroutines(p *caddyProc) int {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/goroutine?debug=1", p.admin))
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	line, _, _ := strings.Cut(string(mustRead(resp.Body, 200)), "\n")
	n, err := strconv.Atoi(strings.TrimPrefix(line, "goroutine profile: total "))
	if err != nil {
		return -1
	}
	return n
}

// saveGoroutines writes Caddy's goroutines, grouped by stack, to file.
func saveGoroutines(p *caddyProc, file string) {
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/goroutine?debug=1", p.admin))
	if err != nil {
		fmt.Fprintln(os.Stderr, "goroutines:", err)
		return
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	if err := os.WriteFile(file, data, 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "goroutines:", err)
	}
}

func mustRead(r io.Reader, n int64) []byte {
	data, _ := io.ReadAll(io.LimitReader(r, n))
	return data
}

// benchRecovery measures a restart after a crash: a store of cfg.recovery
// finished tasks, a Caddy that starts recoveryRunning tasks whose upstream
// call lasts, then is killed (SIGKILL) while they run; a new Caddy on the
// same store. It reports how long the new process takes to serve (its
// port accepting and a tasks/get answered) and to end or re-run every
// orphan (each one's tasks/get no longer "working").
func benchRecovery(cfg config) ([]row, error) {
	const recoveryRunning = 1000
	up, err := startUpstream()
	if err != nil {
		return nil, err
	}
	defer up.srv.Close()
	dir := filepath.Join(cfg.work, "recovery-store")
	fmt.Fprintf(os.Stderr, "  filling a store with %d finished tasks…\n", cfg.recovery)
	finished, err := fillRetained(dir, cfg.recovery)
	if err != nil {
		return nil, err
	}
	port := freePort()
	site := fmt.Sprintf("http://:%d {\n\tbind 127.0.0.1\n\tmcp_tasks /mcp* {\n\t\tstorage_dir %s\n\t\trate_limit -1\n\t\tmax_active_per_principal -1\n%s\t}\n\treverse_proxy /mcp* %s\n}", port, dir, benchDirective, up.addr)
	p, err := startCaddy(cfg.caddy, cfg.work, site, port)
	if err != nil {
		return nil, err
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/mcp", port)
	c := newClient(32)
	headers := map[string]string{"Mcp-Protocol-Version": "2025-11-25", benchHeader: benchPrincipal}
	ids := make([]string, recoveryRunning)
	held := up.holding.Load()
	created := closedCount(32, recoveryRunning, func(i int) error {
		body := fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"hold","arguments":{"label":"orphan-%d"},"task":{"ttl":3600000}}}`, i)
		id, err := postCreate(c, url, body, headers)
		if err != nil {
			return err
		}
		ids[i] = id
		return nil
	})
	if created != nil {
		p.stop()
		return nil, fmt.Errorf("creating the running tasks: %w", created)
	}
	deadline := time.Now().Add(2 * time.Minute)
	for up.holding.Load()-held < recoveryRunning {
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("%d of %d tasks reached the upstream", up.holding.Load()-held, recoveryRunning)
		}
		time.Sleep(20 * time.Millisecond)
	}
	_ = p.cmd.Process.Kill()
	_ = p.cmd.Wait()

	start := time.Now()
	p, err = startCaddy(cfg.caddy, cfg.work, site, port)
	if err != nil {
		return nil, fmt.Errorf("restarting on the store: %w", err)
	}
	defer p.stop()
	getStatus := func(id string) (string, error) {
		data, err := post(c, url, fmt.Appendf(nil, `{"jsonrpc":"2.0","id":1,"method":"tasks/get","params":{"taskId":%q}}`, id), headers)
		if err != nil {
			return "", err
		}
		var m struct {
			Result struct{ Status string } `json:"result"`
		}
		if err := json.Unmarshal(data, &m); err != nil || m.Result.Status == "" {
			return "", fmt.Errorf("not a task: %s", data)
		}
		return m.Result.Status, nil
	}
	for {
		if st, err := getStatus(finished[0]); err == nil && st == "completed" {
			break
		}
		if time.Since(start) > 2*time.Minute {
			return nil, errors.New("the restarted process answered no tasks/get in 2 minutes")
		}
		time.Sleep(5 * time.Millisecond)
	}
	serving := time.Since(start)
	pending := ids
	for len(pending) > 0 {
		var still []string
		var mu sync.Mutex
		if err := closedCount(16, len(pending), func(i int) error {
			st, err := getStatus(pending[i])
			if err != nil {
				return err
			}
			if st == "working" || st == "input_required" {
				mu.Lock()
				still = append(still, pending[i])
				mu.Unlock()
			}
			return nil
		}); err != nil {
			return nil, fmt.Errorf("polling the orphans: %w", err)
		}
		pending = still
		if len(pending) > 0 && time.Since(start) > 3*time.Minute {
			return nil, fmt.Errorf("%d of %d orphans still working 3 minutes after the restart", len(pending), len(ids))
		}
		if len(pending) > 0 {
			time.Sleep(100 * time.Millisecond)
		}
	}
	recovered := time.Since(start)
	secs := func(d time.Duration) string { return fmt.Sprintf("%.1f s", d.Seconds()) }
	return []row{
		{measure: fmt.Sprintf("recovery: a process killed (SIGKILL) with %d tasks running, its store holding %d finished tasks; the new process serving (a tasks/get answered) after its start", recoveryRunning, cfg.recovery),
			result: secs(serving), target: "≤ 5 s", met: serving <= 5*time.Second},
		{measure: "recovery: every orphan ended or re-run (tasks/get no longer working), after the new process's start",
			result: secs(recovered), target: "≤ 30 s", met: recovered <= 30*time.Second},
	}, nil
}

// closedCount runs do for 0..n-1 from workers goroutines and returns the
// first error.
func closedCount(workers, n int, do func(i int) error) error {
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		first error
	)
	for w := range workers {
		wg.Go(func() {
			for i := w; i < n; i += workers {
				if err := do(i); err != nil {
					mu.Lock()
					first = cmpErr(first, err)
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return first
}
