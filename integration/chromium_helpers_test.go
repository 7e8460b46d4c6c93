package integration

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// Debian's chromium, driven over the DevTools protocol (chromedp), for the
// tests of the console. When it is missing and the tests run as root with
// apt-get (as ./xcaddy.sh test does, and CI), it is installed once;
// otherwise the tests that need it are skipped, saying why.
var sharedChromium struct {
	once sync.Once
	path string
	why  string
}

func chromiumPath(t testing.TB) string {
	t.Helper()
	sharedChromium.once.Do(func() {
		if p, err := exec.LookPath("chromium"); err == nil {
			sharedChromium.path = p
			return
		}
		if os.Geteuid() != 0 {
			sharedChromium.why = "chromium is not installed and installing it needs root (apt-get install -y chromium)"
			return
		}
		if _, err := exec.LookPath("apt-get"); err != nil {
			sharedChromium.why = "chromium is not installed and there is no apt-get to install it"
			return
		}
		cmd := exec.Command("apt-get", "install", "-y", "-qq", "--no-install-recommends", "chromium")
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
		if out, err := cmd.CombinedOutput(); err != nil {
			sharedChromium.why = fmt.Sprintf("apt-get install chromium: %v\n%s", err, out)
			return
		}
		p, err := exec.LookPath("chromium")
		if err != nil {
			sharedChromium.why = "apt-get installed chromium, but it is not on PATH"
			return
		}
		sharedChromium.path = p
	})
	if sharedChromium.path == "" {
		t.Skipf("no headless browser for the console test: %s", sharedChromium.why)
	}
	return sharedChromium.path
}

// startBrowser starts a headless Chromium with a profile of its own and
// returns a tab's context; the browser is killed when the test ends.
// Chromium's first start on a busy machine is slow: the deadline is a
// bound on the whole test's browsing, not a measure of it.
func startBrowser(t testing.TB) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromiumPath(t)),
		chromedp.NoSandbox, // running as root in a container
		chromedp.DisableGPU,
		chromedp.UserDataDir(filepath.Join(t.TempDir(), "chromium")),
		chromedp.WindowSize(1400, 1000),
	)
	allocCtx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	deadlineCtx, cancelDeadline := context.WithTimeout(allocCtx, 5*time.Minute)
	ctx, cancelTab := chromedp.NewContext(deadlineCtx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(func() {
		cancelTab()
		cancelDeadline()
		cancelAlloc() // kills the browser and waits for it
	})
	return ctx
}

// waitPage evaluates expression in the page until cond holds for its
// value, and returns that value.
func waitPage[T any](t testing.TB, ctx context.Context, what, expression string, cond func(T) bool) T {
	t.Helper()
	var last T
	var lastErr error
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expression))
		if err == nil {
			last = v
			if cond(v) {
				return v
			}
		}
		lastErr = err
		if ctx.Err() != nil {
			break
		}
		time.Sleep(200 * time.Millisecond)
	}
	t.Fatalf("timed out waiting for %s: last %+v (error %v)", what, last, lastErr)
	return last
}
