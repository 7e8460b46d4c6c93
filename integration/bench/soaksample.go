package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
)

// sample is what the soak reads of Caddy and its store at one moment.
type sample struct {
	at         time.Duration // since the load started
	loaded     bool          // taken while the mix ran
	rss        int64
	rssAnon    int64 // anonymous memory: the heap, stacks, what leaks
	heapInuse  int64 // the Go heap's spans in use, from Caddy's metrics
	goroutines int
	fds        int
	disk       int64
	caddyCPU   float64 // per cent of one core since the previous sample
	soakCPU    float64 // Caddy, this process (client and upstream) and the store's server, per cent of all cores
	machineCPU float64 // per cent of all cores since the previous sample
}

// sampler reads the samples; it keeps the CPU counters of the previous
// sample for the rates.
type sampler struct {
	p         *caddyProc
	diskSize  func() (int64, error)
	others    func() []int // processes of the store's server, whose CPU counts as the soak's
	admin     *http.Client
	mu        sync.Mutex // take is called by the sampling loop and the pauses
	lastAt    time.Time
	lastCaddy time.Duration
	lastSelf  time.Duration
	lastBusy  uint64
	lastTotal uint64
}

func newSampler(p *caddyProc, diskSize func() (int64, error), others func() []int) *sampler {
	s := &sampler{p: p, diskSize: diskSize, others: others, admin: &http.Client{Timeout: 30 * time.Second}}
	s.lastAt = time.Now()
	s.lastCaddy, _ = cpuTime(p.cmd.Process.Pid)
	s.lastSelf = s.selfCPU()
	s.lastBusy, s.lastTotal, _ = machineTicks()
	return s
}

// take reads one sample.
func (s *sampler) take(at time.Duration) (sample, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	smp := sample{at: at}
	smp.rss, smp.rssAnon = memory(s.p.cmd.Process.Pid)
	var err error
	if smp.heapInuse, err = s.heap(); err != nil {
		return smp, err
	}
	if smp.goroutines, err = s.goroutines(); err != nil {
		return smp, err
	}
	if smp.fds, err = openFDs(s.p.cmd.Process.Pid); err != nil {
		return smp, err
	}
	if smp.disk, err = s.diskSize(); err != nil {
		return smp, err
	}
	now := time.Now()
	cpu, err1 := cpuTime(s.p.cmd.Process.Pid)
	self := s.selfCPU()
	if err1 == nil {
		wall := float64(now.Sub(s.lastAt))
		smp.caddyCPU = 100 * float64(cpu-s.lastCaddy) / wall
		smp.soakCPU = 100 * float64(cpu-s.lastCaddy+self-s.lastSelf) / wall / float64(runtime.NumCPU())
		s.lastCaddy, s.lastSelf = cpu, self
	}
	if busy, total, err := machineTicks(); err == nil && total > s.lastTotal {
		smp.machineCPU = 100 * float64(busy-s.lastBusy) / float64(total-s.lastTotal)
		s.lastBusy, s.lastTotal = busy, total
	}
	s.lastAt = now
	return smp, nil
}

// selfCPU is the CPU time of this process and of the store's server
// processes now running (a server process that ended takes its time with
// it: the figure is a lower bound).
func (s *sampler) selfCPU() time.Duration {
	t, _ := cpuTime(os.Getpid())
	for _, pid := range s.others() {
		if c, err := cpuTime(pid); err == nil {
			t += c
		}
	}
	return t
}

// goroutines reads the count from the first line of Caddy's goroutine
// profile ("goroutine profile: total N"), served by its admin endpoint.
func (s *sampler) goroutines() (int, error) {
	resp, err := s.admin.Get(fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/goroutine?debug=1", s.p.admin))
	if err != nil {
		return 0, fmt.Errorf("reading Caddy's goroutine profile: %w", err)
	}
	defer resp.Body.Close()
	line, err := bufio.NewReader(resp.Body).ReadString('\n')
	if err != nil {
		return 0, fmt.Errorf("reading Caddy's goroutine profile: %w", err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(line, "goroutine profile: total")))
	if err != nil {
		return 0, fmt.Errorf("reading Caddy's goroutine profile: first line %q", line)
	}
	return n, nil
}

// heap reads go_memstats_heap_inuse_bytes from Caddy's metrics.
func (s *sampler) heap() (int64, error) {
	resp, err := s.admin.Get(fmt.Sprintf("http://127.0.0.1:%d/metrics", s.p.admin))
	if err != nil {
		return 0, fmt.Errorf("reading Caddy's metrics: %w", err)
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "go_memstats_heap_inuse_bytes "); ok {
			f, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return 0, fmt.Errorf("reading Caddy's metrics: %q: %w", sc.Text(), err)
			}
			return int64(f), nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("reading Caddy's metrics: %w", err)
	}
	return 0, errors.New("reading Caddy's metrics: no go_memstats_heap_inuse_bytes")
}

// saveProfile writes Caddy's profile (path under /debug/pprof/) to file.
func (s *sampler) saveProfile(path, file string) error {
	resp, err := s.admin.Get(fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/%s", s.p.admin, path))
	if err != nil {
		return fmt.Errorf("reading Caddy's %s profile: %w", path, err)
	}
	defer resp.Body.Close()
	f, err := os.Create(file)
	if err != nil {
		return fmt.Errorf("saving Caddy's %s profile: %w", path, err)
	}
	defer f.Close()
	if _, err := io.Copy(f, resp.Body); err != nil {
		return fmt.Errorf("saving Caddy's %s profile: %w", path, err)
	}
	return nil
}

// memory returns the resident set of process pid and its anonymous part
// (RssAnon; the rest is mapped files: Caddy's binary and, for Badger, the
// store's tables, which follow the store's size).
func memory(pid int) (rss, anon int64) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	for line := range strings.SplitSeq(string(data), "\n") {
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		kb, _ := strconv.ParseInt(f[1], 10, 64)
		switch f[0] {
		case "VmRSS:":
			rss = kb << 10
		case "RssAnon:":
			anon = kb << 10
		}
	}
	return rss, anon
}

// openFDs counts the open file descriptors of process pid.
func openFDs(pid int) (int, error) {
	entries, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		return 0, fmt.Errorf("listing the open files of %d: %w", pid, err)
	}
	return len(entries), nil
}

// dirSize is the disk space of the files under dir: allocated blocks, as
// du counts them (Badger's files are sparse until written).
func dirSize(dir string) (int64, error) {
	var total int64
	err := filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		total += allocated(info)
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("measuring %s: %w", dir, err)
	}
	return total, nil
}

// machineTicks reads the busy and total CPU ticks of all cores from
// /proc/stat.
func machineTicks() (busy, total uint64, err error) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, 0, fmt.Errorf("reading /proc/stat: %w", err)
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil {
		return 0, 0, fmt.Errorf("reading /proc/stat: %w", err)
	}
	fields := strings.Fields(line)
	if len(fields) < 5 || fields[0] != "cpu" {
		return 0, 0, fmt.Errorf("reading /proc/stat: first line %q", line)
	}
	for i, f := range fields[1:] {
		n, _ := strconv.ParseUint(f, 10, 64)
		total += n
		if i != 3 && i != 4 { // idle and iowait
			busy += n
		}
	}
	return busy, total, nil
}

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func (s sample) String() string {
	return fmt.Sprintf("t=%7s  rss=%10s  anon=%10s  heap=%10s  goroutines=%5d  fds=%4d  disk=%10s  cpu caddy=%3.0f%% soak=%3.0f%% machine=%3.0f%%",
		s.at.Round(time.Second), mib(s.rss), mib(s.rssAnon), mib(s.heapInuse), s.goroutines, s.fds, mib(s.disk), s.caddyCPU, s.soakCPU, s.machineCPU)
}

// window returns the mean RSS, heap and goroutines of the samples taken
// under load in [from, to], and how many there were.
func window(samples []sample, from, to time.Duration) (rss, heap, goroutines float64, n int) {
	for _, s := range samples {
		if s.loaded && s.at >= from && s.at <= to {
			rss += float64(s.rss)
			heap += float64(s.heapInuse)
			goroutines += float64(s.goroutines)
			n++
		}
	}
	if n > 0 {
		rss /= float64(n)
		heap /= float64(n)
		goroutines /= float64(n)
	}
	return rss, heap, goroutines, n
}

func growth(from, to float64) float64 { return 100 * (to - from) / from }

// postgresProcesses returns a function listing the processes of the
// throwaway cluster of dsn (pgtest's layout: its data directory under the
// socket directory named by host=): the postmaster and its children.
func postgresProcesses(dsn string) func() []int {
	var dir string
	for f := range strings.FieldsSeq(dsn) {
		if v, ok := strings.CutPrefix(f, "host="); ok {
			dir = v
		}
	}
	return func() []int {
		data, err := os.ReadFile(filepath.Join(dir, "data", "postmaster.pid"))
		if err != nil {
			return nil // not ours (MCP_TASKS_TEST_DSN): its CPU is not counted
		}
		first, _, _ := strings.Cut(string(data), "\n")
		postmaster, err := strconv.Atoi(strings.TrimSpace(first))
		if err != nil {
			return nil
		}
		pids := []int{postmaster}
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if f, err := procStat(pid); err == nil && f[1] == strconv.Itoa(postmaster) { // f[1]: the ppid
				pids = append(pids, pid)
			}
		}
		return pids
	}
}
