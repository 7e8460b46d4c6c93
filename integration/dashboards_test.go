package integration

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"go.yaml.in/yaml/v3"
)

// The Grafana dashboard and the Prometheus alert rules under deploy/ name
// only series the real Caddy exports, and their PromQL is valid.

// seriesName matches the names of Caddy's series in PromQL.
var seriesName = regexp.MustCompile(`\bcaddy_[a-z0-9_]+\b`)

type alertRules struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Alert string `yaml:"alert"`
			Expr  string `yaml:"expr"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

// alertExprs returns the expressions of deploy/alerts.yml by alert name.
func alertExprs(t *testing.T) map[string]string {
	t.Helper()
	var rules alertRules
	if err := yaml.Unmarshal([]byte(deployFile(t, "alerts.yml")), &rules); err != nil {
		t.Fatalf("alerts.yml: %v", err)
	}
	out := map[string]string{}
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			out[r.Alert] = r.Expr
		}
	}
	if len(out) == 0 {
		t.Fatal("alerts.yml has no rules")
	}
	return out
}

// dashboardExprs returns every PromQL expression of deploy/grafana-dashboard.json:
// the panels' targets and the template variables' queries.
func dashboardExprs(t *testing.T) []string {
	t.Helper()
	var dash any
	if err := json.Unmarshal([]byte(deployFile(t, "grafana-dashboard.json")), &dash); err != nil {
		t.Fatalf("grafana-dashboard.json: %v", err)
	}
	var out []string
	var walk func(v any)
	walk = func(v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				if s, ok := x.(string); ok && (k == "expr" || k == "query" && strings.Contains(s, "caddy_")) {
					out = append(out, s)
				}
				walk(x)
			}
		case []any:
			for _, x := range v {
				walk(x)
			}
		}
	}
	walk(dash)
	if len(out) == 0 {
		t.Fatal("grafana-dashboard.json has no expressions")
	}
	return out
}

// exposedSeries returns the names of the samples in a Prometheus text
// exposition (a histogram's are name_bucket, name_sum and name_count).
func exposedSeries(exposition string) map[string]bool {
	out := map[string]bool{}
	for line := range strings.SplitSeq(exposition, "\n") {
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if i := strings.IndexAny(line, "{ "); i > 0 {
			out[line[:i]] = true
		}
	}
	return out
}

// Every series the dashboard and the alerts name is in the real Caddy's
// /metrics once the events that make each appear have happened: a task
// created, one ended (cancelled), a create refused for the quota, and
// requests through the handler with Caddy's own metrics on.
func TestDashboardAndAlertSeriesExported(t *testing.T) {
	t.Parallel()
	_, addr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr, GlobalOptions: "metrics", Directives: v2025Tools + "max_active_per_principal 1"})
	c := newRPCClient(t, gw.URL)
	c.initialize("")
	running := c.createTask("slow_compute", map[string]any{"seconds": 60}, 60000)
	if m := c.callTool("slow_compute", map[string]any{"seconds": 60}, map[string]any{"ttl": 60000}); m.Error == nil {
		t.Fatalf("a second task past max_active_per_principal 1 was not refused: %s", m.Result)
	}
	if m := c.call("tasks/cancel", map[string]string{"taskId": running.TaskID}); m.Error != nil {
		t.Fatalf("tasks/cancel: %+v", m.Error)
	}
	var exposed map[string]bool
	var exposition string
	waitFor(t, 30*time.Second, "the task's end in the metrics", func() bool {
		exposition = gw.metrics()
		exposed = exposedSeries(exposition)
		return exposed["caddy_mcp_tasks_ended_total"] && exposed["caddy_mcp_tasks_refused_total"]
	})
	// Caddy's request counter is selected by the handler's name.
	if !strings.Contains(exposition, `caddy_http_requests_total{handler="mcp_tasks",`) {
		t.Errorf("no caddy_http_requests_total for handler mcp_tasks:\n%s", grepLines(exposition, "caddy_http_requests_total"))
	}

	named := map[string][]string{} // series -> where
	for alert, expr := range alertExprs(t) {
		for _, s := range seriesName.FindAllString(expr, -1) {
			named[s] = append(named[s], "alert "+alert)
		}
	}
	for _, expr := range dashboardExprs(t) {
		for _, s := range seriesName.FindAllString(expr, -1) {
			named[s] = append(named[s], "dashboard "+expr)
		}
	}
	for s, where := range named {
		if !exposed[s] {
			slices.Sort(where)
			t.Errorf("%s is not exported by the module or Caddy, but used by %s", s, strings.Join(slices.Compact(where), "; "))
		}
	}
	// The dashboard shows every series of the module.
	for s := range exposed {
		if strings.HasPrefix(s, "caddy_mcp_tasks_") && len(named[s]) == 0 && len(named[strings.TrimSuffix(s, "_count")+"_bucket"]) == 0 {
			t.Errorf("%s is exported but neither the dashboard nor the alerts use it", s)
		}
	}
}

// promtool check rules accepts the alerts, and so the dashboard's queries
// (as recording rules, with Grafana's variables given values);
// promtool test rules runs alerts_test.yml.
func TestAlertRulesPromtool(t *testing.T) {
	t.Parallel()
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool not installed (Debian's prometheus package; ./xcaddy.sh test installs it as root): the rules are not checked")
	}
	run := func(dir string, args ...string) {
		t.Helper()
		cmd := exec.Command(promtool, args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	run("deploy", "check", "rules", "alerts.yml")
	run("deploy", "test", "rules", "alerts_test.yml")

	grafana := strings.NewReplacer("$__rate_interval", "5m", "$instance", ".*")
	type record struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var records []record
	for i, expr := range dashboardExprs(t) {
		if strings.HasPrefix(expr, "label_values(") { // Grafana's, not PromQL
			continue
		}
		records = append(records, record{Record: fmt.Sprintf("dashboard:query_%d", i), Expr: grafana.Replace(expr)})
	}
	data, err := yaml.Marshal(map[string]any{"groups": []map[string]any{{"name": "dashboard", "rules": records}}})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "dashboard.yml"), data, 0o600); err != nil {
		t.Fatal(err)
	}
	run(dir, "check", "rules", "dashboard.yml")
}
