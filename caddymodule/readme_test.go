package caddymodule

import (
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	"github.com/prometheus/client_golang/prometheus"
)

// readmePairRE matches a caddyfile block followed, after blank lines only,
// by a json block: a Caddyfile fragment and the handler object it adapts to.
var readmePairRE = regexp.MustCompile("```caddyfile\n([^`]*)```\n\\s*```json\n([^`]*)```")

// findHandler returns the first object of the adapted config whose
// handler is name.
func findHandler(v any, name string) map[string]any {
	switch v := v.(type) {
	case map[string]any:
		if v["handler"] == name {
			return v
		}
		for _, e := range v {
			if h := findHandler(e, name); h != nil {
				return h
			}
		}
	case []any:
		for _, e := range v {
			if h := findHandler(e, name); h != nil {
				return h
			}
		}
	}
	return nil
}

// The reference's side-by-side pairs say what caddy adapt makes of each
// Caddyfile fragment: every pair is adapted and the mcp_tasks handler
// object compared with the JSON shown beside it.
func TestReadmeCaddyfileJSONPairs(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	pairs := readmePairRE.FindAllStringSubmatch(string(data), -1)
	if len(pairs) < 6 {
		t.Fatalf("README.md has %d Caddyfile and JSON pairs, want at least 6", len(pairs))
	}
	for _, pair := range pairs {
		fragment, shown := pair[1], pair[2]
		t.Run(strings.SplitN(fragment, "\n", 3)[1], func(t *testing.T) {
			t.Parallel()
			var site strings.Builder
			site.WriteString(":8080 {\n")
			for line := range strings.Lines(fragment) {
				site.WriteString("\t" + line)
			}
			site.WriteString("}\n")
			out, _, err := caddyconfig.GetAdapter("caddyfile").Adapt([]byte(site.String()), nil)
			if err != nil {
				t.Fatalf("adapting\n%s: %v", site.String(), err)
			}
			var config, want any
			if err := json.Unmarshal(out, &config); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal([]byte(shown), &want); err != nil {
				t.Fatalf("the JSON shown is not JSON: %v\n%s", err, shown)
			}
			got := findHandler(config, "mcp_tasks")
			if !reflect.DeepEqual(any(got), want) {
				pretty, _ := json.MarshalIndent(got, "", "  ")
				t.Errorf("README.md shows\n%s\nfor\n%s\ncaddy adapt makes\n%s", shown, fragment, pretty)
			}
		})
	}
}

// The HELP text of caddy_mcp_tasks_refused_total is what a Prometheus user
// reads first: it names every reason the reference's Metrics table lists.
func TestRefusedHelpNamesReadmeReasons(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	row := regexp.MustCompile("(?m)^\\| `caddy_mcp_tasks_refused_total` \\|[^|]*\\| (.*) \\|$").FindStringSubmatch(string(data))
	if row == nil {
		t.Fatal("README.md's Metrics table has no caddy_mcp_tasks_refused_total row")
	}
	// The reasons are the code spans outside parentheses; those inside
	// name the options behind them.
	meaning := regexp.MustCompile(`\([^()]*\)`).ReplaceAllString(row[1], "")
	var reasons []string
	for _, m := range regexp.MustCompile("`([a-z_]+)`").FindAllStringSubmatch(meaning, -1) {
		reasons = append(reasons, m[1])
	}
	if len(reasons) < 6 {
		t.Fatalf("found the reasons %v in %q, want at least 6", reasons, row[1])
	}
	initMetrics()
	descs := make(chan *prometheus.Desc, 1)
	metrics.refused.Describe(descs)
	help := (<-descs).String()
	for _, reason := range reasons {
		if !strings.Contains(help, reason) {
			t.Errorf("the HELP of caddy_mcp_tasks_refused_total does not name the reason %q that README.md lists: %s", reason, help)
		}
	}
}
