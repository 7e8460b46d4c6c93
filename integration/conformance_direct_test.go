package integration

import (
	"testing"
)

// Minimum size of the @modelcontextprotocol/conformance 0.1.16 default
// ("active") server suite as observed against go-sdk's everything server:
// 30 scenarios with 40 checks in total. Asserting a floor catches a harness
// that silently stops finding results.
const (
	baselineMinScenarios = 30
	baselineMinChecks    = 40
)

// TestConformanceBaselineDirect runs the released conformance CLI's default
// server suite directly against go-sdk's everything server in stateful mode
// and requires every check to pass. It proves that the harness (install,
// build, process management, result parsing) works and records the baseline
// the gateway is later compared with.
//
//nolint:paralleltest // the suite judges answers against the gateway's task_after, which a machine loaded by other tests can overrun
func TestConformanceBaselineDirect(t *testing.T) {
	bin, env := conformanceCLI(t, conformanceStableVersion)
	server := buildEverythingServer(t)

	addr := freeAddr(t)
	startProcess(t, addr, server, "-http", addr, "-stateless=false")

	rep := runConformance(t, bin, env, "server", "--url", "http://"+addr+"/mcp")
	t.Log(rep.String())

	passed, failed, total := rep.Totals()
	if rep.ExitCode != 0 {
		t.Errorf("conformance CLI exited with %d, want 0", rep.ExitCode)
	}
	if failed != 0 {
		t.Errorf("%d checks failed or warned, want 0 (see summary above)", failed)
	}
	if passed != total {
		t.Errorf("%d of %d checks passed, want all", passed, total)
	}
	if len(rep.Scenarios) < baselineMinScenarios {
		t.Errorf("ran %d scenarios, want at least %d", len(rep.Scenarios), baselineMinScenarios)
	}
	if total < baselineMinChecks {
		t.Errorf("got %d checks, want at least %d", total, baselineMinChecks)
	}
	for _, name := range rep.ScenarioNames() {
		if s := rep.Scenarios[name]; s.Passed == 0 {
			t.Errorf("scenario %s: no passing check (%d checks)", name, s.Total)
		}
	}
	if t.Failed() {
		t.Logf("CLI output:\n%s", tail(rep.Output, 8000))
	}
}
