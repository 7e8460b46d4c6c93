package integration

import (
	"context"
	"encoding/json"
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

// The deploy files under deploy/ (systemd unit, Dockerfile, Kubernetes
// probes) are the ones the README shows, valid for the tools that read
// them where those tools run here, and their health commands work against
// the real binary.

// deployFile reads a file of deploy/.
func deployFile(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("deploy", name))
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// installedPaths maps the paths the deploy files name on a server to the
// ones of this test: the built binary and the gateway's Caddyfile.
func installedPaths(s, config string) string {
	return strings.NewReplacer("/usr/bin/caddy", caddyBinary, "/etc/caddy/Caddyfile", config).Replace(s)
}

// The README shows the unit and the Dockerfile as they are in deploy/.
func TestDeployFilesInREADME(t *testing.T) {
	t.Parallel()
	data := readManual(t)
	for lang, name := range map[string]string{"ini": "caddy-mcp-tasks.service", "dockerfile": "Dockerfile"} {
		m := regexp.MustCompile("(?s)```" + lang + "\n(.*?)```").FindStringSubmatch(string(data))
		if m == nil {
			t.Errorf("README has no %s block for deploy/%s", lang, name)
			continue
		}
		if want := deployFile(t, name); m[1] != want {
			t.Errorf("README's %s block differs from deploy/%s:\n%s\nwant:\n%s", lang, name, m[1], want)
		}
	}
	// The README shows the probes of kubernetes.yaml, with other comments.
	m := regexp.MustCompile("(?s)```yaml\n(startupProbe:.*?)```").FindStringSubmatch(string(data))
	if m == nil {
		t.Fatal("README has no yaml block with the Kubernetes probes")
	}
	var readme map[string]k8sProbe
	if err := yaml.Unmarshal([]byte(m[1]), &readme); err != nil {
		t.Fatalf("README's probes: %v", err)
	}
	var file k8sManifest
	if err := yaml.Unmarshal([]byte(deployFile(t, "kubernetes.yaml")), &file); err != nil {
		t.Fatalf("kubernetes.yaml: %v", err)
	}
	c := file.Spec.Template.Spec.Containers[0]
	for name, want := range map[string]*k8sProbe{"startupProbe": c.StartupProbe, "livenessProbe": c.LivenessProbe, "readinessProbe": c.ReadinessProbe} {
		if got, ok := readme[name]; !ok || want == nil || !slices.Equal(got.Exec.Command, want.Exec.Command) || got.TimeoutSeconds != want.TimeoutSeconds {
			t.Errorf("README's %s %+v differs from kubernetes.yaml's %+v", name, got, want)
		}
	}
}

// systemd-analyze verify accepts the unit, with no warning either (it
// exits 0 on unknown keys and bad values, saying so).
func TestDeploySystemdUnitVerifies(t *testing.T) {
	t.Parallel()
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze not installed (Debian's systemd package): the unit is not verified")
	}
	// It checks that the commands exist: point them at the built binary.
	unit := filepath.Join(t.TempDir(), "caddy-mcp-tasks.service")
	if err := os.WriteFile(unit, []byte(installedPaths(deployFile(t, "caddy-mcp-tasks.service"), "/etc/caddy/Caddyfile")), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command(analyze, "verify", unit).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) != 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

// unitValue returns the value of key in a systemd unit.
func unitValue(t *testing.T, unit, key string) string {
	t.Helper()
	for line := range strings.SplitSeq(unit, "\n") {
		if v, ok := strings.CutPrefix(line, key+"="); ok {
			return v
		}
	}
	t.Fatalf("the unit has no %s", key)
	return ""
}

// dockerHealthcheck returns the exec form command of the Dockerfile's
// HEALTHCHECK, after a check that each line is an instruction a Dockerfile
// has and that COPY --from names a stage.
func dockerHealthcheck(t *testing.T, dockerfile string) []string {
	t.Helper()
	known := map[string]bool{"FROM": true, "ENV": true, "RUN": true, "COPY": true, "HEALTHCHECK": true, "EXPOSE": true,
		"CMD": true, "ENTRYPOINT": true, "WORKDIR": true, "ARG": true, "LABEL": true, "USER": true, "VOLUME": true}
	stages := map[string]bool{}
	var health []string
	for line := range strings.SplitSeq(dockerfile, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if !known[fields[0]] {
			t.Errorf("Dockerfile: unknown instruction %q", line)
		}
		switch {
		case fields[0] == "FROM" && len(fields) == 4 && strings.EqualFold(fields[2], "AS"):
			stages[fields[3]] = true
		case fields[0] == "COPY" && strings.HasPrefix(fields[1], "--from="):
			if !stages[strings.TrimPrefix(fields[1], "--from=")] {
				t.Errorf("Dockerfile: %q copies from a stage not defined before it", line)
			}
		case fields[0] == "HEALTHCHECK":
			_, cmd, ok := strings.Cut(line, " CMD ")
			if !ok || json.Unmarshal([]byte(cmd), &health) != nil || len(health) == 0 {
				t.Fatalf("Dockerfile: HEALTHCHECK %q has no exec form CMD [\"…\"]", line)
			}
		}
	}
	if health == nil {
		t.Fatal("Dockerfile: no HEALTHCHECK")
	}
	return health
}

type k8sProbe struct {
	Exec struct {
		Command []string `yaml:"command"`
	} `yaml:"exec"`
	TimeoutSeconds int `yaml:"timeoutSeconds"`
}

type k8sManifest struct {
	Spec struct {
		Template struct {
			Spec struct {
				TerminationGracePeriodSeconds int `yaml:"terminationGracePeriodSeconds"`
				Containers                    []struct {
					StartupProbe   *k8sProbe `yaml:"startupProbe"`
					LivenessProbe  *k8sProbe `yaml:"livenessProbe"`
					ReadinessProbe *k8sProbe `yaml:"readinessProbe"`
				} `yaml:"containers"`
			} `yaml:"spec"`
		} `yaml:"template"`
	} `yaml:"spec"`
}

// The health commands of the unit (its start waits for readiness), the
// Dockerfile's HEALTHCHECK and the Kubernetes exec probes, run as written
// with the built binary and a gateway's Caddyfile in place of the
// installed ones: each exits 0 against a gateway that is ready.
func TestDeployProbeCommands(t *testing.T) {
	t.Parallel()
	_, addr := testUpstream(t)
	gw := startGateway(t, gatewayOptions{Upstream: addr})

	var m k8sManifest
	if err := yaml.Unmarshal([]byte(deployFile(t, "kubernetes.yaml")), &m); err != nil {
		t.Fatalf("kubernetes.yaml: %v", err)
	}
	pod := m.Spec.Template.Spec
	if len(pod.Containers) != 1 || pod.Containers[0].StartupProbe == nil || pod.Containers[0].LivenessProbe == nil || pod.Containers[0].ReadinessProbe == nil {
		t.Fatalf("kubernetes.yaml: want one container with startup, liveness and readiness probes, got %+v", pod.Containers)
	}
	if pod.TerminationGracePeriodSeconds <= 5 {
		t.Errorf("kubernetes.yaml: terminationGracePeriodSeconds %d leaves no room for the 5 s drain", pod.TerminationGracePeriodSeconds)
	}
	c := pod.Containers[0]
	if c.ReadinessProbe.TimeoutSeconds <= 5 {
		t.Errorf("kubernetes.yaml: the readiness probe's timeoutSeconds %d is not above the store probe's 5 s", c.ReadinessProbe.TimeoutSeconds)
	}
	// The unit's ExecStartPost is a shell line; it loops until ready.
	startPost, ok := strings.CutPrefix(unitValue(t, deployFile(t, "caddy-mcp-tasks.service"), "ExecStartPost"), "/bin/sh -c ")
	if !ok || len(startPost) < 2 || startPost[0] != '\'' || startPost[len(startPost)-1] != '\'' {
		t.Fatalf("the unit's ExecStartPost is not /bin/sh -c '…': %q", startPost)
	}
	commands := map[string][]string{
		"the unit's ExecStartPost":   {"/bin/sh", "-c", startPost[1 : len(startPost)-1]},
		"the Dockerfile HEALTHCHECK": dockerHealthcheck(t, deployFile(t, "Dockerfile")),
		"the startup probe":          c.StartupProbe.Exec.Command,
		"the liveness probe":         c.LivenessProbe.Exec.Command,
		"the readiness probe":        c.ReadinessProbe.Exec.Command,
	}
	for what, argv := range commands {
		for i := range argv {
			argv[i] = installedPaths(argv[i], gw.config)
		}
		if argv[0] == "caddy" { // on the image's PATH
			argv[0] = caddyBinary
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).CombinedOutput()
		cancel()
		if err != nil {
			t.Errorf("%s (%q): %v\n%s", what, argv, err, out)
		}
	}
	for _, probe := range []*k8sProbe{c.StartupProbe, c.LivenessProbe, c.ReadinessProbe} {
		if !strings.Contains(strings.Join(probe.Exec.Command, " "), "mcp-tasks health --") {
			t.Errorf("kubernetes.yaml: probe %q is not caddy mcp-tasks health --live/--ready", probe.Exec.Command)
		}
	}
}
