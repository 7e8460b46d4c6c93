// Command bench measures the gateway's task path against its targets and
// prints one table. It drives a real Caddy built with the module (./caddy by
// default) in front of a trivial in-process upstream, on loopback only, with
// bounded request counts and durations. Every ratio is measured side by side
// in the same run, because the machines it runs on are shared and noisy.
//
//	go run ./integration/bench -caddy ./caddy
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"
)

type config struct {
	caddy       string
	work        string
	duration    time.Duration
	rounds      int
	tasks       int
	subscribers int
	// retained, running and streams are the sizes of the curves: finished
	// tasks in the store, tasks running at once, listen streams open.
	retained, running, streams string
	// retainedPG is the sizes of the retained curve on PostgreSQL.
	retainedPG string
	// recovery is how many finished tasks the store of the recovery
	// measurement holds.
	recovery int
	profiles string
	// silenced adds rows measured with Caddy's log silenced beside the
	// default-logging rows of respond and lifecycle.
	silenced bool
}

// row is one line of the table.
type row struct {
	measure, result, target string
	met                     bool
	informational           bool
}

func main() {
	var cfg config
	flag.StringVar(&cfg.caddy, "caddy", "./caddy", "Caddy binary built with the module")
	flag.DurationVar(&cfg.duration, "duration", 3*time.Second, "length of each measurement")
	flag.IntVar(&cfg.rounds, "rounds", 5, "A/B rounds of the pass-through comparison")
	flag.IntVar(&cfg.tasks, "tasks", 100_000, "tasks held in the store for polling and memory")
	flag.IntVar(&cfg.subscribers, "subscribers", 1000, "subscribers of the fan-out measurement")
	flag.StringVar(&cfg.retained, "retained", "10000,100000", "comma-separated sizes of the retained curve: finished tasks in the store (1000000 for the full curve)")
	flag.StringVar(&cfg.retainedPG, "retained-postgres", "10000,100000", "comma-separated sizes of the retained curve on PostgreSQL")
	flag.StringVar(&cfg.running, "running", "100,1000,10000", "comma-separated sizes of the running curve: tasks running at once")
	flag.StringVar(&cfg.streams, "streams", "1000,10000", "comma-separated sizes of the streams curve: subscriptions/listen streams open at once")
	flag.IntVar(&cfg.recovery, "recovery", 1_000_000, "finished tasks in the store of the recovery measurement")
	flag.StringVar(&cfg.profiles, "cpuprofile", "", "directory for CPU profiles of Caddy during the measurements")
	flag.BoolVar(&cfg.silenced, "silenced", false, "also measure respond and lifecycle with Caddy's log silenced (level WARN), in rows labelled so")
	only := flag.String("only", "", "comma-separated subset: passthrough,create,sync,poll,respond,lifecycle,tracing,fanout,listen,memory,postgres,retained,retained-postgres,running,recovery,streams")
	upstreamOnly := flag.Bool(serveUpstreamFlag, false, "serve the trivial upstream only (the bench starts itself so)")
	flag.Parse()
	if *upstreamOnly {
		serveUpstreamOnly()
		return
	}
	if *soakFor > 0 { // the soak, not the measurements (soak.go)
		os.Exit(runSoak(cfg.caddy))
	}

	work, err := os.MkdirTemp("", "mcp-tasks-bench-")
	if err != nil {
		fatal(err)
	}
	defer os.RemoveAll(work)
	cfg.work = work

	want := func(name string) bool { return *only == "" || strings.Contains(","+*only+",", ","+name+",") }
	var rows []row
	start := time.Now()
	steps := []struct {
		name string
		run  func(config) ([]row, error)
	}{
		{"passthrough", benchPassThrough},
		{"create", benchCreate},
		{"sync", benchSyncRatio},
		{"poll", benchPollAndMemory},
		{"respond", benchGetVsRespond},
		{"lifecycle", benchLifecycleCPU},
		{"tracing", benchTracingCPU},
		{"fanout", benchFanOut},
		{"listen", benchListen},
		{"postgres", benchPostgres},
		{"retained", benchRetained},
		{"retained-postgres", benchRetainedPostgres},
		{"running", benchRunning},
		{"recovery", benchRecovery},
		{"streams", benchStreams},
	}
	for _, s := range steps {
		if !want(s.name) && !(s.name == "poll" && want("memory")) {
			continue
		}
		fmt.Fprintf(os.Stderr, "measuring %s…\n", s.name)
		r, err := s.run(cfg)
		if err != nil {
			fatal(fmt.Errorf("%s: %w", s.name, err))
		}
		rows = append(rows, r...)
	}
	printTable(rows, time.Since(start))
}

func printTable(rows []row, took time.Duration) {
	fmt.Printf("Machine: %s. Run took %s.\n\n", machine(), took.Round(time.Second))
	fmt.Println("| measure | result | target | met |")
	fmt.Println("|---|---|---|---|")
	for _, r := range rows {
		met := "NOT MET"
		switch {
		case r.informational:
			met = "—"
		case r.met:
			met = "MET"
		}
		fmt.Printf("| %s | %s | %s | %s |\n", r.measure, r.result, r.target, met)
	}
}

// machine describes the cores, memory and disk of this machine.
func machine() string {
	mem := "?"
	if data, err := os.ReadFile("/proc/meminfo"); err == nil {
		for line := range strings.SplitSeq(string(data), "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == "MemTotal:" {
				if kb, err := strconv.ParseInt(f[1], 10, 64); err == nil {
					mem = fmt.Sprintf("%.0f GiB", float64(kb)/(1<<20))
				}
			}
		}
	}
	disk := "?"
	if out, err := exec.Command("df", "-h", "--output=source,size", os.TempDir()).Output(); err == nil {
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		disk = strings.Join(strings.Fields(lines[len(lines)-1]), " ")
	}
	return fmt.Sprintf("%d cores (%s), %s memory, disk %s, %s", runtime.NumCPU(), runtime.GOARCH, mem, disk, runtime.Version())
}

// spread describes the per-round values of a ratio: "rounds min–max".
func spread(v []float64) string {
	if len(v) == 0 {
		return "no rounds"
	}
	return fmt.Sprintf("rounds %.2f–%.2f", slices.Min(v), slices.Max(v))
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}
