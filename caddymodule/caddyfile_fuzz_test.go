package caddymodule

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/caddyserver/caddy/v2"
	"github.com/caddyserver/caddy/v2/caddyconfig/caddyfile"
	"go.uber.org/zap"
)

// caddyfileSeeds are mcp_tasks blocks as the README, the end-to-end tests
// and the operators' examples write them.
var caddyfileSeeds = []string{
	"mcp_tasks {\n\tstorage_dir /var/lib/mcp\n\ttask_after 1500ms\n\tdefault_ttl 15m\n\tmax_ttl 1d\n\tpoll_interval 2s\n" +
		"\tmax_active_per_principal 7\n\tmax_finished_per_principal 250\n\tdefault_task_support forbidden\n\tmax_body 512KiB\n" +
		"\tpass_unreadable\n\tmax_result 2MiB\n\ttool slow_compute optional\n\ttool slow_echo optional retry_on_restart\n" +
		"\tsync_writes off\n\tsweep_interval 30s\n\trate_limit 12.5\n\tdns_rebinding_protection on\n}",
	"mcp_tasks {\n\tstorage_dir /tmp/store\n\tauth jwt {\n\t\thmac_secret 0123456789abcdef0123456789abcdef\n\t\tissuer https://idp.test\n" +
		"\t\taudience mcp-gateway\n\t\ttenant_claim org\n\t\tleeway 10s\n\t\tresource_metadata_url https://gw.example.com/.well-known/oauth-protected-resource\n\t}\n}",
	"mcp_tasks {\n\tstorage badger {\n\t\tdir /tmp/store\n\t\tsync_writes off\n\t}\n}",
	"mcp_tasks {\n\tstorage postgres {\n\t\tdsn postgres://gw:s3cret@127.0.0.1:5432/tasks?sslmode=disable\n\t\tschema mcp_tasks\n\t\tmax_conns 8\n\t}\n}",
	"mcp_tasks {\n\tstorage postgres host=/tmp port=5432 dbname=tasks\n\tprincipal {http.auth.user.id}\n\ttrust_domain corp\n}",
	"mcp_tasks {\n\tauth jwt {\n\t\tjwks_url https://idp.example.com/jwks.json\n\t\taudience_optional\n\t\tprincipal_claim uid\n\t}\n\trate_limit off\n\tmax_active_per_principal off\n}",
	"mcp_tasks {\n\tauth jwt {\n\t\tpublic_key /etc/keys/a.pem\n\t\tpublic_key /etc/keys/b.pem\n\t\taudience x\n\t}\n}",
	"mcp_tasks {\n\tstorage redis {\n\t\taddr localhost\n\t}\n}",
	"mcp_tasks {\n\tstorage badger\n\tstorage badger\n}",
	"mcp_tasks {\n\ttool \"a b\" required\n\tmax_result 1\n\tdefault_ttl 1ns\n\tmax_ttl 1ns\n}",
	"mcp_tasks {\n\tstorage postgres <<EOF\n\tpostgres://db/x\n\tEOF\n}",
}

// FuzzUnmarshalCaddyfile checks the mcp_tasks directive and the storage
// modules' Caddyfile unmarshalling: never a panic; an error names the
// Caddyfile's line; a configuration it accepts round-trips through JSON
// (the form Caddy runs) unchanged, and its storage module reads back into
// that module's type. What Validate then says of it is a clear error naming
// the option, never a failure to translate it into the gateway's config.
func FuzzUnmarshalCaddyfile(f *testing.F) {
	for _, s := range caddyfileSeeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, input string) {
		tokens, err := caddyfile.Tokenize([]byte(input), "Caddyfile")
		if err != nil || len(tokens) == 0 {
			return // not Caddyfile syntax (the lexer's error), or no directive
		}
		for _, backend := range []caddyfile.Unmarshaler{new(BadgerStorage), new(PostgresStorage)} {
			if err := backend.UnmarshalCaddyfile(caddyfile.NewDispenser(tokens)); err != nil {
				checkCaddyfileError(t, input, err)
			}
		}
		var h Handler
		if err := h.UnmarshalCaddyfile(caddyfile.NewDispenser(tokens)); err != nil {
			checkCaddyfileError(t, input, err)
			return
		}
		first, err := json.Marshal(&h)
		if err != nil {
			t.Fatalf("%q: encoding the configuration: %v", input, err)
		}
		var again Handler
		dec := json.NewDecoder(bytes.NewReader(first))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&again); err != nil {
			t.Fatalf("%q: the configuration %s does not read back: %v", input, first, err)
		}
		second, _ := json.Marshal(&again)
		if !bytes.Equal(first, second) {
			t.Fatalf("%q: the configuration changes through JSON:\n%s\n%s", input, first, second)
		}
		if again.StorageRaw != nil {
			checkStorageJSON(t, input, again.StorageRaw)
		}
		again.applyDefaults()
		if err := again.Validate(); err != nil {
			if !strings.HasPrefix(err.Error(), "mcp_tasks: ") {
				t.Fatalf("%q: Validate: %v: does not name the directive", input, err)
			}
			return
		}
		again.logger = zap.NewNop()
		if _, err := again.gatewayConfig(); err != nil {
			t.Fatalf("%q: a configuration the Caddyfile accepted and Validate passed does not translate: %v", input, err)
		}
	})
}

// checkCaddyfileError fails unless err is a clear Caddyfile error: a
// message that says where (file and line).
func checkCaddyfileError(t *testing.T, input string, err error) {
	t.Helper()
	msg := err.Error()
	if !strings.Contains(msg, ", at Caddyfile:") || strings.HasPrefix(msg, ",") {
		t.Fatalf("%q: error %q does not say where", input, msg)
	}
}

// checkStorageJSON checks the storage module object: its backend names a
// registered storage module, the rest reads into that module's type
// exactly, and provisioning and validating it fail, if at all, with an
// error naming the backend.
func checkStorageJSON(t *testing.T, input string, raw json.RawMessage) {
	t.Helper()
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		t.Fatalf("%q: storage %s is not an object: %v", input, raw, err)
	}
	var backend string
	if err := json.Unmarshal(fields["backend"], &backend); err != nil {
		t.Fatalf("%q: storage %s has no backend name: %v", input, raw, err)
	}
	delete(fields, "backend")
	info, err := caddy.GetModule(storageNamespace + "." + backend)
	if err != nil {
		t.Fatalf("%q: storage backend %q: %v", input, backend, err)
	}
	rest, _ := json.Marshal(fields)
	mod := info.New()
	dec := json.NewDecoder(bytes.NewReader(rest))
	dec.DisallowUnknownFields()
	if err := dec.Decode(mod); err != nil {
		t.Fatalf("%q: storage %s does not read into %T: %v", input, raw, mod, err)
	}
	back, _ := json.Marshal(mod)
	if !jsonEqual(back, rest) {
		t.Fatalf("%q: storage %s reads back as %s", input, rest, back)
	}
	if p, ok := mod.(caddy.Provisioner); ok {
		if err := p.Provision(caddy.Context{}); err != nil {
			checkStorageError(t, input, backend, err)
			return
		}
	}
	if v, ok := mod.(caddy.Validator); ok {
		if err := v.Validate(); err != nil {
			checkStorageError(t, input, backend, err)
		}
	}
}

func checkStorageError(t *testing.T, input, backend string, err error) {
	t.Helper()
	if !strings.HasPrefix(err.Error(), "storage "+backend+": ") {
		t.Fatalf("%q: storage %s: error %q does not name the backend", input, backend, err)
	}
}

func jsonEqual(a, b []byte) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return bytes.Equal(ja, jb)
}
