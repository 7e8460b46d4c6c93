package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// The CPU accounting of the PostgreSQL rows: where the CPU of a durable
// create goes (Caddy, PostgreSQL, the load generator with the in-process
// upstream) beside where a pgbench transaction's goes, and how busy the
// machine was meanwhile. On a machine whose cores are all busy, a rate is
// the cores divided by the CPU per operation, so these figures say why a
// ratio is what it is.

// procStat returns fields 3 onwards of /proc/<pid>/stat (state first).
// The command name (field 2) may hold spaces; the fields after it are
// plain.
func procStat(pid int) ([]string, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	s := string(data)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 15 {
		return nil, fmt.Errorf("short stat line of %d", pid)
	}
	return f, nil
}

// ticks reads the field of f at i (procStat's numbering: utime is 11) as
// CPU time.
func ticks(f []string, i int) time.Duration {
	n, _ := strconv.ParseInt(f[i], 10, 64)
	return time.Duration(n) * time.Second / clockTicks
}

// serverCPU returns the CPU time of a PostgreSQL server so far, from its
// processes (postgresProcesses: the postmaster first, then its children):
// the postmaster's, that of the backends it has reaped (cutime, cstime:
// pgbench connects anew each run), and that of its live children.
func serverCPU(pids []int) (time.Duration, error) {
	var total time.Duration
	for i, pid := range pids {
		f, err := procStat(pid)
		if err != nil {
			if i == 0 {
				return 0, fmt.Errorf("reading the CPU time of PostgreSQL (%d): %w", pid, err)
			}
			continue // a backend that has just gone: its parent counts it
		}
		total += ticks(f, 11) + ticks(f, 12)
		if i == 0 {
			total += ticks(f, 13) + ticks(f, 14)
		}
	}
	return total, nil
}

// cpuSample is the CPU used by each party during some measurements.
type cpuSample struct {
	caddy, server, self, other time.Duration // other: pgbench's client
	busy, total                uint64        // the machine's CPU ticks (machineTicks)
}

func (a cpuSample) add(b cpuSample) cpuSample {
	return cpuSample{a.caddy + b.caddy, a.server + b.server, a.self + b.self, a.other + b.other, a.busy + b.busy, a.total + b.total}
}

// meterParties measures the CPU of this process (the load generator, and
// here the upstream too), Caddy (pid 0: none) and the PostgreSQL server
// (postgresProcesses; nil, or no processes, for a server not of this
// bench) while run runs, and how busy the machine was.
func meterParties(caddyPID int, server func() []int, run func() (time.Duration, error)) (cpuSample, error) {
	pids := []int{os.Getpid()}
	if caddyPID != 0 {
		pids = append(pids, caddyPID)
	}
	m, err := meterCPU(pids...)
	if err != nil {
		return cpuSample{}, err
	}
	s0, err := serverCPUOf(server)
	if err != nil {
		return cpuSample{}, err
	}
	b0, t0, err := machineTicks()
	if err != nil {
		return cpuSample{}, err
	}
	other, err := run()
	if err != nil {
		return cpuSample{}, err
	}
	b1, t1, err := machineTicks()
	if err != nil {
		return cpuSample{}, err
	}
	used, err := m.used()
	if err != nil {
		return cpuSample{}, err
	}
	s1, err := serverCPUOf(server)
	if err != nil {
		return cpuSample{}, err
	}
	out := cpuSample{self: used[0], server: s1 - s0, other: other, busy: b1 - b0, total: t1 - t0}
	if caddyPID != 0 {
		out.caddy = used[1]
	}
	return out, nil
}

// serverCPUOf is serverCPU of the server's processes now, or 0 when it has
// none to meter.
func serverCPUOf(server func() []int) (time.Duration, error) {
	if server == nil {
		return 0, nil
	}
	pids := server()
	if len(pids) == 0 {
		return 0, nil
	}
	return serverCPU(pids)
}

// per divides each party's CPU by n operations, in µs.
func (a cpuSample) per(n int) (caddy, server, self, other float64) {
	if n == 0 {
		return
	}
	us := func(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) / float64(n) }
	return us(a.caddy), us(a.server), us(a.self), us(a.other)
}

// busyShare is the share of the machine's CPU that was busy.
func (a cpuSample) busyShare() float64 {
	if a.total == 0 {
		return 0
	}
	return float64(a.busy) / float64(a.total)
}
