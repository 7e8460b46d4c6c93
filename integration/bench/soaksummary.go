package main

import (
	"fmt"
	"io"
	"runtime"
	"slices"
	"time"
)

// soakStates are the quiet states of Caddy the goals compare.
type soakStates struct {
	idle    sample // before the load, after the warm-up
	atStart sample // in the pause at -soak-start (when judged)
	judged  bool   // the run was long enough for the pause
	after   sample // after the load
	settled time.Duration
}

// summarize prints the soak's summary and reports whether every goal was
// met: from the pause at -soak-start to the end, RSS and goroutines (both
// quiet, after a garbage collection) grew at most soakGrowth per cent;
// goroutines went back to the idle count after the load; no error other
// than a deliberate refusal happened.
func summarize(w io.Writer, store string, rate float64, d *soakDriver, st soakStates, samples []sample, p *caddyProc) bool {
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
	from := *soakStart
	if st.judged {
		fmt.Fprintf(w, "  quiet (load paused, garbage collected, goroutines settled) at %s vs after the load:\n", from)
		g := growth(float64(st.atStart.rssAnon), float64(st.after.rssAnon))
		fmt.Fprintf(w, "  %-11s anonymous %s vs %s, growth %+.1f %% (goal ≤ %g %%: %s); in all (with mapped files) %s vs %s, %+.1f %%\n", "RSS",
			mib(st.atStart.rssAnon), mib(st.after.rssAnon), g, soakGrowth, verdict(g <= soakGrowth), mib(st.atStart.rss), mib(st.after.rss), growth(float64(st.atStart.rss), float64(st.after.rss)))
		g = growth(float64(st.atStart.goroutines), float64(st.after.goroutines))
		fmt.Fprintf(w, "  %-11s %d vs %d, growth %+.1f %% (goal ≤ %g %%: %s)\n", "goroutines", st.atStart.goroutines, st.after.goroutines, g, soakGrowth, verdict(g <= soakGrowth))
		fmt.Fprintf(w, "  %-11s %s vs %s, growth %+.1f %%\n", "Go heap", mib(st.atStart.heapInuse), mib(st.after.heapInuse), growth(float64(st.atStart.heapInuse), float64(st.after.heapInuse)))
	} else {
		fmt.Fprintf(w, "  growth not judged: the run is shorter than twice -soak-start (%s)\n", from)
		from = 0
	}
	fmt.Fprintf(w, "  %-11s idle before the load: %d, %s after it: %d (goal ≤ idle + %d: %s)\n", "goroutines", st.idle.goroutines,
		st.settled.Round(time.Second), st.after.goroutines, *soakSlack, verdict(st.after.goroutines <= st.idle.goroutines+*soakSlack))
	fmt.Fprintf(w, "  %-11s idle before the load: %s (anonymous %s, heap %s), after it: %s (anonymous %s, heap %s)\n", "RSS",
		mib(st.idle.rss), mib(st.idle.rssAnon), mib(st.idle.heapInuse), mib(st.after.rss), mib(st.after.rssAnon), mib(st.after.heapInuse))
	// Under load (means over a minute; they follow the requests under way).
	end := samples[len(samples)-1].at
	span := max(time.Minute, *soakEvery)
	r1, h1, g1, n1 := window(samples, from-span, from)
	r2, h2, g2, n2 := window(samples, end-span, end)
	if n1 > 0 && n2 > 0 {
		fmt.Fprintf(w, "  under load, the minute before %s vs the last minute: RSS %s vs %s (%+.1f %%), Go heap %s vs %s (%+.1f %%), goroutines %.0f vs %.0f (%+.1f %%)\n",
			from, mib(int64(r1)), mib(int64(r2)), growth(r1, r2), mib(int64(h1)), mib(int64(h2)), growth(h1, h2), g1, g2, growth(g1, g2))
	}
	maxOf := func(f func(sample) int64) int64 {
		var m int64
		for _, s := range samples {
			m = max(m, f(s))
		}
		return m
	}
	fmt.Fprintf(w, "  %-11s idle %d, max %d, after the load %d\n", "open fds", st.idle.fds, maxOf(func(s sample) int64 { return int64(s.fds) }), st.after.fds)
	fmt.Fprintf(w, "  %-11s max %s, at %s %s, at the end %s, after the load %s\n", "store size", mib(maxOf(func(s sample) int64 { return s.disk })),
		from.Round(time.Second), mib(nearest(samples, from).disk), mib(samples[len(samples)-1].disk), mib(st.after.disk))
	fmt.Fprintf(w, "  %-11s max RSS %s, max Go heap %s, max goroutines %d\n", "peaks", mib(maxOf(func(s sample) int64 { return s.rss })),
		mib(maxOf(func(s sample) int64 { return s.heapInuse })), maxOf(func(s sample) int64 { return int64(s.goroutines) }))
	var caddyCPU, soakCPU, machineCPU, n float64
	for _, s := range samples {
		if s.loaded {
			caddyCPU += s.caddyCPU
			soakCPU += s.soakCPU
			machineCPU += s.machineCPU
			n++
		}
	}
	n = max(n, 1)
	fmt.Fprintf(w, "  %-11s Caddy %.0f %% of one core, Caddy and the soak's client, upstream and store %.0f %% of the machine's %d cores, the machine (other work included) %.0f %%; the pacer fell behind %d times\n", "CPU",
		caddyCPU/n, soakCPU/n, runtime.NumCPU(), machineCPU/n, d.behind.Load())
	byOutcome, flows, failed := d.t.totals()
	fmt.Fprintf(w, "  %-11s ok %d, tool error %d, deliberate refusals %d; flows %d, unexpected errors %d (goal 0: %s)\n", "requests",
		byOutcome[outcomeOK], byOutcome[outcomeToolError], byOutcome[outcomeRefused], flows, failed, verdict(failed == 0))
	d.t.print(w)
	if failed > 0 {
		fmt.Fprintf(w, "Caddy's log (warnings and errors):\n%s\n", p.logTail())
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
