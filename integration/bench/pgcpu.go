package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// The CPU accounting of the PostgreSQL rows: where the CPU of a durable
// create goes (Caddy, PostgreSQL, the load generator with the in-process
// upstream) beside where a pgbench transaction's goes, and how busy the
// machine was meanwhile. On a machine whose cores are all busy, a rate is
// the cores divided by the CPU per operation, so these figures say why a
// ratio is what it is.

// procStat returns fields 3 onwards of /proc/<pid>/stat (state first).
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

func ticks(f []string, i int) time.Duration {
	n, _ := strconv.ParseInt(f[i], 10, 64)
	return time.Duration(n) * time.Second / clockTicks
}

// serverCPU returns the CPU time of a PostgreSQL server so far: the
// postmaster's, that of the backends it has reaped (cutime, cstime: pgbench
// connects anew each run), and that of its live children.
func serverCPU(postmaster int) (time.Duration, error) {
	f, err := procStat(postmaster)
	if err != nil {
		return 0, fmt.Errorf("reading the CPU time of PostgreSQL (%d): %w", postmaster, err)
	}
	total := ticks(f, 11) + ticks(f, 12) + ticks(f, 13) + ticks(f, 14)
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	parent := strconv.Itoa(postmaster)
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		if f, err := procStat(pid); err == nil && f[1] == parent {
			total += ticks(f, 11) + ticks(f, 12)
		}
	}
	return total, nil
}

// postmasterPID reads the server's pid from postmaster.pid in the data
// directory of a pgtest cluster (its socket directory, host= of dsn).
func postmasterPID(dsn string) (int, error) {
	for _, f := range strings.Fields(dsn) {
		if dir, ok := strings.CutPrefix(f, "host="); ok {
			data, err := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid"))
			if err != nil {
				return 0, fmt.Errorf("reading the postmaster's pid: %w", err)
			}
			line, _, _ := strings.Cut(string(data), "\n")
			return strconv.Atoi(strings.TrimSpace(line))
		}
	}
	return 0, fmt.Errorf("no host= directory in %q", dsn)
}

// selfCPU is this process's CPU time so far: the load generator, and in
// the PostgreSQL rows the trivial upstream too.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// machineCPU returns the machine's busy and total CPU time so far, from
// the first line of /proc/stat (idle and iowait are not busy).
func machineCPU() (busy, total time.Duration) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	for i := 1; i < len(f) && i <= 8; i++ { // user nice system idle iowait irq softirq steal
		n, _ := strconv.ParseInt(f[i], 10, 64)
		d := time.Duration(n) * time.Second / clockTicks
		total += d
		if i != 4 && i != 5 {
			busy += d
		}
	}
	return busy, total
}

// cpuSample is the CPU used by each party during some measurements.
type cpuSample struct {
	caddy, server, self, other time.Duration // other: pgbench's client
	busy, total                time.Duration
}

func (a cpuSample) add(b cpuSample) cpuSample {
	return cpuSample{a.caddy + b.caddy, a.server + b.server, a.self + b.self, a.other + b.other, a.busy + b.busy, a.total + b.total}
}

// meterParties measures the CPU of Caddy (pid 0: none), the PostgreSQL
// server (postmaster 0: none, a server not of this machine's bench) and
// this process while run runs.
func meterParties(caddyPID, postmaster int, run func() (time.Duration, error)) (cpuSample, error) {
	var c0, s0 time.Duration
	var err error
	if caddyPID != 0 {
		if c0, err = cpuTime(caddyPID); err != nil {
			return cpuSample{}, err
		}
	}
	if postmaster != 0 {
		if s0, err = serverCPU(postmaster); err != nil {
			return cpuSample{}, err
		}
	}
	self0 := selfCPU()
	b0, t0 := machineCPU()
	other, err := run()
	if err != nil {
		return cpuSample{}, err
	}
	b1, t1 := machineCPU()
	out := cpuSample{self: selfCPU() - self0, other: other, busy: b1 - b0, total: t1 - t0}
	if postmaster != 0 {
		if out.server, err = serverCPU(postmaster); err != nil {
			return cpuSample{}, err
		}
		out.server -= s0
	}
	if caddyPID != 0 {
		c1, err := cpuTime(caddyPID)
		if err != nil {
			return cpuSample{}, err
		}
		out.caddy = c1 - c0
	}
	return out, nil
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
