package main

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"time"
)

// summarize prints the soak's summary and reports whether every goal was
// met: RSS and goroutines grew at most soakGrowth per cent from the start
// of the steady state to the end, goroutines went back to the idle count
// after the load, and no error other than a deliberate refusal happened.
func summarize(w io.Writer, store string, rate float64, d *soakDriver, idle, after sample, settled time.Duration, samples []sample, p *caddyProc) bool {
	met := true
	verdict := func(ok bool) string {
		if ok {
			return "MET"
		}
		met = false
		return "NOT MET"
	}
	fmt.Fprintf(w, "\nsoak summary (%s): %s at %g flows/s, ttl %s, sweep %s, %d samples\n", store, *soakFor, rate, *soakTTL, *soakSweep, len(samples))
	if len(samples) == 0 {
		fmt.Fprintln(w, "  no samples: the run was shorter than the sample interval")
		return false
	}
	// Growth compares means over a minute (or a sample interval, for short
	// runs): one sample alone moves with the flows under way.
	span := max(time.Minute, *soakEvery)
	end := samples[len(samples)-1].at
	from := *soakStart
	judged := end >= 2*from
	if !judged { // a short run: the second sixth against the last
		from = end / 6
		span = max(end/6, *soakEvery)
	}
	startRSS, startG, n1 := window(samples, from-span/2, from+span/2)
	endRSS, endG, n2 := window(samples, end-span, end)
	if n1 == 0 || n2 == 0 {
		startRSS, startG = float64(samples[0].rss), float64(samples[0].goroutines)
		endRSS, endG = float64(samples[len(samples)-1].rss), float64(samples[len(samples)-1].goroutines)
	}
	grow := func(what string, a, b float64, unit func(float64) string) {
		g := growth(a, b)
		goal := fmt.Sprintf("not judged: the run is shorter than twice -soak-start (%s)", *soakStart)
		if judged {
			goal = fmt.Sprintf("goal ≤ %g %%: %s", soakGrowth, verdict(g <= soakGrowth))
		}
		fmt.Fprintf(w, "  %-11s at %s: %s, at the end: %s, growth %+.1f %% (%s)\n", what, from.Round(time.Second), unit(a), unit(b), g, goal)
	}
	grow("RSS", startRSS, endRSS, func(v float64) string { return mib(int64(v)) })
	grow("goroutines", startG, endG, func(v float64) string { return fmt.Sprintf("%.0f", v) })
	fmt.Fprintf(w, "  %-11s idle before the load: %d, %s after it: %d (goal ≤ idle + %d: %s)\n", "goroutines", idle.goroutines,
		settled.Round(time.Second), after.goroutines, *soakSlack, verdict(after.goroutines <= idle.goroutines+*soakSlack))
	fmt.Fprintf(w, "  %-11s idle before the load: %s, after it: %s\n", "RSS", mib(idle.rss), mib(after.rss))
	maxOf := func(f func(sample) int64) int64 {
		var m int64
		for _, s := range samples {
			m = max(m, f(s))
		}
		return m
	}
	fmt.Fprintf(w, "  %-11s idle %d, max %d, after the load %d\n", "open fds", idle.fds, maxOf(func(s sample) int64 { return int64(s.fds) }), after.fds)
	fmt.Fprintf(w, "  %-11s max %s, at %s %s, at the end %s\n", "store size", mib(maxOf(func(s sample) int64 { return s.disk })),
		from.Round(time.Second), mib(nearest(samples, from).disk), mib(samples[len(samples)-1].disk))
	var caddyCPU, soakCPU, machineCPU float64
	for _, s := range samples {
		caddyCPU += s.caddyCPU
		soakCPU += s.soakCPU
		machineCPU += s.machineCPU
	}
	n := float64(len(samples))
	fmt.Fprintf(w, "  %-11s Caddy %.0f %% of one core, Caddy and the soak's client and upstream %.0f %% of the machine's %d cores, the machine (other work included) %.0f %%; the pacer fell behind %d times\n", "CPU",
		caddyCPU/n, soakCPU/n, runtime.NumCPU(), machineCPU/n, d.behind.Load())
	byOutcome, flows, failed := d.t.totals()
	fmt.Fprintf(w, "  %-11s ok %d, tool error %d, deliberate refusals %d; flows %d, unexpected errors %d (goal 0: %s)\n", "requests",
		byOutcome[outcomeOK], byOutcome[outcomeToolError], byOutcome[outcomeRefused], flows, failed, verdict(failed == 0))
	d.t.print(w)
	if failed > 0 {
		fmt.Fprintf(w, "Caddy's log (warnings and errors):\n%s\n", tailString(p.output.String(), 4000))
	}
	fmt.Fprintf(w, "soak %s: %s\n\n", store, map[bool]string{true: "PASS", false: "FAIL"}[met])
	return met
}

// nearest returns the sample taken nearest to at.
func nearest(samples []sample, at time.Duration) sample {
	return slices.MinFunc(samples, func(a, b sample) int {
		return int(absDuration(a.at-at) - absDuration(b.at-at))
	})
}

func absDuration(d time.Duration) time.Duration {
	if d < 0 {
		return -d
	}
	return d
}

func tailString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}
