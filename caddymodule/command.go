package caddymodule

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/caddyserver/caddy/v2/caddyconfig"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/spf13/cobra"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/badgerstore"
)

// The caddy mcp-tasks command: list, show, cancel and delete tasks of a running
// Caddy through its admin API ([AdminAPI]), for people (tables) and scripts
// (--json).

func init() {
	caddycmd.RegisterCommand(caddycmd.Command{
		Name:  "mcp-tasks",
		Usage: "list|show <id>|cancel <id>|delete <id>|health [--ready|--live]|backup -o <file>|restore -i <file> --storage-dir <dir>|version [--address <admin>] [--config <file> [--adapter <name>]] [--json]",
		Short: "Lists, shows, cancels, deletes and backs up MCP tasks of a running Caddy",
		Long: `
Talks to the admin API of a running Caddy (admin.api.mcp_tasks): lists the
tasks of every principal newest first, shows one, cancels one as its owner
would (the upstream is told), deletes a finished one before its ttl ends (it
stops counting toward max_finished_per_principal), or reports health; with
--ready or --live it is a probe for a service manager or an orchestrator
(exit 0 or 1, no curl needed); version prints this module's release and
build info, with the hash of its sources in a build of ./xcaddy.sh (no
Caddy needs to run). The admin address comes
from --address, else from the config given with --config, else Caddy's
default (localhost:2019).

Tables are for people; --json prints the admin API's answer as is.`,
		CobraFunc: func(cmd *cobra.Command) {
			cmd.PersistentFlags().String("address", "", "Address of the administration endpoint, if different from the config")
			cmd.PersistentFlags().StringP("config", "c", "", "Configuration file to read the admin address from")
			cmd.PersistentFlags().StringP("adapter", "a", "", "Name of the config adapter of --config")
			cmd.PersistentFlags().Bool("json", false, "Print the admin API's JSON instead of a table")
			cmd.PersistentFlags().String("store", "", "Store to use, when several are in use: its name as /mcp_tasks/stores lists it (a Badger store's directory)")

			list := &cobra.Command{
				Use:   "list",
				Short: "Lists tasks of every principal, newest first",
				Args:  cobra.NoArgs,
				RunE:  runList,
			}
			list.Flags().String("status", "", "Only tasks with this status (working, input_required, completed, failed, cancelled)")
			list.Flags().String("principal", "", "Only tasks of this principal")
			list.Flags().String("tenant", "", "Only tasks of this tenant (the JWT's tenant claim)")
			list.Flags().String("route", "", "Only tasks created by this route (the handler instance, as show prints it)")
			list.Flags().String("tool", "", "Only tasks of this tool")
			list.Flags().Duration("max-age", 0, "Only tasks created less than this long ago (90s, 1h)")
			list.Flags().Duration("min-age", 0, "Only tasks created more than this long ago (90s, 1h)")
			list.Flags().Int("limit", 0, "Tasks per page (default 50, at most 1000)")
			list.Flags().String("cursor", "", "Cursor of the page to show, from a previous page")
			list.Flags().Bool("detail", false, "Include arguments and results (with --json)")

			show := &cobra.Command{
				Use:   "show <id>",
				Short: "Shows one task",
				Args:  cobra.ExactArgs(1),
				RunE:  runShow,
			}
			show.Flags().Bool("detail", false, "Include arguments, result and inputs")

			cancel := &cobra.Command{
				Use:   "cancel <id>",
				Short: "Cancels a task as its owner would; the upstream is told",
				Args:  cobra.ExactArgs(1),
				RunE:  runCancel,
			}
			del := &cobra.Command{
				Use:   "delete <id>",
				Short: "Deletes a finished task before its ttl ends; a running one must be cancelled first",
				Args:  cobra.ExactArgs(1),
				RunE:  runDelete,
			}
			health := &cobra.Command{
				Use:   "health",
				Short: "Reports the health of the task stores; fails when unhealthy",
				Args:  cobra.NoArgs,
				RunE:  runHealth,
			}
			health.Flags().Bool("ready", false, "Readiness probe: fail unless every store can take tasks and the process is not draining")
			health.Flags().Bool("live", false, "Liveness probe: fail unless the admin API answers")
			health.MarkFlagsMutuallyExclusive("ready", "live")
			backup := &cobra.Command{
				Use:   "backup --output <file>",
				Short: "Writes a consistent backup of a running Badger task store to a file",
				Args:  cobra.NoArgs,
				RunE:  runBackup,
			}
			backup.Flags().StringP("output", "o", "", "File to write the backup to (replaced only once the backup is whole)")
			restore := &cobra.Command{
				Use:   "restore --input <file> --storage-dir <new dir>",
				Short: "Restores a backup into a new storage directory (offline: no Caddy needed)",
				Args:  cobra.NoArgs,
				RunE:  runRestore,
			}
			restore.Flags().StringP("input", "i", "", "Backup file written by caddy mcp-tasks backup")
			restore.Flags().String("storage-dir", "", "New, empty directory to restore into; point storage_dir at it")
			version := &cobra.Command{
				Use:   "version",
				Short: "Prints the module's release, store formats and build info (the module's version as the build resolved it)",
				Args:  cobra.NoArgs,
				RunE:  runVersion,
			}
			cmd.AddCommand(list, show, cancel, del, health, backup, restore, version)
		},
	})
}

// adminRequest sends a request to the admin API and returns a successful
// answer; an error answer becomes an error with its message.
func adminRequest(cmd *cobra.Command, method, uri string) (*http.Response, error) {
	fl := cmd.Flags()
	address, _ := fl.GetString("address")
	config, _ := fl.GetString("config")
	adapter, _ := fl.GetString("adapter")
	addr, err := adminAddress(address, config, adapter)
	if err != nil {
		return nil, fmt.Errorf("finding the admin address: %w", err)
	}
	resp, err := caddycmd.AdminAPIRequest(addr, method, uri, nil, nil)
	if err != nil && !strings.HasPrefix(err.Error(), "caddy responded with error:") {
		// No answer at all: say where the address came from, since a
		// wrong or missing --config is the usual cause.
		from := "Caddy's default; name it with --address or --config"
		switch {
		case address != "":
			from = "--address"
		case config != "":
			from = config + ": its admin option, or Caddy's default where it names no address"
		}
		return nil, fmt.Errorf("reaching Caddy's admin endpoint at %s (from %s): is Caddy running there? %w", addr, from, err)
	}
	return resp, err
}

// adminCall is adminRequest that returns the answer's body.
func adminCall(cmd *cobra.Command, method, uri string) ([]byte, error) {
	resp, err := adminRequest(cmd, method, uri)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("reading the answer of %s: %w", uri, err)
	}
	return body, nil
}

// adminAddress is the admin address from --address, else from the config
// file (adapted with its adapter), else Caddy's default. Caddy's own
// loader logs what it does (the file it reads, that it adapted it, the
// adapter's warnings) on stderr; a command that prints a table must print
// only that, so the file is adapted here, quietly.
func adminAddress(address, configFile, adapterName string) (string, error) {
	if address != "" || configFile == "" {
		return caddycmd.DetermineAdminAPIAddress(address, nil, "", "")
	}
	config, err := os.ReadFile(filepath.Clean(configFile)) // the operator's own file, named on the command line
	if err != nil {
		return "", fmt.Errorf("reading config file %s: %w", configFile, err)
	}
	base := strings.ToLower(filepath.Base(configFile))
	if adapterName == "" && filepath.Ext(base) != ".json" &&
		(strings.HasPrefix(base, "caddyfile") || strings.HasSuffix(base, ".caddyfile")) {
		adapterName = "caddyfile" // as caddy run guesses it
	}
	if adapterName != "" {
		adapter := caddyconfig.GetAdapter(adapterName)
		if adapter == nil {
			return "", fmt.Errorf("unrecognized config adapter: %s", adapterName)
		}
		if config, _, err = adapter.Adapt(config, map[string]any{"filename": configFile}); err != nil {
			return "", fmt.Errorf("adapting config file %s with %s: %w", configFile, adapterName, err)
		}
	}
	return caddycmd.DetermineAdminAPIAddress("", config, configFile, "")
}

// withStore adds --store to q, as storeParam names it.
func withStore(cmd *cobra.Command, q url.Values) url.Values {
	if store, _ := cmd.Flags().GetString("store"); store != "" {
		q.Set("store", storeParam(store))
	}
	return q
}

// storeParam is the store name the admin API knows for what the operator
// typed: a Badger store is named by its absolute directory, so a relative
// path to an existing directory is made absolute against the working
// directory, as the shell completed it. Anything else (a PostgreSQL store's
// name, a path that does not exist here) is passed on as typed.
func storeParam(store string) string {
	if filepath.IsAbs(store) {
		return store
	}
	if fi, err := os.Stat(store); err != nil || !fi.IsDir() {
		return store
	}
	abs, err := filepath.Abs(store)
	if err != nil {
		return store
	}
	return abs
}

func wantJSON(cmd *cobra.Command) bool {
	v, _ := cmd.Flags().GetBool("json")
	return v
}

func encodeQuery(q url.Values) string {
	if len(q) == 0 {
		return ""
	}
	return "?" + q.Encode()
}

func runList(cmd *cobra.Command, _ []string) error {
	q := url.Values{}
	for _, name := range []string{"status", "principal", "tenant", "route", "tool", "cursor"} {
		if v, _ := cmd.Flags().GetString(name); v != "" {
			q.Set(name, v)
		}
	}
	for _, age := range []struct{ flag, param string }{{"max-age", "max_age"}, {"min-age", "min_age"}} {
		if !cmd.Flags().Changed(age.flag) {
			continue
		}
		d, _ := cmd.Flags().GetDuration(age.flag)
		if d <= 0 {
			return fmt.Errorf("--%s: want a positive duration such as 90s or 1h, got %s", age.flag, d)
		}
		q.Set(age.param, d.String())
	}
	if n, _ := cmd.Flags().GetInt("limit"); n != 0 {
		q.Set("limit", fmt.Sprint(n))
	}
	if d, _ := cmd.Flags().GetBool("detail"); d {
		q.Set("detail", "1")
	}
	body, err := adminCall(cmd, http.MethodGet, "/mcp_tasks/tasks"+encodeQuery(withStore(cmd, q)))
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if wantJSON(cmd) {
		_, err := out.Write(body)
		return err
	}
	var page taskPage
	if err := json.Unmarshal(body, &page); err != nil {
		return fmt.Errorf("decoding the task list: %w", err)
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tSTATUS\tPRINCIPAL\tTENANT\tTOOL\tERA\tCREATED\tUPDATED")
	for _, t := range page.Tasks {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Status, orDash(t.Principal), orDash(t.Tenant), t.Tool, t.Era,
			t.CreatedAt.Local().Format(time.DateTime), t.UpdatedAt.Local().Format(time.DateTime))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if page.NextCursor != "" {
		fmt.Fprintf(out, "\nmore: %s\n", nextPageCommand(cmd, page.NextCursor))
	}
	return nil
}

// nextPageCommand is the command that lists the page after this one: this
// one's filters, limit, store and admin address with the new cursor. The
// cursor continues this listing only: without the filters it would list
// other tasks, and without the address it would ask another Caddy.
func nextPageCommand(cmd *cobra.Command, cursor string) string {
	args := []string{"caddy", "mcp-tasks", "list"}
	for _, name := range []string{"address", "config", "adapter", "store", "status", "principal", "tenant", "route", "tool", "max-age", "min-age", "limit"} {
		if f := cmd.Flags().Lookup(name); f != nil && cmd.Flags().Changed(name) {
			args = append(args, "--"+name, shellQuote(f.Value.String()))
		}
	}
	return strings.Join(append(args, "--cursor", shellQuote(cursor)), " ")
}

// shellQuote quotes s for a POSIX shell when it holds anything but
// characters that are safe bare.
func shellQuote(s string) string {
	safe := s != ""
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./:=@,+%", r)) {
			safe = false
			break
		}
	}
	if safe {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

func runShow(cmd *cobra.Command, args []string) error {
	q := url.Values{}
	if d, _ := cmd.Flags().GetBool("detail"); d {
		q.Set("detail", "1")
	}
	t, err := taskAnswer(cmd, http.MethodGet, "/mcp_tasks/tasks/"+url.PathEscape(args[0])+encodeQuery(withStore(cmd, q)))
	if err != nil || t == nil {
		return err
	}
	return printTask(cmd.OutOrStdout(), *t)
}

func runCancel(cmd *cobra.Command, args []string) error {
	t, err := taskAnswer(cmd, http.MethodPost, "/mcp_tasks/tasks/"+url.PathEscape(args[0])+"/cancel"+encodeQuery(withStore(cmd, url.Values{})))
	if err != nil || t == nil {
		return err
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "task %s: %s\n", t.ID, t.Status)
	return err
}

func runDelete(cmd *cobra.Command, args []string) error {
	t, err := taskAnswer(cmd, http.MethodDelete, "/mcp_tasks/tasks/"+url.PathEscape(args[0])+encodeQuery(withStore(cmd, url.Values{})))
	if err != nil || t == nil {
		return err
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "task %s deleted (it was %s)\n", t.ID, t.Status)
	return err
}

// taskAnswer calls a route that answers one task. With --json it prints the
// answer as it came and returns no task; otherwise it decodes the task.
func taskAnswer(cmd *cobra.Command, method, path string) (*adminTask, error) {
	body, err := adminCall(cmd, method, path)
	if err != nil {
		return nil, err
	}
	if wantJSON(cmd) {
		_, err := cmd.OutOrStdout().Write(body)
		return nil, err
	}
	var t adminTask
	if err := json.Unmarshal(body, &t); err != nil {
		return nil, fmt.Errorf("decoding the task: %w", err)
	}
	return &t, nil
}

func runHealth(cmd *cobra.Command, _ []string) error {
	for _, probe := range []string{"ready", "live"} {
		if on, _ := cmd.Flags().GetBool(probe); on {
			return runProbe(cmd, probe)
		}
	}
	// An unhealthy answer (503) is a report too: it is printed as a
	// healthy one is, with each store's error, and the command exits 1.
	body, err := adminCall(cmd, http.MethodGet, "/mcp_tasks/health"+encodeQuery(withStore(cmd, url.Values{})))
	var unhealthy error
	if err != nil {
		report, ok := unhealthyReport(err)
		if !ok {
			return err
		}
		body, unhealthy = report, errors.New("the task stores are not healthy (HTTP 503 from /mcp_tasks/health)")
	}
	if wantJSON(cmd) {
		if _, err := cmd.OutOrStdout().Write(body); err != nil {
			return err
		}
		return unhealthy
	}
	var rep healthReport
	if err := json.Unmarshal(body, &rep); err != nil {
		return fmt.Errorf("decoding the health report: %w", err)
	}
	if err := printHealth(cmd.OutOrStdout(), rep); err != nil {
		return err
	}
	return unhealthy
}

// unhealthyReport returns the health report of an unhealthy answer, which
// caddycmd.AdminAPIRequest turns into an error carrying the body; false
// for any other error.
func unhealthyReport(err error) ([]byte, bool) {
	const prefix = "caddy responded with error: HTTP 503: "
	msg := err.Error()
	if !strings.HasPrefix(msg, prefix) {
		return nil, false
	}
	body := []byte(msg[len(prefix):])
	var rep healthReport
	if json.Unmarshal(body, &rep) != nil {
		return nil, false
	}
	return body, true
}

// printHealth writes the health report as tables: the stores, each
// store's error under them, then the routes' upstreams.
func printHealth(w io.Writer, rep healthReport) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "STORE\tOPEN\tREACHABLE\tRECOVERED\tWORKERS")
	upstreams := 0
	for _, s := range rep.Stores {
		fmt.Fprintf(tw, "%s\t%t\t%t\t%t\t%d\n", s.Store, s.Open, s.Reachable, s.Recovered, s.Workers)
		upstreams += len(s.Upstreams)
	}
	if len(rep.Stores) == 0 && !rep.Healthy {
		fmt.Fprintln(tw, "\nno task store is in use: no mcp_tasks handler is configured, or the process stops")
	}
	for _, s := range rep.Stores {
		if s.Error != "" {
			fmt.Fprintf(tw, "\n%s: %s\n", s.Store, s.Error)
		}
	}
	if upstreams > 0 {
		fmt.Fprintln(tw, "\nROUTE\tUPSTREAM\tVERSIONS\tLAST ERROR")
		for _, s := range rep.Stores {
			for _, u := range s.Upstreams {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", u.Route, upstreamReachability(u.Reachable),
					orDash(strings.Join(u.Versions, ",")), orDash(lastError(u.LastError, u.LastErrorAt)))
			}
		}
	}
	return tw.Flush()
}

// runProbe asks /mcp_tasks/health/<probe> and prints its one word, or its
// JSON with --json. A 503 is an error with the answer's reasons, so the
// command exits 1: a probe of a service manager or an orchestrator (an
// exec probe) needs nothing but the caddy binary.
func runProbe(cmd *cobra.Command, probe string) error {
	if cmd.Flags().Changed("store") {
		return fmt.Errorf("health --%s checks every store of the process: drop --store", probe)
	}
	body, err := adminCall(cmd, http.MethodGet, "/mcp_tasks/health/"+probe)
	if err != nil {
		return err
	}
	if wantJSON(cmd) {
		_, err := cmd.OutOrStdout().Write(body)
		return err
	}
	_, err = fmt.Fprintln(cmd.OutOrStdout(), probe)
	return err
}

// upstreamReachability says whether the last call reached an upstream.
func upstreamReachability(reachable *bool) string {
	switch {
	case reachable == nil:
		return "unknown (no call yet)"
	case *reachable:
		return "reachable"
	}
	return "unreachable"
}

// lastError is an upstream's last failure with its time, "" for none.
func lastError(msg string, at time.Time) string {
	if msg == "" {
		return ""
	}
	return at.Local().Format(time.RFC3339) + " " + msg
}

// runBackup streams the admin API's backup of a store into a temporary
// file beside the output, synced, then renamed over it: the output is a
// whole backup or is left as it was.
func runBackup(cmd *cobra.Command, _ []string) (err error) {
	output, _ := cmd.Flags().GetString("output")
	if output == "" {
		return errors.New("backup: --output <file> is required")
	}
	resp, err := adminRequest(cmd, http.MethodPost, "/mcp_tasks/backup"+encodeQuery(withStore(cmd, url.Values{})))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	tmp, err := os.CreateTemp(filepath.Dir(output), "."+filepath.Base(output)+".*")
	if err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	defer func() {
		if err != nil {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	n, err := io.Copy(tmp, resp.Body)
	if err != nil {
		return fmt.Errorf("backup: the transfer broke off after %d bytes (the store's backup failed, or the connection): %w", n, err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("backup: writing %s: %w", tmp.Name(), err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("backup: writing %s: %w", tmp.Name(), err)
	}
	if err := os.Rename(tmp.Name(), output); err != nil {
		return fmt.Errorf("backup: %w", err)
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "backup of %s written to %s (%d bytes)\n", resp.Header.Get("Mcp-Tasks-Store"), output, n)
	return err
}

// runRestore loads a backup into a new storage directory. It needs no
// running Caddy, and never touches a store in use: the directory must be
// new or empty.
func runRestore(cmd *cobra.Command, _ []string) error {
	input, _ := cmd.Flags().GetString("input")
	dir, _ := cmd.Flags().GetString("storage-dir")
	if input == "" || dir == "" {
		return errors.New("restore: --input <file> and --storage-dir <new dir> are required")
	}
	f, err := os.Open(filepath.Clean(input))
	if err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	defer func() { _ = f.Close() }() // read only
	if err := badgerstore.Restore(dir, f, nil); err != nil {
		return err
	}
	_, err = fmt.Fprintf(cmd.OutOrStdout(), "restored %s into %s: point storage_dir at it and start Caddy\n", input, dir)
	return err
}

// printTask writes one task as aligned "field: value" lines.
func printTask(w io.Writer, t adminTask) error {
	tw := tabwriter.NewWriter(w, 0, 0, 1, ' ', 0)
	row := func(k, v string) {
		if v != "" {
			fmt.Fprintf(tw, "%s:\t%s\n", k, v)
		}
	}
	row("id", t.ID)
	row("status", t.Status)
	row("message", t.StatusMessage)
	row("principal", orDash(t.Principal))
	row("tenant", t.Tenant)
	row("quota key", t.QuotaKey)
	row("tool", t.Tool)
	row("era", t.Era)
	row("store", t.Store)
	// The route is what list --route takes.
	row("route", t.Route)
	row("created", t.CreatedAt.Local().Format(time.RFC3339))
	row("updated", t.UpdatedAt.Local().Format(time.RFC3339))
	row("expires", t.ExpiresAt.Local().Format(time.RFC3339))
	row("running here", fmt.Sprint(t.RunningHere))
	row("lease holder", t.LeaseHolder)
	// The upstream's own task, when the gateway follows one.
	row("upstream task", t.UpstreamTaskID)
	if t.InputsOpen > 0 {
		row("inputs open", fmt.Sprint(t.InputsOpen))
	}
	if t.Error != nil {
		row("error", fmt.Sprintf("%d %s", t.Error.Code, t.Error.Message))
	}
	row("params", compactJSON(t.Params))
	row("result", compactJSON(t.Result))
	for i, c := range t.History {
		k := ""
		if i == 0 {
			k = "history:"
		}
		from := c.From
		if from == "" {
			from = "(created)"
		}
		line := c.At.Local().Format(time.RFC3339) + " " + from + " -> " + c.To
		if c.Message != "" {
			line += " (" + c.Message + ")"
		}
		fmt.Fprintf(tw, "%s\t%s\n", k, line)
	}
	return tw.Flush()
}

func compactJSON(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var buf bytes.Buffer
	if json.Compact(&buf, raw) != nil {
		return string(raw)
	}
	return buf.String()
}

func orDash(s string) string {
	if strings.TrimSpace(s) == "" {
		return "-"
	}
	return s
}
