package integration

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"
)

// caddy mcp-tasks list filters as the admin API does: by tenant, by the
// route that created the task, and by age (--max-age: created less than
// this long ago, --min-age: more); the next page's command keeps them.
func TestCommandListFilters(t *testing.T) {
	t.Parallel()
	_, addr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr, Directives: v2025Tools + hmacAuth})
	client := func(subject, tenant string) *rpcClient {
		c := newRPCClient(t, gw.URL)
		c.header.Set("Authorization", "Bearer "+hmacToken(t, subject, tenant))
		c.initialize("")
		return c
	}
	alice, bob := client("alice", "t1"), client("bob", "t2")
	quick := map[string]any{"seconds": 0.01}
	old := alice.createTask("slow_compute", quick, 600000)
	created, err := time.Parse(time.RFC3339Nano, old.CreatedAt)
	if err != nil {
		t.Fatalf("createdAt %q: %v", old.CreatedAt, err)
	}
	// The age filters need tasks on either side of the bound: the others
	// are created once the first is four seconds old, and the bound is
	// the age of the moment between, taken as the command starts, so that
	// the command may take up to two seconds to reach Caddy.
	waitFor(t, 30*time.Second, "the first task to be four seconds old", func() bool { return time.Since(created) > 4*time.Second })
	young := bob.createTask("slow_compute", quick, 600000)
	other := alice.createTask("slow_compute", quick, 600000)
	between := created.Add(2 * time.Second)
	ageBetween := func() string { return time.Since(between).Round(time.Millisecond).String() }

	list := func(t *testing.T, args ...string) []string {
		t.Helper()
		out, errOut, ok := runCaddy(t, append([]string{"mcp-tasks", "list", "--address", gw.adminAddr, "--json"}, args...)...)
		if !ok {
			t.Fatalf("list %v failed: %s", args, errOut)
		}
		var page adminPage
		if err := json.Unmarshal([]byte(out), &page); err != nil {
			t.Fatalf("list %v: %v\n%s", args, err, out)
		}
		var ids []string
		for _, tk := range page.Tasks {
			ids = append(ids, tk.ID)
		}
		slices.Sort(ids)
		return ids
	}
	ids := func(tasks ...v2025Task) []string {
		var out []string
		for _, tk := range tasks {
			out = append(out, tk.TaskID)
		}
		slices.Sort(out)
		return out
	}
	// The route of the tasks, as show prints it: an operator reads it
	// there to pass it to list --route.
	out, errOut, ok := runCaddy(t, "mcp-tasks", "show", old.TaskID, "--address", gw.adminAddr, "--json")
	var shown struct {
		Route string `json:"route"`
	}
	if !ok || json.Unmarshal([]byte(out), &shown) != nil || shown.Route == "" {
		t.Fatalf("show --json: %s %s", out, errOut)
	}
	out, errOut, ok = runCaddy(t, "mcp-tasks", "show", old.TaskID, "--address", gw.adminAddr)
	printed := slices.ContainsFunc(strings.Split(out, "\n"), func(line string) bool {
		return slices.Equal(strings.Fields(line), []string{"route:", shown.Route})
	})
	if !ok || !printed {
		t.Errorf("show does not print the route %q that list --route takes:\n%s%s", shown.Route, out, errOut)
	}

	tests := []struct {
		name string
		args []string
		want []string
	}{
		{"tenant", []string{"--tenant", "t2"}, ids(young)},
		{"tenant and principal", []string{"--tenant", "t1", "--principal", "alice"}, ids(old, other)},
		{"route", []string{"--route", shown.Route}, ids(old, young, other)},
		{"another route", []string{"--route", "no-such-route"}, nil},
		{"max-age, all", []string{"--max-age", "1h"}, ids(old, young, other)},
		{"min-age, none", []string{"--min-age", "1h"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := list(t, tt.args...); !slices.Equal(got, tt.want) {
				t.Errorf("list %v = %v, want %v", tt.args, got, tt.want)
			}
		})
	}

	// One after the other, each bound taken just before its command.
	if got, want := list(t, "--max-age", ageBetween()), ids(young, other); !slices.Equal(got, want) {
		t.Errorf("list --max-age (the second task on) = %v, want %v", got, want)
	}
	if got, want := list(t, "--min-age", ageBetween()), ids(old); !slices.Equal(got, want) {
		t.Errorf("list --min-age (the first task) = %v, want %v", got, want)
	}

	t.Run("bad age", func(t *testing.T) {
		t.Parallel()
		for _, arg := range []string{"-5s", "0s", "soon"} {
			_, errOut, ok := runCaddy(t, "mcp-tasks", "list", "--address", gw.adminAddr, "--max-age", arg)
			if ok || !strings.Contains(errOut, "max-age") {
				t.Errorf("list --max-age %s: ok=%v %s", arg, ok, errOut)
			}
		}
	})

	t.Run("next page keeps the filters", func(t *testing.T) {
		t.Parallel()
		out, errOut, ok := runCaddy(t, "mcp-tasks", "list", "--address", gw.adminAddr, "--limit", "1", "--tenant", "t1", "--route", shown.Route, "--max-age", "1h")
		i := strings.Index(out, "more: caddy mcp-tasks list ")
		if !ok || i < 0 {
			t.Fatalf("list --limit 1: %s %s", out, errOut)
		}
		hint := strings.Join(strings.Fields(out[i+len("more: caddy "):]), " ") + " "
		for _, want := range []string{"--tenant t1 ", "--route " + shellQuoted(shown.Route) + " ", "--max-age 1h0m0s "} {
			if !strings.Contains(hint, want) {
				t.Errorf("next page hint %q lacks %q", hint, want)
			}
		}
		// As a shell reads it: the route is quoted, and has no spaces.
		args := strings.Fields(hint)
		for i, a := range args {
			args[i] = strings.TrimSuffix(strings.TrimPrefix(a, "'"), "'")
		}
		out, errOut, ok = runCaddy(t, args...)
		if !ok || !strings.Contains(out, old.TaskID) || strings.Contains(out, young.TaskID) || strings.Contains(out, other.TaskID) {
			t.Errorf("second page, from the hint %q:\n%s\n%s", hint, out, errOut)
		}
	})
}

// shellQuoted is s as the next page hint writes it: bare when it is safe.
func shellQuoted(s string) string {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@,+%", r)) {
			return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
	}
	return s
}
