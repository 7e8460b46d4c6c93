package caddymodule

import (
	"errors"
	"reflect"
	"strings"

	"github.com/caddyserver/caddy/v2/caddyconfig/httpcaddyfile"
)

// stateTrustDomains is the adaptation state key of the trust domains the
// adapter filled in, to catch two principal routes in one site block.
const stateTrustDomains = "mcp_tasks.trust_domains"

// defaultPrincipalTrustDomain sets m.TrustDomain, for a principal
// placeholder without trust_domain, to the addresses of the site block
// around it, so that the same user name authenticated by two sites (say, two
// basic_auth user lists) is two principals, and the same Caddyfile always
// gives the same owner keys. Two such routes in one site block are refused:
// only the operator knows whether their authentication is the same.
func defaultPrincipalTrustDomain(h httpcaddyfile.Helper, m *Handler) error {
	keys := siteKeys(h)
	if len(keys) == 0 {
		return errors.New("mcp_tasks: principal: cannot tell the site block; set trust_domain <name>")
	}
	m.TrustDomain = "site " + strings.Join(keys, " ")
	seen, _ := h.State[stateTrustDomains].(map[string]bool)
	if seen == nil {
		seen = map[string]bool{}
		h.State[stateTrustDomains] = seen
	}
	if seen[m.TrustDomain] {
		return h.Errf("mcp_tasks: principal: the site block %s has several mcp_tasks with principal; "+
			"set trust_domain <name> on each (the same name where the routes authenticate the same users)", strings.Join(keys, " "))
	}
	seen[m.TrustDomain] = true
	return nil
}

// siteKeys returns the addresses of the site block the directive is in.
// httpcaddyfile keeps the block unexported; reflection reads it (read-only)
// and TestSiteKeys catches a Caddy upgrade that moves it.
func siteKeys(h httpcaddyfile.Helper) []string {
	block := reflect.ValueOf(h).FieldByName("parentBlock")
	if !block.IsValid() {
		return nil
	}
	keys := block.FieldByName("Keys")
	if !keys.IsValid() || keys.Kind() != reflect.Slice {
		return nil
	}
	out := make([]string, 0, keys.Len())
	for i := range keys.Len() {
		text := keys.Index(i).FieldByName("Text")
		if !text.IsValid() || text.Kind() != reflect.String {
			return nil
		}
		out = append(out, text.String())
	}
	return out
}
