package integration

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// docBlock is a fenced code block of a Markdown file.
type docBlock struct {
	file  string // relative to the repository root
	line  int    // of the opening fence
	label string
	body  string
}

var fenceRE = regexp.MustCompile("^([ \t]*)```([^` \t]*)[ \t]*$")

// markdownFiles returns the text of every *.md of the repository (hidden
// directories and node_modules left out), by path relative to this
// package's directory.
func markdownFiles(t *testing.T) map[string]string {
	t.Helper()
	texts := map[string]string{}
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != ".." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(d.Name(), ".md") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		texts[filepath.Clean(path)] = string(data)
		return nil
	})
	if err != nil {
		t.Fatalf("walking the repository's Markdown files: %v", err)
	}
	return texts
}

// markdownBlocks returns the fenced code blocks of every *.md of the
// repository, with the indentation of their fence removed from their
// lines.
func markdownBlocks(t *testing.T) []docBlock {
	t.Helper()
	var blocks []docBlock
	for path, text := range markdownFiles(t) {
		rel, _ := filepath.Rel("..", path)
		lines := strings.Split(text, "\n")
		for i := 0; i < len(lines); i++ {
			m := fenceRE.FindStringSubmatch(lines[i])
			if m == nil {
				continue
			}
			b := docBlock{file: rel, line: i + 1, label: m[2]}
			var body strings.Builder
			for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
				body.WriteString(strings.TrimPrefix(lines[i], m[1]) + "\n")
			}
			b.body = body.String()
			blocks = append(blocks, b)
		}
	}
	return blocks
}

// firstToken is the first token of a Caddyfile outside comments.
func firstToken(body string) string {
	for line := range strings.Lines(body) {
		if f := strings.Fields(line); len(f) > 0 && !strings.HasPrefix(f[0], "#") {
			return f[0]
		}
	}
	return ""
}

// isSiteAddress tells a site address from a directive's name.
func isSiteAddress(tok string) bool {
	return strings.ContainsAny(tok, ":./") || tok == "localhost"
}

// topLevelParts splits a fragment of subdirectives at the blank lines
// between its top-level entries: alternatives shown one after the other
// (several auth jwt blocks) are configurations of their own.
func topLevelParts(body string) []string {
	var parts []string
	var cur strings.Builder
	depth := 0
	for line := range strings.Lines(body) {
		if strings.TrimSpace(line) == "" && depth == 0 {
			if strings.TrimSpace(cur.String()) != "" {
				parts = append(parts, cur.String())
			}
			cur.Reset()
			continue
		}
		code, _, _ := strings.Cut(line, "#")
		depth += strings.Count(code, "{") - strings.Count(code, "}")
		cur.WriteString(line)
	}
	if strings.TrimSpace(cur.String()) != "" {
		parts = append(parts, cur.String())
	}
	return parts
}

func indentLines(s, prefix string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		if strings.TrimSpace(line) != "" {
			b.WriteString(prefix)
		}
		b.WriteString(line)
	}
	return b.String()
}

// snippetConfigs are the whole Caddyfiles a snippet stands for, decided by
// its first token: a global options block or a site address is whole;
// directives go in a site; subdirectives of mcp_tasks (a first token Caddy
// does not know as a directive) go in an mcp_tasks block in a site, one
// configuration per top-level entry.
func snippetConfigs(t *testing.T, body string) []string {
	t.Helper()
	tok := firstToken(body)
	if tok == "{" || isSiteAddress(tok) {
		return []string{body}
	}
	site := ":8080 {\n" + indentLines(body, "\t") + "}\n"
	if stderr, ok := adaptCaddyfile(t, site, false); ok || !strings.Contains(stderr, "unrecognized directive: "+tok) {
		return []string{site}
	}
	var configs []string
	for _, part := range topLevelParts(body) {
		configs = append(configs, ":8080 {\n\tmcp_tasks {\n"+indentLines(part, "\t\t")+"\t}\n}\n")
	}
	return configs
}

// snippetEnv are the environment variables the snippets name, with values
// that provision: 32-byte HMAC keys and a DSN (the PostgreSQL store
// connects when it first serves, not when it is provisioned).
var snippetEnv = []string{
	"MCP_JWT_SECRET=docs-snippet-secret-of-at-least-32-bytes",
	"MCP_JWT_SECRET_NEXT=docs-snippet-next-secret-of-at-least-32-bytes",
	"MCP_TASKS_DSN=postgres://mcp@127.0.0.1:1/mcp?connect_timeout=1",
}

// adaptCaddyfile runs caddy adapt on config, with --validate (which
// provisions every module) when asked, with Caddy's data and config
// directories in a temporary home, and returns its log and whether it
// succeeded.
func adaptCaddyfile(t *testing.T, config string, validate bool) (stderr string, ok bool) {
	t.Helper()
	dir := t.TempDir()
	file := filepath.Join(dir, "Caddyfile")
	if err := os.WriteFile(file, []byte(config), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"adapt", "--config", file, "--adapter", "caddyfile"}
	if validate {
		args = append(args, "--validate")
	}
	cmd := exec.Command(caddyBinary, args...)
	cmd.Env = append(os.Environ(), append(snippetEnv, "HOME="+dir, "XDG_DATA_HOME="+filepath.Join(dir, "data"), "XDG_CONFIG_HOME="+filepath.Join(dir, "config"))...)
	var errOut strings.Builder
	cmd.Stderr = &errOut
	err := cmd.Run()
	var exited *exec.ExitError
	if err != nil && !errors.As(err, &exited) {
		t.Fatalf("caddy %v: %v", args, err)
	}
	return errOut.String(), err == nil
}

// publicKeyFile writes an Ed25519 public key in PEM to dir, for the
// snippets' public_key files.
func publicKeyFile(t *testing.T, dir string) string {
	t.Helper()
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "key.pem")
	if err := os.WriteFile(file, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	return file
}

// withTempPaths points the directories and files a snippet reads or
// writes at dir, so that --validate can provision its stores, logs and
// keys.
func withTempPaths(config, dir, keyFile string) string {
	config = regexp.MustCompile(`(storage_dir\s+)\S+`).ReplaceAllString(config, "${1}"+filepath.Join(dir, "store"))
	config = regexp.MustCompile(`(?m)(^\s*dir\s+)\S+`).ReplaceAllString(config, "${1}"+filepath.Join(dir, "store"))
	config = regexp.MustCompile(`(public_key\s+)/\S+`).ReplaceAllString(config, "${1}"+keyFile)
	return regexp.MustCompile(`(output file\s+)\S+`).ReplaceAllString(config, "${1}"+filepath.Join(dir, "log"))
}

// Every Caddyfile snippet of every Markdown file is formatted as caddy fmt
// formats it and adapts: fragments wrapped in a site (and an mcp_tasks
// block for subdirectives), with --validate (stores, logs and key files in
// a temporary directory, environment variables given values). A block
// that is a Caddyfile is labelled caddyfile. Failures name the file and
// line of the snippet.
func TestDocsCaddyfileSnippets(t *testing.T) {
	t.Parallel()
	var snippets, configs int
	keyFile := publicKeyFile(t, t.TempDir())
	for _, b := range markdownBlocks(t) {
		where := b.file + ":" + strconv.Itoa(b.line)
		if b.label == "" {
			if tok := firstToken(b.body); tok == "{" || strings.Contains(b.body, "mcp_tasks") && strings.Contains(b.body, "{\n") {
				t.Errorf("%s: an unlabelled block that looks like a Caddyfile: label it caddyfile", where)
			}
			continue
		}
		if b.label != "caddyfile" {
			continue
		}
		snippets++
		dir := t.TempDir()
		file := filepath.Join(dir, "snippet")
		if err := os.WriteFile(file, []byte(b.body), 0o600); err != nil {
			t.Fatal(err)
		}
		// caddy fmt prints the formatted file and exits 1 when it differs
		// from the input.
		formatted, err := exec.Command(caddyBinary, "fmt", file).Output()
		if len(formatted) == 0 {
			t.Errorf("%s: caddy fmt: %v", where, err)
		} else if string(formatted) != b.body {
			t.Errorf("%s: not as caddy fmt formats it; want\n%s", where, formatted)
		}
		for _, config := range snippetConfigs(t, b.body) {
			configs++
			if stderr, ok := adaptCaddyfile(t, withTempPaths(config, dir, keyFile), true); !ok {
				t.Errorf("%s: caddy adapt --validate of\n%s\nfailed: %s", where, config, stderr)
			}
		}
	}
	if snippets == 0 {
		t.Fatal("no caddyfile blocks found in the repository's Markdown files")
	}
	t.Logf("%d caddyfile snippets checked: %d configurations adapted with --validate", snippets, configs)
}
