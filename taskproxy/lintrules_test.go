package taskproxy

import (
	"os"
	"os/exec"
	"slices"
	"strings"
	"testing"

	"go.yaml.in/yaml/v3"
)

// depguardList is one rule of depguard in .ci/golangci.yml.
type depguardList struct {
	ListMode string         `yaml:"list-mode"`
	Files    []string       `yaml:"files"`
	Allow    []string       `yaml:"allow"`
	Deny     []depguardDeny `yaml:"deny"`
}

// depguardDeny is a package a depguard rule refuses, with the reason.
type depguardDeny struct {
	Pkg  string `yaml:"pkg"`
	Desc string `yaml:"desc"`
}

func (l depguardList) denyPkgs() []string {
	pkgs := make([]string, 0, len(l.Deny))
	for _, d := range l.Deny {
		pkgs = append(pkgs, d.Pkg)
	}
	return pkgs
}

// longestPrefix is the longest entry of list that is imp or a prefix of it
// (an entry ending in $ matches imp exactly), or "".
func longestPrefix(list []string, imp string) string {
	best := ""
	for _, e := range list {
		exact, isExact := strings.CutSuffix(e, "$")
		if (isExact && imp == exact || !isExact && strings.HasPrefix(imp, e)) && len(e) > len(best) {
			best = e
		}
	}
	return best
}

// denies says whether the list refuses imp, as depguard decides it for
// lists whose entries are not prefixes of one another.
func (l depguardList) denies(imp string) bool {
	d, a := longestPrefix(l.denyPkgs(), imp), longestPrefix(l.Allow, imp)
	switch l.ListMode {
	case "lax":
		return d != "" && !(a != "" && len(a) > len(d))
	case "", "original":
		return d != "" || len(l.Allow) > 0 && a == ""
	}
	return true // strict and unknown modes are not used here
}

// loadDepguard reads the depguard rules of the module's .ci/golangci.yml.
func loadDepguard(t *testing.T) map[string]depguardList {
	t.Helper()
	b, err := os.ReadFile("../.ci/golangci.yml")
	if err != nil {
		t.Fatalf("reading the lint configuration: %v", err)
	}
	var cfg struct {
		Linters struct {
			Enable   []string `yaml:"enable"`
			Settings struct {
				Depguard struct {
					Rules map[string]depguardList `yaml:"rules"`
				} `yaml:"depguard"`
			} `yaml:"settings"`
		} `yaml:"linters"`
	}
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		t.Fatalf("parsing .ci/golangci.yml: %v", err)
	}
	if !slices.Contains(cfg.Linters.Enable, "depguard") {
		t.Fatal(".ci/golangci.yml does not enable depguard")
	}
	return cfg.Linters.Settings.Depguard.Rules
}

// The lint's depguard rules forbid what importRules forbids: for every
// layer, the same packages of the module and outside it, among every
// package of the module and the outside packages the rules name. depguard
// sees the direct imports of non-test files, TestImportRules every package
// a layer reaches; neither is complete without the other, so a change to
// one table is a change to both.
func TestDepguardMirrorsImportRules(t *testing.T) {
	t.Parallel()
	rules := loadDepguard(t)
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}}", module+"...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	candidates := strings.Fields(string(out))
	for _, rule := range importRules {
		for _, bad := range rule.forbidden {
			candidates = append(candidates, bad, bad+"/v2")
		}
	}
	candidates = append(candidates, "net/http", "net/http/httptrace", "net/netip", "encoding/json", "go.uber.org/zap", "github.com/caddyserver/caddy/v2", "github.com/dgraph-io/badger/v4", "github.com/jackc/pgx/v5")
	slices.Sort(candidates)
	candidates = slices.Compact(candidates)

	for _, rule := range importRules {
		t.Run(rule.pkg, func(t *testing.T) {
			t.Parallel()
			glob := "${config-path}/" + rule.pkg + "/*.go"
			var lists []depguardList
			for name, l := range rules {
				if !slices.Contains(l.Files, glob) {
					continue
				}
				if !slices.Contains(l.Files, "!$test") {
					t.Errorf("depguard rule %s checks test files; importRules leaves tests aside", name)
				}
				for _, entries := range [][]string{l.Allow, l.denyPkgs()} {
					for _, a := range entries {
						for _, b := range entries {
							if a != b && strings.HasPrefix(b, a) {
								t.Errorf("depguard rule %s: %s is a prefix of %s (depguard would compare an import with one of them only)", name, a, b)
							}
						}
					}
				}
				lists = append(lists, l)
			}
			if len(lists) == 0 {
				t.Fatalf("no depguard rule has files %q", glob)
			}
			for _, imp := range candidates {
				if imp == module+rule.pkg {
					continue
				}
				want := forbiddenDep(rule.allowed, rule.forbidden, imp) != ""
				got := slices.ContainsFunc(lists, func(l depguardList) bool { return l.denies(imp) })
				if got != want {
					t.Errorf("importing %s: depguard refuses %v, importRules %v", imp, got, want)
				}
			}
		})
	}
}

// The mirror check catches a rule that refuses too little or too much.
func TestDepguardListDenies(t *testing.T) {
	t.Parallel()
	lax := depguardList{
		ListMode: "lax",
		Allow:    []string{module + "taskproxy/jsonrpc"},
		Deny:     []depguardDeny{{Pkg: strings.TrimSuffix(module, "/")}, {Pkg: "net/http"}},
	}
	tests := []struct {
		imp    string
		denied bool
	}{
		{module + "taskproxy/jsonrpc", false},
		{module + "taskproxy/sse", true},
		{module + "auth", true},
		{"net/http/httptrace", true},
		{"net/netip", false},
		{"go.uber.org/zap", false},
	}
	for _, tt := range tests {
		if got := lax.denies(tt.imp); got != tt.denied {
			t.Errorf("lax list importing %s: denied %v, want %v", tt.imp, got, tt.denied)
		}
	}
}
