package caddymodule

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/task"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("mcp_tasks", parseCaddyfile)
	// Before the routing directives (invoke, handle, handle_path, route),
	// not just before reverse_proxy: a matched handle block is terminal, so
	// beside "handle /mcp* { reverse_proxy … }" the gateway, and its auth,
	// would never run. Authentication handlers (basic_auth, forward_auth)
	// still come first, for principal placeholders.
	httpcaddyfile.RegisterDirectiveOrder("mcp_tasks", httpcaddyfile.Before, "invoke")
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
	warnOrder(h)
	m := new(Handler)
	if err := m.UnmarshalCaddyfile(h.Dispenser); err != nil {
		return nil, err
	}
	if m.Principal != "" && m.TrustDomain == "" {
		if err := defaultPrincipalTrustDomain(h, m); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// UnmarshalCaddyfile sets up the handler from Caddyfile tokens. Syntax:
//
//	mcp_tasks [<matcher>] {
//		storage_dir              <path>
//		storage badger|postgres [<args>] {
//			…                    (the backend's options)
//		}
//		task_after               <duration>
//		default_ttl              <duration>
//		max_ttl                  <duration>
//		poll_interval            <duration>
//		max_active_per_principal <n>|off
//		max_watched_tasks_per_principal <n>
//		default_task_support     forbidden|optional|required
//		max_body                 <size>
//		pass_unreadable
//		max_result               <size>
//		tool <name> forbidden|optional|required [retry_on_restart] [run_timeout <duration>|off]
//		run_timeout              <duration>|off
//		sync_writes              on|off
//		sweep_interval           <duration>
//		drain                    <duration>
//		lease                    <duration>
//		rate_limit               <operations per second>|off
//		dns_rebinding_protection auto|on|off
//		routing_headers          lenient|strict
//		principal                <placeholder>
//		allow_auth_bypass
//		trust_domain             <name>
//		auth jwt {
//			hmac_secret     <secret>    (repeatable, for rotation)
//			public_key      <pem file>
//			jwks_url        <url>
//			issuer          <issuer>
//			audience        <audience>
//			audience_optional
//			principal_claim <claim>
//			tenant_claim    <claim>
//			leeway          <duration>
//			resource_metadata_url <url>
//		}
//	}
//
// run_timeout bounds how long a task's tool may run (time waiting for the
// client's input aside): after it the upstream call is cancelled and the
// task fails with a message naming the limit. Off by default: the task's
// ttl bounds it. A tool's run_timeout replaces the route's for that tool;
// "off" there exempts the tool.
//
// drain is how long a process that stops (caddy stop, SIGTERM; not a
// reload) lets running tasks finish, taking no new ones (HTTP 503 with
// Retry-After); what still runs at its end is released to another replica.
// Default: the servers' shutdown_delay plus grace_period (global options),
// or 5s without a grace_period. lease is how long a task's lease lasts
// (renewed every third of it; a dead replica's tasks are taken over after
// it): between 2s and 10m, default 30s.
//
// storage_dir (with sync_writes) is shorthand for "storage badger"; it and
// storage exclude each other. The backends' options are documented on
// BadgerStorage and PostgresStorage.
//
// allow_auth_bypass loads a layout in which requests of the gateway's path
// may be answered without running mcp_tasks (see Handler.AllowAuthBypass);
// with auth, such a layout is refused without it.
//
// The directive is ordered before invoke, handle, handle_path and route (so
// before reverse_proxy), after basic_auth and forward_auth. Sizes take units (4MiB,
// 512KB); durations take Caddy's units (500ms, 15m, 24h, 1d).
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		name := d.Val()
		switch name {
		case "storage_dir":
			if !d.AllArgs(&h.StorageDir) {
				return d.ArgErr()
			}
		case "storage":
			if h.StorageRaw != nil {
				return d.Err("storage is configured twice")
			}
			raw, err := storageFromCaddyfile(d)
			if err != nil {
				return err
			}
			h.StorageRaw = raw
		case "task_after":
			if err := parsePositiveDuration(d, &h.TaskAfter); err != nil {
				return err
			}
		case "default_ttl":
			if err := parsePositiveDuration(d, &h.DefaultTTL); err != nil {
				return err
			}
		case "max_ttl":
			if err := parsePositiveDuration(d, &h.MaxTTL); err != nil {
				return err
			}
		case "poll_interval":
			if err := parsePositiveDuration(d, &h.PollInterval); err != nil {
				return err
			}
		case "sweep_interval":
			if err := parsePositiveDuration(d, &h.SweepInterval); err != nil {
				return err
			}
		case "drain":
			if err := parsePositiveDuration(d, &h.Drain); err != nil {
				return err
			}
		case "lease":
			if err := parsePositiveDuration(d, &h.Lease); err != nil {
				return err
			}
		case "max_active_per_principal", "max_finished_per_principal":
			name := d.Val()
			v, err := oneArg(d)
			if err != nil {
				return err
			}
			n := -1 // off
			if v != "off" {
				if n, err = strconv.Atoi(v); err != nil || n == 0 {
					return d.Errf("%s: want a positive number of tasks or off, got %q", name, v)
				}
			}
			// negative: off, as in JSON
			if name == "max_active_per_principal" {
				h.MaxActivePerPrincipal = n
			} else {
				h.MaxFinishedPerPrincipal = n
			}
		case "max_watched_tasks_per_principal":
			v, err := oneArg(d)
			if err != nil {
				return err
			}
			n, err := strconv.Atoi(v)
			if err != nil || n <= 0 {
				return d.Errf("max_watched_tasks_per_principal: want a positive number of task ids, got %q", v)
			}
			h.MaxWatchedTasksPerPrincipal = n
		case "default_task_support":
			if !d.AllArgs(&h.DefaultTaskSupport) {
				return d.ArgErr()
			}
			if _, err := task.ParseSupport(h.DefaultTaskSupport); err != nil {
				return d.Errf("default_task_support: %v", err)
			}
		case "max_body":
			if err := parseSize(d, &h.MaxBody); err != nil {
				return err
			}
		case "pass_unreadable":
			if d.NextArg() {
				return d.ArgErr()
			}
			h.PassUnreadable = true
		case "allow_auth_bypass":
			if d.NextArg() {
				return d.ArgErr()
			}
			h.AllowAuthBypass = true
		case "max_result":
			if err := parseSize(d, &h.MaxResult); err != nil {
				return err
			}
		case "tool":
			if err := h.parseTool(d); err != nil {
				return err
			}
		case "run_timeout":
			v, err := oneArg(d)
			if err != nil {
				return err
			}
			if h.RunTimeout, err = parseRunTimeout(v); err != nil {
				return d.Errf("run_timeout: %v", err)
			}
			if h.RunTimeout < 0 { // off: the default, no bound but the ttl
				h.RunTimeout = 0
			}
		case "auth":
			if err := h.parseAuth(d); err != nil {
				return err
			}
		case "sync_writes":
			on, err := parseSyncWrites(d)
			if err != nil {
				return err
			}
			h.SyncWrites = on
		case "principal":
			if !d.AllArgs(&h.Principal) {
				return d.ArgErr()
			}
		case "trust_domain":
			if !d.AllArgs(&h.TrustDomain) {
				return d.ArgErr()
			}
		case "rate_limit":
			v, err := oneArg(d)
			if err != nil {
				return err
			}
			if v == "off" {
				h.RateLimit = -1
				continue
			}
			n, err := strconv.ParseFloat(v, 64)
			if err != nil || n == 0 || math.IsNaN(n) || math.IsInf(n, 0) {
				return d.Errf("rate_limit: want a positive number of operations per second or off, got %q", v)
			}
			h.RateLimit = n // negative: off, as in JSON
		case "dns_rebinding_protection":
			v, err := oneArg(d)
			if err != nil {
				return err
			}
			if _, err := taskproxy.ParseRebindingProtection(v); err != nil {
				return d.Errf("dns_rebinding_protection: %v", err)
			}
			h.DNSRebindingProtection = v
		case "routing_headers":
			v, err := oneArg(d)
			if err != nil {
				return err
			}
			if err := checkRoutingHeaders(v); err != nil {
				return d.Errf("routing_headers: %v", err)
			}
			h.RoutingHeaders = v
		default:
			return d.Errf("unrecognized mcp_tasks subdirective %q", name)
		}
	}
	switch {
	case h.StorageRaw != nil && h.StorageDir != "":
		return d.Err("storage_dir and storage exclude each other: storage_dir is shorthand for storage badger { dir … }")
	case h.StorageRaw != nil && h.SyncWrites != nil:
		return d.Err("sync_writes and storage exclude each other: write it inside storage badger { … }")
	}
	return nil
}

// oneArg reads the single argument of the current option.
func oneArg(d *caddyfile.Dispenser) (string, error) {
	var v string
	if !d.AllArgs(&v) {
		return "", d.ArgErr()
	}
	return v, nil
}

func parseDuration(d *caddyfile.Dispenser, into *caddy.Duration) error {
	name := d.Val()
	v, err := oneArg(d)
	if err != nil {
		return err
	}
	dur, err := caddy.ParseDuration(v)
	if err != nil {
		return d.Errf("%s: %v", name, err)
	}
	*into = caddy.Duration(dur)
	return nil
}

// parsePositiveDuration is parseDuration for options where zero or less
// means nothing sensible (zero would silently mean the default).
func parsePositiveDuration(d *caddyfile.Dispenser, into *caddy.Duration) error {
	name := d.Val()
	if err := parseDuration(d, into); err != nil {
		return err
	}
	if *into <= 0 {
		return d.Errf("%s: want a positive duration, got %s", name, time.Duration(*into))
	}
	return nil
}

// parseTool reads "tool <name> <mode> [retry_on_restart] [run_timeout
// <duration>|off]"; the options after the mode come in any order.
func (h *Handler) parseTool(d *caddyfile.Dispenser) error {
	const syntax = "tool <name> forbidden|optional|required [retry_on_restart] [run_timeout <duration>|off]"
	args := d.RemainingArgs()
	if len(args) < 2 {
		return d.Errf("tool: want '%s', got %q", syntax, args)
	}
	if _, err := task.ParseSupport(args[1]); err != nil {
		return d.Errf("tool %s: %v", args[0], err)
	}
	p := &ToolPolicy{TaskSupport: args[1]}
	seen := map[string]bool{}
	for rest := args[2:]; len(rest) > 0; {
		opt := rest[0]
		if seen[opt] {
			return d.Errf("tool %s: %s given twice", args[0], opt)
		}
		seen[opt] = true
		switch opt {
		case "retry_on_restart":
			p.RetryOnRestart, rest = true, rest[1:]
		case "run_timeout":
			if len(rest) < 2 {
				return d.Errf("tool %s: run_timeout needs a duration or off", args[0])
			}
			var err error
			if p.RunTimeout, err = parseRunTimeout(rest[1]); err != nil {
				return d.Errf("tool %s: run_timeout: %v", args[0], err)
			}
			rest = rest[2:]
		default:
			return d.Errf("tool: want '%s', got %q", syntax, args)
		}
	}
	if h.Tools == nil {
		h.Tools = map[string]*ToolPolicy{}
	}
	if _, dup := h.Tools[args[0]]; dup {
		return d.Errf("tool %s is configured twice", args[0])
	}
	h.Tools[args[0]] = p
	return nil
}

// parseRunTimeout reads a run_timeout: a positive duration, or off
// (returned as -1, which a tool's policy keeps to mean none).
func parseRunTimeout(v string) (caddy.Duration, error) {
	if v == "off" {
		return -1, nil
	}
	dur, err := caddy.ParseDuration(v)
	if err != nil {
		return 0, err
	}
	if dur <= 0 {
		return 0, fmt.Errorf("want a positive duration or off, got %s", v)
	}
	return caddy.Duration(dur), nil
}

// Interface guard
var _ caddyfile.Unmarshaler = (*Handler)(nil)

// parseOnOff reads on/off as well as Go's boolean spellings.
func parseOnOff(v string) (bool, error) {
	switch v {
	case "on":
		return true, nil
	case "off":
		return false, nil
	}
	return strconv.ParseBool(v)
}

// parseSize reads the one size argument of the current subdirective, such
// as 4MiB or 512KB, into into; errors name the subdirective.
func parseSize(d *caddyfile.Dispenser, into *int64) error {
	name := d.Val()
	v, err := oneArg(d)
	if err != nil {
		return err
	}
	size, err := humanize.ParseBytes(v)
	if err != nil || size == 0 || size > math.MaxInt64 {
		return d.Errf("%s: want a positive size such as 4MiB or 512KB, got %q", name, v)
	}
	*into = int64(size)
	return nil
}

// parseSyncWrites reads the on/off argument of sync_writes, in the handler
// block and in storage badger.
func parseSyncWrites(d *caddyfile.Dispenser) (*bool, error) {
	v, err := oneArg(d)
	if err != nil {
		return nil, err
	}
	on, err := parseOnOff(v)
	if err != nil {
		return nil, d.Errf("sync_writes: want on/true or off/false, got %q", v)
	}
	return &on, nil
}
