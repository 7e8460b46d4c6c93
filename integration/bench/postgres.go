package main

import (
	"context"
	"fmt"
	"os"
	"slices"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/pgstore/pgtest"
)

// benchPostgres measures the PostgreSQL store: durable creates/s through
// one replica beside pgbench's simple-update TPS on the same server (the
// anchor: what this server does with a small write transaction), then
// tasks/get/s through that replica beside one Caddy on the Badger store
// (the reference), each pair alternating A B A B over rounds so that both
// sides meet the same load of the machine; then three replicas behind a
// round-robin Caddy. It meters the CPU of each party (Caddy, PostgreSQL,
// the load generator) to say where a create's time goes.
// The server is a throwaway cluster (pgtest) with fsync and synchronous
// commit turned back on, so that a create is as durable as on a real
// server; MCP_TASKS_TEST_DSN names an existing server instead, used as it
// is configured (and without the CPU row: its processes are not ours).
func benchPostgres(cfg config) ([]row, error) {
	srv, err := pgtest.Start("")
	if err != nil {
		return nil, err
	}
	defer srv.Stop()
	ownServer := os.Getenv(pgtest.EnvDSN) == ""
	if ownServer {
		if err := restartDurable(srv.DSN); err != nil {
			return nil, err
		}
	}
	ctx := context.Background()
	admin, err := pgx.Connect(ctx, srv.DSN)
	if err != nil {
		return nil, fmt.Errorf("connecting to the bench server: %w", err)
	}
	defer admin.Close(ctx)
	var fsync, syncCommit string
	if err := admin.QueryRow(ctx, "SELECT current_setting('fsync'), current_setting('synchronous_commit')").Scan(&fsync, &syncCommit); err != nil {
		return nil, fmt.Errorf("reading the server's settings: %w", err)
	}
	suffix := fmt.Sprintf("_%d", os.Getpid())
	newDB := func(name string) (string, error) {
		name += suffix
		if _, err := admin.Exec(ctx, "CREATE DATABASE "+name); err != nil {
			return "", fmt.Errorf("creating database %s: %w", name, err)
		}
		return withDatabase(srv.DSN, name)
	}
	defer func() {
		for _, name := range []string{"bench_pgbench", "bench_one", "bench_three"} {
			_, _ = admin.Exec(ctx, "DROP DATABASE IF EXISTS "+name+suffix+" WITH (FORCE)")
		}
	}()
	// The CPU row needs the server's processes, which only a server of
	// this bench shows.
	serverProcs := postgresProcesses(srv.DSN)
	if !ownServer || len(serverProcs()) == 0 {
		serverProcs = nil
	}

	pgbenchDSN, err := newDB("bench_pgbench")
	if err != nil {
		return nil, err
	}
	pgbench, err := initPgbench(pgbenchDSN)
	if err != nil {
		return nil, err
	}
	up, err := startUpstream()
	if err != nil {
		return nil, err
	}
	defer up.srv.Close()
	oneDSN, err := newDB("bench_one")
	if err != nil {
		return nil, err
	}
	oneURL, oneProcs, stopOne, err := pgReplicas(cfg, oneDSN, up.addr, 1)
	if err != nil {
		return nil, fmt.Errorf("one replica: %w", err)
	}
	defer stopOne()
	badgerURL, badgerProc, stopBadger, err := startBadgerReference(cfg, up.addr)
	if err != nil {
		return nil, fmt.Errorf("the Badger reference: %w", err)
	}
	defer stopBadger()

	createOne, createBadger := newCreator(oneURL), newCreator(badgerURL)
	creates, err := measureCreates(cfg, serverProcs, pgbench, createOne, oneProcs[0])
	if err != nil {
		return nil, err
	}
	var badgerCreates result
	badgerCPU, err := meterParties(badgerProc.cmd.Process.Pid, serverProcs, func() (time.Duration, error) {
		badgerCreates, err = createBadger.run(cfg.duration)
		return 0, err
	})
	if err != nil {
		return nil, fmt.Errorf("the Badger reference: %w", err)
	}
	for _, c := range []*creator{createOne, createBadger} { // enough tasks to poll
		for len(c.taskIDs()) < pgPolledBeyond {
			if _, err := c.run(cfg.duration); err != nil {
				return nil, err
			}
		}
	}
	gets, err := measureGets(cfg, oneProcs[0], pgPolled, oneURL, createOne.taskIDs(), badgerURL, createBadger.taskIDs())
	if err != nil {
		return nil, err
	}
	getsBeyond, err := measureGets(cfg, oneProcs[0], pgPolledBeyond, oneURL, createOne.taskIDs(), badgerURL, createBadger.taskIDs())
	if err != nil {
		return nil, err
	}
	stopOne()
	stopBadger()
	c3, g3, err := measureThree(cfg, newDB, up.addr)
	if err != nil {
		return nil, fmt.Errorf("three replicas: %w", err)
	}

	server := fmt.Sprintf("PostgreSQL on this machine, fsync %s, synchronous_commit %s", fsync, syncCommit)
	tps, rate := median(creates.tps), median(creates.rates)
	ratio := rate / tps
	rows := []row{
		{measure: fmt.Sprintf("postgres anchor: pgbench simple-update TPS (-N, %d clients), %s, %d rounds of %s, median", pgbenchClients, server, len(creates.tps), cfg.duration),
			result: fmt.Sprintf("%.0f TPS (rounds %.0f–%.0f)", tps, slices.Min(creates.tps), slices.Max(creates.tps)), target: "report", informational: true},
		{measure: fmt.Sprintf("postgres: durable create (%d clients), tasks/s end to end on 1 replica vs pgbench TPS, %d rounds A B, medians; 3 replicas behind round robin", pgClients, len(creates.rates)),
			result: fmt.Sprintf("%.0f vs %.0f TPS (%.2f×, %s); 3 replicas %.0f (%.2f×)", rate, tps, ratio, spread(creates.ratios), c3.rate(), c3.rate()/tps),
			target: "1 replica ≥ 0.6× pgbench", met: ratio >= 0.6},
		{measure: "postgres: durable create p50 / p99, 1 replica (first round) vs 3",
			result: fmt.Sprintf("%s / %s vs %s / %s", ms(creates.first.pct(0.5)), ms(creates.first.pct(0.99)), ms(c3.pct(0.5)), ms(c3.pct(0.99))), target: "report", informational: true},
	}
	if serverProcs != nil {
		rows = append(rows, creates.cpuRow(badgerCPU, badgerCreates.n))
	}
	getRatio := median(gets.rates) / median(gets.badgerRates)
	return append(rows,
		row{measure: fmt.Sprintf("postgres: tasks/get req/s (%d clients) on 1 replica vs one Caddy on Badger (sync_writes on), the newest %d finished tasks of each polled at random, %d rounds A B, medians; 3 replicas behind round robin (their own tasks)", pgClients, gets.polled, len(gets.rates)),
			result: fmt.Sprintf("%.0f (p99 %s) vs Badger %.0f (p99 %s): %.2f× Badger (%s); 3 replicas %.0f (p99 %s)", median(gets.rates), ms(gets.first.pct(0.99)), median(gets.badgerRates), ms(gets.badgerFirst.pct(0.99)), getRatio, spread(gets.ratios), g3.rate(), ms(g3.pct(0.99))),
			target: "1 replica ≥ 0.8× Badger", met: getRatio >= 0.8},
		row{measure: fmt.Sprintf("postgres: the same with %d finished tasks of each, more than the caches of finished tasks hold (most reads go to the store)", getsBeyond.polled),
			result: fmt.Sprintf("%.0f (p99 %s) vs Badger %.0f (p99 %s): %.2f× Badger (%s)", median(getsBeyond.rates), ms(getsBeyond.first.pct(0.99)), median(getsBeyond.badgerRates), ms(getsBeyond.badgerFirst.pct(0.99)),
				median(getsBeyond.rates)/median(getsBeyond.badgerRates), spread(getsBeyond.ratios)),
			target: "report", informational: true},
		row{measure: fmt.Sprintf("badger reference: durable create (%d clients, sync_writes on), tasks/s end to end, the same load", pgClients),
			result: fmt.Sprintf("%.0f (p50 %s, p99 %s)", badgerCreates.rate(), ms(badgerCreates.pct(0.5)), ms(badgerCreates.pct(0.99))), target: "report", informational: true},
	), nil
}

// createRounds is what measureCreates measured.
type createRounds struct {
	tps, rates, ratios  []float64 // per round: pgbench's TPS, creates/s, their ratio
	first               result    // the first round of creates, for its latencies
	pgbenchCPU, cpu     cpuSample // the CPU of the pgbench rounds, and of the create rounds
	transactions, tasks int       // in those rounds
}

// measureCreates alternates a round of pgbench with a round of creates
// through one replica (proc), A B A B.
func measureCreates(cfg config, server func() []int, pgbench func(time.Duration) (pgbenchRun, error), create *creator, proc *caddyProc) (createRounds, error) {
	var out createRounds
	if _, err := pgbench(time.Second); err != nil { // warm up
		return out, err
	}
	if _, err := create.run(time.Second); err != nil {
		return out, fmt.Errorf("one replica: %w", err)
	}
	for round := range cfg.rounds {
		var tps float64
		sample, err := meterParties(0, server, func() (time.Duration, error) {
			run, err := pgbench(cfg.duration)
			tps = run.tps
			return run.cpu, err
		})
		if err != nil {
			return out, err
		}
		out.pgbenchCPU = out.pgbenchCPU.add(sample)
		out.transactions += int(tps * cfg.duration.Seconds())

		var profiled <-chan struct{}
		if round == 0 {
			profiled = proc.profile(cfg.profiles, "postgres-create", cfg.duration)
		}
		var r result
		sample, err = meterParties(proc.cmd.Process.Pid, server, func() (time.Duration, error) {
			r, err = create.run(cfg.duration)
			return 0, err
		})
		if profiled != nil {
			<-profiled
		}
		if err != nil {
			return out, fmt.Errorf("one replica: %w", err)
		}
		out.cpu = out.cpu.add(sample)
		out.tasks += r.n
		if round == 0 {
			out.first = r
		}
		out.tps, out.rates = append(out.tps, tps), append(out.rates, r.rate())
		out.ratios = append(out.ratios, r.rate()/tps)
	}
	return out, nil
}

// cpuRow says where the CPU of a create went, beside a pgbench
// transaction's and a create's on Badger (badger, over n creates).
func (c createRounds) cpuRow(badger cpuSample, n int) row {
	caddy, server, self, _ := c.cpu.per(c.tasks)
	_, pgServer, _, pgbench := c.pgbenchCPU.per(c.transactions)
	badgerCaddy, _, badgerSelf, _ := badger.per(n)
	create, transaction := caddy+server+self, pgServer+pgbench
	return row{
		measure: "postgres: CPU per durable create on 1 replica (Caddy + PostgreSQL + the load generator with the upstream) vs per pgbench transaction (PostgreSQL + pgbench), with how busy the cores were; and per create on Badger (Caddy + the load generator with the upstream)",
		result: fmt.Sprintf("%.0f + %.0f + %.0f = %.0f µs, cores %.0f %% busy vs %.0f + %.0f = %.0f µs, cores %.0f %% busy (%.2f×); Badger %.0f + %.0f = %.0f µs",
			caddy, server, self, create, 100*c.cpu.busyShare(), pgServer, pgbench, transaction, 100*c.pgbenchCPU.busyShare(),
			transaction/create, badgerCaddy, badgerSelf, badgerCaddy+badgerSelf),
		target: "report", informational: true,
	}
}

// getRounds is what measureGets measured.
type getRounds struct {
	polled                     int
	rates, badgerRates, ratios []float64
	first, badgerFirst         result
}

// measureGets alternates rounds of tasks/get through one replica and
// through the Badger reference, A B A B, each polling its newest polled
// tasks at random.
func measureGets(cfg config, proc *caddyProc, polled int, oneURL string, oneIDs []string, badgerURL string, badgerIDs []string) (getRounds, error) {
	out := getRounds{polled: min(polled, len(oneIDs), len(badgerIDs))}
	getOne := newGetter(oneURL, oneIDs[len(oneIDs)-out.polled:])
	getBadger := newGetter(badgerURL, badgerIDs[len(badgerIDs)-out.polled:])
	_, _ = getOne(time.Second) // warm up
	_, _ = getBadger(time.Second)
	for round := range cfg.rounds {
		var profiled <-chan struct{}
		if round == 0 {
			profiled = proc.profile(cfg.profiles, fmt.Sprintf("postgres-get-%d", out.polled), cfg.duration)
		}
		g, err := getOne(cfg.duration)
		if profiled != nil {
			<-profiled
		}
		if err != nil {
			return out, fmt.Errorf("one replica: %w", err)
		}
		b, err := getBadger(cfg.duration)
		if err != nil {
			return out, fmt.Errorf("the Badger reference: %w", err)
		}
		if round == 0 {
			out.first, out.badgerFirst = g, b
		}
		out.rates, out.badgerRates = append(out.rates, g.rate()), append(out.badgerRates, b.rate())
		out.ratios = append(out.ratios, g.rate()/b.rate())
	}
	return out, nil
}
