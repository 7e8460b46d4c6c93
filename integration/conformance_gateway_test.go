package integration

import (
	"testing"
)

// TestConformanceThroughGateway runs the released conformance suite's
// default server suite (0.1.16) through Caddy with mcp_tasks in front of
// go-sdk's everything server. The gateway must be invisible to it: every
// check passes, as it does directly (TestConformanceBaselineDirect).
//
//nolint:paralleltest // the suite judges answers against the gateway's task_after, which a machine loaded by other tests can overrun
func TestConformanceThroughGateway(t *testing.T) {
	bin, env := conformanceCLI(t, conformanceStableVersion)
	server := buildEverythingServer(t)
	addr := freeAddr(t)
	startProcess(t, addr, server, "-http", addr, "-stateless=false")
	gw := startGateway(t, gatewayOptions{Upstream: addr})

	rep := runConformance(t, bin, env, "server", "--url", gw.URL)
	t.Log(rep.String())
	passed, failed, total := rep.Totals()
	if rep.ExitCode != 0 || failed != 0 || passed != total {
		t.Errorf("through the gateway: %d/%d passed, %d failed, exit %d; want all passed", passed, total, failed, rep.ExitCode)
	}
	if len(rep.Scenarios) < baselineMinScenarios || total < baselineMinChecks {
		t.Errorf("ran %d scenarios with %d checks, want at least %d and %d", len(rep.Scenarios), total, baselineMinScenarios, baselineMinChecks)
	}
	if t.Failed() {
		t.Logf("CLI output:\n%s", tail(rep.Output, 8000))
	}
}
