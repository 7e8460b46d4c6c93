package main

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/integration/upstream"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/pgstore/pgtest"
)

// The soak (./xcaddy.sh soak [duration] [badger|postgres|both]): the real
// Caddy in front of the go-sdk demo upstream, under a steady mix of both
// protocol versions for a long time, sampling Caddy's RSS, goroutines,
// open files and the store's size on disk. It fails when memory or
// goroutines grow from the start of the steady state (-soak-start) to the
// end, when the goroutines do not return to their idle count after the
// load, or on any error other than the refusals it provokes on purpose.
var (
	soakFor     = flag.Duration("soak", 0, "run the soak for this long instead of the measurements")
	soakStore   = flag.String("soak-store", "both", "store of the soak: badger, postgres or both (one after the other)")
	soakRate    = flag.Float64("soak-rate", 0, "flows started per second (each flow is 1-6 requests); 0 means the store's default, which keeps Caddy, the client, the upstream and PostgreSQL at about half of two cores (badger 200, postgres 160)")
	soakTTL     = flag.Duration("soak-ttl", 2*time.Minute, "ttl of the soak's tasks (default_ttl and max_ttl)")
	soakSweep   = flag.Duration("soak-sweep", 30*time.Second, "sweep_interval of the soak's gateway")
	soakEvery   = flag.Duration("soak-sample", 10*time.Second, "time between samples")
	soakStart   = flag.Duration("soak-start", 5*time.Minute, "start of the steady state that growth is measured from; runs shorter than twice this report growth without judging it")
	soakQuiet   = flag.Duration("soak-quiet", 30*time.Second, "quiet spell after the warm-up, before the idle count is taken: longer than the gateway keeps idle runner goroutines (20s) and reverse_proxy idle connections")
	soakSettle  = flag.Duration("soak-settle", time.Minute, "how long goroutines may take to return to the idle count after the load (the gateway keeps idle runner goroutines 20s)")
	soakSlack   = flag.Int("soak-slack", 5, "goroutines above the idle count still counted as back to idle")
	soakOut     = flag.String("soak-out", "", "directory for the goroutine dumps and heap profiles (default: a new one under the temporary directory)")
	soakGrowth  = 5.0 // per cent, the goal for RSS and goroutines
	soakPeers   = flag.Int("soak-peers", 16, "clients, each from a loopback address of its own (127.0.0.10 and up)")
	soakSession = 2 // 2025-11-25 sessions per peer, shared by its flows
)

// defaultSoakRate is the flows a second that keep this project's 2-core
// machine at about half its CPU with each store (measured: Caddy, the
// soak's client and upstream, and PostgreSQL's processes).
var defaultSoakRate = map[string]float64{"badger": 200, "postgres": 160}

// upstreamKeepAlive is how long reverse_proxy keeps an idle connection to
// the upstream (Caddy's default is 2m): the connections the load opened
// close soon after it, so the settle wait measures the gateway rather than
// the connection pool.
const upstreamKeepAlive = 5 * time.Second

// runSoak runs the soak on each store asked for and returns the exit code:
// 0 when every goal is met, 1 when one is not, 2 when the soak could not
// run.
func runSoak(caddyBin string) int {
	stores := []string{*soakStore}
	if *soakStore == "both" {
		stores = []string{"badger", "postgres"}
	}
	out := *soakOut
	if out == "" {
		var err error
		if out, err = os.MkdirTemp("", "mcp-tasks-soak-"); err != nil {
			fmt.Fprintln(os.Stderr, "soak:", err)
			return 2
		}
	}
	code := 0
	for _, store := range stores {
		if store != "badger" && store != "postgres" {
			fmt.Fprintf(os.Stderr, "soak: unknown store %q (want badger, postgres or both)\n", store)
			return 2
		}
		met, err := soakOne(caddyBin, store, filepath.Join(out, store))
		if err != nil {
			fmt.Fprintf(os.Stderr, "soak (%s): %v\n", store, err)
			return 2
		}
		if !met {
			code = 1
		}
	}
	return code
}

// soakStoreUnderTest is a store for one soak: the Caddyfile lines naming
// it, how to measure its size, and how to remove it.
type soakStoreUnderTest struct {
	directives string
	size       func() (int64, error)
	processes  func() []int // the store's server processes, if it has any
	stop       func()
}

func startSoakStore(store, work string) (*soakStoreUnderTest, error) {
	if store == "badger" {
		dir := filepath.Join(work, "store")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		return &soakStoreUnderTest{directives: "storage_dir " + dir, size: func() (int64, error) { return dirSize(dir) },
			processes: func() []int { return nil }, stop: func() {}}, nil
	}
	// Commits synchronous as on a production server (pgtest.StartDurable).
	srv, err := pgtest.StartDurable("")
	if err != nil {
		return nil, err
	}
	ctx := context.Background()
	name := fmt.Sprintf("soak_%d", os.Getpid())
	admin, err := pgx.Connect(ctx, srv.DSN)
	if err != nil {
		srv.Stop()
		return nil, fmt.Errorf("connecting to the soak's server: %w", err)
	}
	if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		_ = admin.Close(ctx)
		srv.Stop()
		return nil, fmt.Errorf("creating database %s: %w", name, err)
	}
	dsn, err := withDatabase(srv.DSN, name)
	if err != nil {
		_ = admin.Close(ctx)
		srv.Stop()
		return nil, err
	}
	size := func() (int64, error) {
		var n int64
		if err := admin.QueryRow(ctx, "SELECT pg_database_size($1)", name).Scan(&n); err != nil {
			return 0, fmt.Errorf("reading the size of %s: %w", name, err)
		}
		return n, nil
	}
	stop := func() {
		_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		_ = admin.Close(ctx)
		srv.Stop()
	}
	return &soakStoreUnderTest{directives: "storage postgres {\n\t\t\tdsn `" + dsn + "`\n\t\t}", size: size,
		processes: postgresProcesses(srv.DSN), stop: stop}, nil
}

// soakGateway starts the demo upstream (in this process) and Caddy in
// front of it on store.
func soakGateway(caddyBin, work string, st *soakStoreUnderTest) (*caddyProc, string, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, "", nil, err
	}
	mux := http.NewServeMux()
	mux.Handle("/mcp", upstream.New(upstream.Options{}))
	up := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = up.Serve(l) }()
	directives := strings.Join([]string{
		st.directives,
		"task_after 300ms",
		"default_ttl " + soakTTL.String(),
		"max_ttl " + soakTTL.String(),
		"sweep_interval " + soakSweep.String(),
		// One anonymous principal sends all the load: the per-principal
		// limits would refuse it, which is not what the soak measures.
		"rate_limit off",
		"max_active_per_principal off",
		"tool greet forbidden",
		"tool failing_job required",
	}, "\n\t\t")
	port := freePort()
	site := fmt.Sprintf("http://:%d {\n\tbind 127.0.0.1\n\tmcp_tasks /mcp* {\n\t\t%s\n\t}\n\treverse_proxy /mcp* %s {\n\t\ttransport http {\n\t\t\tkeepalive %s\n\t\t}\n\t}\n}",
		port, directives, l.Addr(), upstreamKeepAlive)
	// The soak silences the log: it runs for half an hour, and reads the
	// log only for its warnings and errors.
	p, err := startCaddyLogging(caddyBin, work, site, logSilenced, port)
	if err != nil {
		_ = up.Close()
		return nil, "", nil, err
	}
	stop := func() { p.stop(); _ = up.Close() }
	return p, fmt.Sprintf("http://127.0.0.1:%d/mcp", port), stop, nil
}

// soakOne runs the soak on one store and prints its samples and summary;
// it reports whether every goal was met.
func soakOne(caddyBin, store, out string) (bool, error) {
	if err := os.MkdirAll(out, 0o755); err != nil {
		return false, err
	}
	work, err := os.MkdirTemp("", "mcp-tasks-soak-work-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(work)
	st, err := startSoakStore(store, work)
	if err != nil {
		return false, fmt.Errorf("starting the %s store: %w", store, err)
	}
	defer st.stop()
	p, url, stop, err := soakGateway(caddyBin, work, st)
	if err != nil {
		return false, err
	}
	defer stop()
	rate := *soakRate
	if rate <= 0 {
		rate = defaultSoakRate[store]
	}
	d := newSoakDriver(url, *soakPeers, *soakTTL)
	smp := newSampler(p, st.size, st.processes)
	ctx := context.Background()
	fmt.Printf("soak on %s: %s at %g flows/s, ttl %s, sweep %s, Caddy pid %d; profiles in %s\n",
		store, *soakFor, rate, *soakTTL, *soakSweep, p.cmd.Process.Pid, out)

	// Idle: after one of each flow and a quiet spell longer than idle
	// runner goroutines and connections last.
	if err := d.openSessions(ctx, soakSession); err != nil {
		return false, fmt.Errorf("opening sessions: %w\n%s", err, p.logTail())
	}
	if err := d.warmUp(); err != nil {
		return false, fmt.Errorf("%w\n%s", err, p.logTail())
	}
	if err := d.closeSessions(ctx); err != nil {
		return false, err
	}
	time.Sleep(*soakQuiet)
	_ = smp.saveProfile("heap?gc=1", filepath.Join(out, "heap-idle.pprof"))
	idle, err := smp.take(0)
	if err != nil {
		return false, err
	}
	_ = smp.saveProfile("goroutine?debug=1", filepath.Join(out, "goroutines-idle.txt"))
	fmt.Printf("[%s] idle   %s\n", store, idle)

	// The load, sampled every -soak-sample. When the run is long enough to
	// judge growth, the load pauses at -soak-start until Caddy is quiet,
	// and that quiet state is compared with the one after the load: under
	// load, goroutines and memory follow the requests under way, which
	// move with the latency of this shared machine, not with leaks.
	judged := *soakFor >= 2**soakStart
	first := *soakFor
	if judged {
		first = *soakStart
	}
	start := time.Now()
	sampling := startSampling(store, smp, d, start)
	if err := d.load(ctx, first, rate); err != nil {
		return false, err
	}
	var atStart sample
	if judged {
		if atStart, _, err = quietDown(store, "start", smp, d, idle, start, out); err != nil {
			return false, err
		}
		if err := d.load(ctx, *soakFor-first, rate); err != nil {
			return false, err
		}
	}
	samples, err := sampling()
	if err != nil {
		return false, err
	}
	after, settled, err := quietDown(store, "end", smp, d, idle, start, out)
	if err != nil {
		return false, err
	}
	return summarize(os.Stdout, store, rate, d, soakStates{idle: idle, atStart: atStart, judged: judged, after: after, settled: settled}, samples, p), nil
}

// load opens the peers' sessions and runs the mix for dur; it returns once
// the flows under way have finished.
func (d *soakDriver) load(ctx context.Context, dur time.Duration, rate float64) error {
	if err := d.openSessions(ctx, soakSession); err != nil {
		return fmt.Errorf("opening sessions: %w", err)
	}
	loadCtx, cancel := context.WithTimeout(ctx, dur)
	defer cancel()
	d.loading.Store(true)
	defer d.loading.Store(false)
	d.run(loadCtx, rate)
	return nil
}

// startSampling samples every -soak-sample in the background and prints
// each sample; the function it returns stops it and returns the samples.
func startSampling(store string, smp *sampler, d *soakDriver, start time.Time) func() ([]sample, error) {
	stop, done := make(chan struct{}), make(chan struct{})
	var samples []sample
	var err error
	go func() {
		defer close(done)
		tick := time.NewTicker(*soakEvery)
		defer tick.Stop()
		_, _ = smp.take(0) // resets the CPU counters to the start of the load
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			var s sample
			if s, err = smp.take(time.Since(start)); err != nil {
				return
			}
			s.loaded = d.loading.Load()
			samples = append(samples, s)
			_, flows, failed := d.t.totals()
			phase := "load  "
			if !s.loaded {
				phase = "paused"
			}
			fmt.Printf("[%s] %s %s  flows=%d failed=%d\n", store, phase, s, flows, failed)
		}
	}()
	return func() ([]sample, error) {
		close(stop)
		<-done
		return samples, err
	}
}

// quietDown ends the peers' sessions and connections, as clients that
// leave do, has Caddy collect its garbage, and waits until its goroutines
// are back to the idle count (or -soak-settle has passed); it returns the
// quiet sample and how long that took. Goroutine dumps and a heap profile
// go to out, named for the moment.
func quietDown(store, moment string, smp *sampler, d *soakDriver, idle sample, start time.Time, out string) (sample, time.Duration, error) {
	_ = smp.saveProfile("goroutine?debug=1", filepath.Join(out, "goroutines-"+moment+"-loaded.txt"))
	if err := d.closeSessions(context.Background()); err != nil {
		d.t.flowDone("closing the shared sessions", err)
	}
	began := time.Now()
	for {
		s, err := smp.take(time.Since(start))
		if err != nil {
			return s, 0, err
		}
		settling := time.Since(began)
		if s.goroutines <= idle.goroutines+*soakSlack || settling > *soakSettle {
			_ = smp.saveProfile("goroutine?debug=1", filepath.Join(out, "goroutines-"+moment+"-quiet.txt"))
			// gc=1 collects first: the heap (and, as far as Go has
			// returned memory, the RSS) of one quiet sample compares with
			// another's.
			_ = smp.saveProfile("heap?gc=1", filepath.Join(out, "heap-"+moment+".pprof"))
			if s, err = settledMemory(smp, start); err != nil {
				return s, 0, err
			}
			fmt.Printf("[%s] quiet  %s  (%s, %s after the load)\n", store, s, moment, settling.Round(time.Second))
			return s, settling, nil
		}
		if settling.Round(time.Second)%(5*time.Second) == 0 {
			fmt.Printf("[%s] settle %s  (%s, %s after the load)\n", store, s, moment, settling.Round(time.Second))
		}
		if settling > 2*time.Second && settling < 3*time.Second {
			_ = smp.saveProfile("goroutine?debug=1", filepath.Join(out, "goroutines-"+moment+"-settling.txt"))
		}
		time.Sleep(time.Second)
	}
}

// settledMemory samples until the anonymous RSS has stopped falling (Go
// returns the memory a collection freed to the system gradually) or 30 s
// have passed, and returns the last sample.
func settledMemory(smp *sampler, start time.Time) (sample, error) {
	prev, err := smp.take(time.Since(start))
	for began := time.Now(); err == nil && time.Since(began) < 30*time.Second; {
		time.Sleep(2 * time.Second)
		var s sample
		if s, err = smp.take(time.Since(start)); err != nil {
			break
		}
		if float64(prev.rssAnon-s.rssAnon) < 0.01*float64(prev.rssAnon) {
			return s, nil
		}
		prev = s
	}
	return prev, err
}
