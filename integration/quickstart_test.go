package integration

import (
	"bufio"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// quickstartStep is one curl of the README's 2025-11-25 session: its
// request and the answer the README shows.
type quickstartStep struct {
	line    string   // the curl command, for messages
	headers []string // "Name: value", with $ID still in them
	body    string   // with $ID still in it
	status  int      // the HTTP status shown, 0 when none
	answer  string   // the JSON shown, with … where it was trimmed
}

var (
	curlBodyRE = regexp.MustCompile(`-d '(.*)'\s*$`)
	statusRE   = regexp.MustCompile(`^# HTTP/1\.1 (\d+)`)
	idVarRE    = regexp.MustCompile(`^ID=(\S+)$`)
	shellVarRE = regexp.MustCompile(`^([A-Z]+)='(.*)'$`)
	headerRE   = regexp.MustCompile(`-H '([^']*)'|-H "([^"]*)"`)
	taskIDRE   = regexp.MustCompile(`"taskId":"([^"]+)"`)
	isoTimeRE  = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z`)
)

// curlHeaders are the headers a piece of shell passes with -H.
func curlHeaders(s string) []string {
	var hs []string
	for _, m := range headerRE.FindAllStringSubmatch(s, -1) {
		hs = append(hs, m[1]+m[2])
	}
	return hs
}

// quickstartSteps parses a README curl session: the shell variables it
// sets (a quoted one is put into the bodies that splice it in, '"$M"'),
// the headers of its H array, each curl with its own headers and -d body,
// then the comment lines after it that show the answer (a JSON line
// starting "# {" or "# data: {", continued on "#   " lines).
func quickstartSteps(t *testing.T, block string) (steps []quickstartStep, idVar string, table []string) {
	t.Helper()
	lines := strings.Split(block, "\n")
	vars := map[string]string{}
	var h []string
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		if m := idVarRE.FindStringSubmatch(line); m != nil {
			idVar = m[1]
			continue
		}
		if m := shellVarRE.FindStringSubmatch(line); m != nil {
			vars[m[1]] = m[2]
			continue
		}
		if strings.HasPrefix(line, "H=(") {
			h = curlHeaders(line)
			continue
		}
		if strings.HasPrefix(line, "H+=(") {
			h = append(h, curlHeaders(line)...)
			continue
		}
		if strings.HasPrefix(line, "./caddy mcp-tasks list") {
			for i++; i < len(lines) && strings.HasPrefix(lines[i], "# "); i++ {
				table = append(table, strings.TrimPrefix(lines[i], "# "))
			}
			continue
		}
		if !strings.HasPrefix(line, "curl ") {
			continue
		}
		step := quickstartStep{line: line}
		cmd := line
		for strings.HasSuffix(cmd, `\`) && i+1 < len(lines) {
			i++
			cmd = strings.TrimSuffix(cmd, `\`) + strings.TrimSpace(lines[i])
		}
		m := curlBodyRE.FindStringSubmatch(cmd)
		if m == nil {
			t.Fatalf("README curl without a -d body: %s", cmd)
		}
		step.body = m[1]
		for name, v := range vars {
			step.body = strings.ReplaceAll(step.body, `'"$`+name+`"'`, v)
		}
		step.headers = append(slices.Clone(h), curlHeaders(strings.TrimSuffix(cmd, m[0]))...)
		var answer strings.Builder
		inJSON := false
		for ; i+1 < len(lines) && strings.HasPrefix(lines[i+1], "#"); i++ {
			c := lines[i+1]
			switch {
			case statusRE.MatchString(c):
				step.status, _ = strconv.Atoi(statusRE.FindStringSubmatch(c)[1])
			case strings.HasPrefix(c, "# {"), strings.HasPrefix(c, "# data: {"):
				answer.WriteString(strings.TrimPrefix(strings.TrimPrefix(c, "# "), "data: "))
				inJSON = true
			case inJSON && strings.HasPrefix(c, "#   "):
				// A line broken between two words of a string lost the
				// space between them.
				next := strings.TrimPrefix(c, "#   ")
				if a := answer.String(); a != "" && isLetter(a[len(a)-1]) && isLetter(next[0]) {
					answer.WriteByte(' ')
				}
				answer.WriteString(next)
			default:
				inJSON = false
			}
		}
		step.answer = answer.String()
		steps = append(steps, step)
	}
	return steps, idVar, table
}

func isLetter(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// normalizeAnswer puts placeholders for what differs between runs: task
// ids (numbered in order of appearance across the session, ids
// remembering them) and timestamps.
func normalizeAnswer(s string, ids map[string]string) string {
	for _, m := range taskIDRE.FindAllStringSubmatch(s, -1) {
		if _, ok := ids[m[1]]; !ok {
			ids[m[1]] = "<task" + strconv.Itoa(len(ids)+1) + ">"
		}
	}
	for id, ph := range ids {
		s = strings.ReplaceAll(s, id, ph)
	}
	return isoTimeRE.ReplaceAllString(s, "<time>")
}

// matchesTrimmed tells whether got is want with the parts marked … left
// out: want's other pieces appear in got in order, the first at its start
// and the last at its end.
func matchesTrimmed(got, want string) bool {
	pieces := strings.Split(want, "…")
	if !strings.HasPrefix(got, pieces[0]) || !strings.HasSuffix(got, pieces[len(pieces)-1]) {
		return false
	}
	rest := got
	for _, p := range pieces {
		i := strings.Index(rest, p)
		if i < 0 {
			return false
		}
		rest = rest[i+len(p):]
	}
	return true
}

// sseData is the JSON of an answer: the data lines of an event stream, or
// the body itself.
func sseData(resp *http.Response) (string, error) {
	if !strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		b, err := io.ReadAll(resp.Body)
		return strings.TrimSpace(string(b)), err
	}
	var data strings.Builder
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			data.WriteString(d)
		}
	}
	return data.String(), sc.Err()
}

// The README's curl sessions, run as written against Caddyfile.example and
// the demo upstream: every answer they show is what the gateway answers,
// but for task ids and times (and the parts trimmed with …), and caddy
// mcp-tasks list shows the tasks as the README does. The 2025-11-25
// session waits for its 20-second task.
func TestREADMECurlSessions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, marker string }{
		{"2025-11-25", "H+=(-H 'MCP-Protocol-Version: 2025-11-25'"},
		{"2026-07-28", "-H 'Mcp-Method: server/discover'"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runREADMESession(t, readmeShBlock(t, tc.marker))
		})
	}
}

func runREADMESession(t *testing.T, block string) {
	t.Helper()
	steps, idVar, table := quickstartSteps(t, block)
	if len(steps) < 5 || idVar == "" {
		t.Fatalf("the README's session parsed into %d curls and ID %q", len(steps), idVar)
	}
	// Every curl shows its answer but the notification's (202, no body):
	// an answer the parser missed would go unchecked.
	for _, step := range steps {
		if step.answer == "" && step.status != http.StatusAccepted {
			t.Fatalf("no answer parsed for the README's %s", step.line)
		}
	}
	up := startUpstreamProcess(t)
	exampleFile, err := os.ReadFile("../Caddyfile.example")
	if err != nil {
		t.Fatal(err)
	}
	example := string(exampleFile)
	store := filepath.Join(t.TempDir(), "store")
	gw := startCaddyfile(t, func(admin, port string) string {
		return strings.NewReplacer(
			"admin localhost:2019", "admin "+admin+"\n\tpersist_config off",
			":8080 {", ":"+port+" {\n\tbind 127.0.0.1",
			"./data/mcp-tasks", store,
			"127.0.0.1:9100", up.addr,
		).Replace(example)
	})

	var session string
	var realID string
	gotIDs, wantIDs := map[string]string{}, map[string]string{}
	for _, step := range steps {
		body := step.body
		if realID != "" {
			body = strings.ReplaceAll(body, "'$ID'", realID)
		}
		// A body may name a README task id literally: the real one of the
		// same place in the session.
		for readmeID, ph := range wantIDs {
			for id, gph := range gotIDs {
				if gph == ph {
					body = strings.ReplaceAll(body, readmeID, id)
				}
			}
		}
		send := func() (int, string) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, gw.URL, strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			for _, h := range step.headers {
				name, value, _ := strings.Cut(h, ": ")
				if strings.EqualFold(name, "Mcp-Session-Id") {
					// The session of this run, not the README's.
					value = session
				}
				req.Header.Set(name, strings.ReplaceAll(value, "$ID", realID))
			}
			resp, err := httpClient.Do(req)
			if err != nil {
				t.Fatalf("%s: %v", step.line, err)
			}
			defer resp.Body.Close()
			got, err := sseData(resp)
			if err != nil {
				t.Fatalf("%s: reading the answer: %v", step.line, err)
			}
			if s := resp.Header.Get("Mcp-Session-Id"); s != "" {
				session = s
			}
			return resp.StatusCode, got
		}
		status, got := send()
		if step.status != 0 && status != step.status {
			t.Errorf("%s: HTTP %d, the README shows %d", step.line, status, step.status)
		}
		if step.answer == "" {
			continue
		}
		wantN := normalizeAnswer(step.answer, wantIDs)
		gotN := normalizeAnswer(got, gotIDs)
		// tasks/get shows a state the task reaches in its own time (a
		// person typing the next command gives it that time): ask again
		// until it shows the README's or a deadline passes.
		if strings.Contains(body, `"method":"tasks/get"`) {
			deadline := time.Now().Add(30 * time.Second)
			for !matchesTrimmed(gotN, wantN) && time.Now().Before(deadline) {
				time.Sleep(100 * time.Millisecond)
				_, got = send()
				gotN = normalizeAnswer(got, gotIDs)
			}
		}
		if !matchesTrimmed(gotN, wantN) {
			t.Errorf("%s\nanswered %s\nthe README shows %s", step.line, gotN, wantN)
		}
		// ID= names a task the session created: the real one of the same
		// place in the session.
		if realID == "" {
			if ph, ok := wantIDs[idVar]; ok {
				for id, gph := range gotIDs {
					if gph == ph {
						realID = id
					}
				}
			}
		}
	}
	if len(table) == 0 {
		return
	}
	out, stderr, ok := runCaddy(t, "mcp-tasks", "list", "--address", gw.adminAddr)
	if !ok {
		t.Fatalf("caddy mcp-tasks list: %s", stderr)
	}
	gotLines := strings.Split(strings.TrimSpace(out), "\n")
	if strings.Join(strings.Fields(gotLines[0]), " ") != strings.Join(strings.Fields(table[0]), " ") || len(gotLines) != len(table) {
		t.Errorf("caddy mcp-tasks list printed\n%s\nthe README shows\n%s", out, strings.Join(table, "\n"))
	}
	for i := 1; i < len(table) && i < len(gotLines); i++ {
		// STATUS PRINCIPAL TENANT TOOL ERA: what does not change between
		// runs.
		want, got := strings.Fields(table[i]), strings.Fields(gotLines[i])
		if len(got) < 6 || len(want) < 6 || strings.Join(got[1:6], " ") != strings.Join(want[1:6], " ") {
			t.Errorf("caddy mcp-tasks list row %q, the README shows %q", gotLines[i], table[i])
		}
	}
}
