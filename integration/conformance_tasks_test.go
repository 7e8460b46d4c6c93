package integration

import (
	"maps"
	"testing"
)

// v2026Tools is the gateway configuration the tasks scenarios expect of a
// server: failing_job, protocol_error_job and test_tool_with_task run only
// as tasks. task_after is short because the scenarios expect one-second
// calls to become tasks. protocol_error_job is required, not left to
// task_after: the fixture answers it after 200ms, the same as task_after,
// and the lifecycle scenario expects a task every time (its error passed
// through as the call's answer when the upstream won the race, which
// failed CI once).
const v2026Tools = `
task_after 200ms
tool failing_job required
tool protocol_error_job required
tool test_tool_with_task required
`

// tasksScenarios are the ten tasks scenarios of the 0.2.0-alpha.12 suite.
var tasksScenarios = []string{
	"tasks-lifecycle", "tasks-capability-negotiation", "tasks-wire-fields",
	"tasks-request-state-removal", "tasks-mrtr-input", "tasks-request-headers",
	"tasks-dispatch-and-envelope", "tasks-status-notifications",
	"tasks-required-task-error", "tasks-mrtr-composition",
}

// TestConformanceTasksThroughGateway runs the official suite's tasks
// scenarios (2026-07-28 wire, io.modelcontextprotocol/tasks) through the
// gateway in front of the plain go-sdk upstream, which knows no tasks.
//
//nolint:paralleltest // the suite judges answers against the gateway's task_after, which a machine loaded by other tests can overrun
func TestConformanceTasksThroughGateway(t *testing.T) {
	bin, env := conformanceCLI(t, conformanceAlphaVersion)
	_, addr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: v2026Tools})
	total := conformanceReport{Scenarios: map[string]*scenarioResult{}}
	for _, scenario := range tasksScenarios {
		rep := runConformance(t, bin, env, "server", "--url", gw.URL, "--scenario", scenario)
		maps.Copy(total.Scenarios, rep.Scenarios)
		if passed, failed, all := rep.Totals(); failed != 0 {
			t.Errorf("%s: %d/%d passed, %d failed\n%s", scenario, passed, all, failed, rep.String())
		}
	}
	passed, failed, all := total.Totals()
	t.Logf("tasks scenarios through the gateway: %d/%d passed, %d failed\n%s", passed, all, failed, total.String())
	// tasks-status-notifications has no server check in this release: its one
	// check is always SKIPPED by the suite itself. All the others must pass.
	if passed < 44 || failed != 0 {
		t.Errorf("%d checks passed and %d failed, want at least 44 and none", passed, failed)
	}
	if len(total.Scenarios) != len(tasksScenarios) {
		t.Errorf("ran %d scenarios, want %d", len(total.Scenarios), len(tasksScenarios))
	}
}
