package caddymodule

import (
	"strconv"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/dustin/go-humanize"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy"
)

func init() {
	httpcaddyfile.RegisterHandlerDirective("mcp_tasks", parseCaddyfile)
	httpcaddyfile.RegisterDirectiveOrder("mcp_tasks", httpcaddyfile.Before, "reverse_proxy")
}

func parseCaddyfile(h httpcaddyfile.Helper) (caddyhttp.MiddlewareHandler, error) {
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
//		task_after               <duration>
//		default_ttl              <duration>
//		max_ttl                  <duration>
//		poll_interval            <duration>
//		max_active_per_principal <n>
//		default_task_support     forbidden|optional|required
//		max_body                 <size>
//		tool <name> forbidden|optional|required [retry_on_restart]
//		sync_writes              on|off
//		sweep_interval           <duration>
//		rate_limit               <operations per second>
//		principal                <placeholder>
//		trust_domain             <name>
//		auth jwt {
//			hmac_secret     <secret>
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
// The directive is ordered before reverse_proxy. Sizes take units (4MiB,
// 512KB); durations take Caddy's units (500ms, 15m, 24h, 1d).
func (h *Handler) UnmarshalCaddyfile(d *caddyfile.Dispenser) error {
	d.Next() // the directive name
	if d.NextArg() {
		return d.ArgErr()
	}
	for d.NextBlock(0) {
		switch d.Val() {
		case "storage_dir":
			if !d.AllArgs(&h.StorageDir) {
				return d.ArgErr()
			}
		case "task_after":
			if err := parseDuration(d, &h.TaskAfter); err != nil {
				return err
			}
		case "default_ttl":
			if err := parseDuration(d, &h.DefaultTTL); err != nil {
				return err
			}
		case "max_ttl":
			if err := parseDuration(d, &h.MaxTTL); err != nil {
				return err
			}
		case "poll_interval":
			if err := parseDuration(d, &h.PollInterval); err != nil {
				return err
			}
		case "max_active_per_principal":
			var v string
			if !d.AllArgs(&v) {
				return d.ArgErr()
			}
			n, err := strconv.Atoi(v)
			if err != nil {
				return d.Errf("max_active_per_principal: %v", err)
			}
			h.MaxActivePerPrincipal = n
		case "default_task_support":
			if !d.AllArgs(&h.DefaultTaskSupport) {
				return d.ArgErr()
			}
			if _, err := taskproxy.ParseTaskSupport(h.DefaultTaskSupport); err != nil {
				return d.Errf("default_task_support: %v", err)
			}
		case "max_body":
			var v string
			if !d.AllArgs(&v) {
				return d.ArgErr()
			}
			size, err := humanize.ParseBytes(v)
			if err != nil {
				return d.Errf("max_body: %v", err)
			}
			h.MaxBody = int64(size)
		case "tool":
			if err := h.parseTool(d); err != nil {
				return err
			}
		case "auth":
			if err := h.parseAuth(d); err != nil {
				return err
			}
		case "sync_writes":
			var v string
			if !d.AllArgs(&v) {
				return d.ArgErr()
			}
			on, err := parseOnOff(v)
			if err != nil {
				return d.Errf("sync_writes: want on/true or off/false: %v", err)
			}
			h.SyncWrites = &on
		case "sweep_interval":
			if err := parseDuration(d, &h.SweepInterval); err != nil {
				return err
			}
		case "principal":
			if !d.AllArgs(&h.Principal) {
				return d.ArgErr()
			}
		case "trust_domain":
			if !d.AllArgs(&h.TrustDomain) {
				return d.ArgErr()
			}
		case "rate_limit":
			var v string
			if !d.AllArgs(&v) {
				return d.ArgErr()
			}
			n, err := strconv.ParseFloat(v, 64)
			if err != nil {
				return d.Errf("rate_limit: %v", err)
			}
			h.RateLimit = n
		default:
			return d.Errf("unrecognized mcp_tasks subdirective %q", d.Val())
		}
	}
	return nil
}

func parseDuration(d *caddyfile.Dispenser, into *caddy.Duration) error {
	name := d.Val()
	var v string
	if !d.AllArgs(&v) {
		return d.ArgErr()
	}
	dur, err := caddy.ParseDuration(v)
	if err != nil {
		return d.Errf("%s: %v", name, err)
	}
	*into = caddy.Duration(dur)
	return nil
}

// parseTool reads "tool <name> <mode> [retry_on_restart]".
func (h *Handler) parseTool(d *caddyfile.Dispenser) error {
	args := d.RemainingArgs()
	retry := len(args) == 3 && args[2] == "retry_on_restart"
	if len(args) != 2 && !retry {
		return d.Errf("tool: want 'tool <name> forbidden|optional|required [retry_on_restart]', got %q", args)
	}
	if _, err := taskproxy.ParseTaskSupport(args[1]); err != nil {
		return d.Errf("tool %s: %v", args[0], err)
	}
	if h.Tools == nil {
		h.Tools = map[string]*ToolPolicy{}
	}
	if _, dup := h.Tools[args[0]]; dup {
		return d.Errf("tool %s is configured twice", args[0])
	}
	h.Tools[args[0]] = &ToolPolicy{TaskSupport: args[1], RetryOnRestart: retry}
	return nil
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
