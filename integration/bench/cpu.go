package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"time"
)

// clockTicks is Linux's USER_HZ, the unit of utime and stime in
// /proc/<pid>/stat; it is 100 on every architecture Go supports on Linux.
const clockTicks = 100

// cpuTime returns the CPU time (user and system) that process pid has used
// so far, from /proc/<pid>/stat.
func cpuTime(pid int) (time.Duration, error) {
	f, err := procStat(pid)
	if err != nil {
		return 0, fmt.Errorf("reading the CPU time of %d: %w", pid, err)
	}
	return ticks(f, 11) + ticks(f, 12), nil
}

// upstreamProc is the trivial upstream in a process of its own, so that
// its CPU time is counted apart from the load generator's.
type upstreamProc struct {
	addr string
	cmd  *exec.Cmd
	in   io.WriteCloser
}

// serveUpstreamFlag makes the bench binary serve the trivial upstream
// only: it prints the address and serves until its standard input closes.
const serveUpstreamFlag = "serve-upstream"

func serveUpstreamOnly() {
	up, err := startUpstream()
	if err != nil {
		fatal(err)
	}
	fmt.Println(up.addr)
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = up.srv.Close()
}

// startUpstreamProc runs this binary as the trivial upstream.
func startUpstreamProc() (*upstreamProc, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("finding the bench binary: %w", err)
	}
	cmd := exec.Command(self, "-"+serveUpstreamFlag)
	cmd.Stderr = os.Stderr
	in, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("starting the upstream process: %w", err)
	}
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("reading the upstream's address: %w", err)
	}
	return &upstreamProc{addr: strings.TrimSpace(line), cmd: cmd, in: in}, nil
}

func (u *upstreamProc) stop() {
	_ = u.in.Close()
	done := make(chan struct{})
	go func() { _ = u.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		_ = u.cmd.Process.Kill()
		<-done
	}
}

// cpuMeter reads the CPU time of processes before and after a measurement.
type cpuMeter struct {
	pids  []int
	start []time.Duration
}

func meterCPU(pids ...int) (*cpuMeter, error) {
	m := &cpuMeter{pids: pids}
	for _, pid := range pids {
		t, err := cpuTime(pid)
		if err != nil {
			return nil, err
		}
		m.start = append(m.start, t)
	}
	return m, nil
}

// used returns the CPU time each process used since meterCPU.
func (m *cpuMeter) used() ([]time.Duration, error) {
	out := make([]time.Duration, len(m.pids))
	for i, pid := range m.pids {
		t, err := cpuTime(pid)
		if err != nil {
			return nil, err
		}
		out[i] = t - m.start[i]
	}
	return out, nil
}
