package caddymodule

import (
	"encoding/json"
	"fmt"
	"io"
	"runtime/debug"

	"github.com/spf13/cobra"

	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/badgerstore"
	"github.com/caddy-mcp-tasks/caddy-mcp-tasks/taskproxy/pgstore"
)

// Version is the release of this module, as caddy mcp-tasks version prints
// it and as README.md's upgrade notes are headed. It names the code, not the
// data: a store carries a format of its own (badgerstore.FormatVersion for
// Badger, pgstore.SchemaVersion for PostgreSQL's migrations), which a
// release bumps only when it changes what is written; several releases may
// share a format. The notes under this version say which formats it writes
// and what an upgrade from an older one does.
const Version = "v0.4.0"

// sourceHash names the sources the binary was built from, as ./xcaddy.sh
// build computes it (its source_hash: Caddy's version, the toolchain, the
// requirements and every non-test Go file of the plugin) and stamps it with
// -ldflags -X; empty in a build made otherwise. The script reuses a binary
// built from the same sources in any checkout, so the hash, not the
// directory a build replaced the module with, says what the binary holds.
var sourceHash string

// ownModulePath is the module this package belongs to, as go.mod names it and
// as the build info of a Caddy built with it lists it.
const ownModulePath = "github.com/caddy-mcp-tasks/caddy-mcp-tasks"

// versionReport is what caddy mcp-tasks version prints: with --json as is,
// else as lines for people.
type versionReport struct {
	Version      string `json:"version"`
	BadgerFormat uint64 `json:"badger_format"`
	PGSchema     int    `json:"postgres_schema"`
	// Module is this module as the build resolved it; absent when the
	// binary carries no build info.
	Module *moduleBuild `json:"module,omitempty"`
	// GoVersion is the toolchain the binary was built with.
	GoVersion string `json:"go_version,omitempty"`
	// VCS is the revision the binary was built from, when go build
	// stamped it (it stamps the main module's checkout).
	VCS map[string]string `json:"vcs,omitempty"`
	// Sources is the hash of the sources ./xcaddy.sh build built the
	// binary from (sourceHash); absent in a build made otherwise.
	Sources string `json:"sources,omitempty"`
}

// moduleBuild is one module of the binary's build info. Path is empty
// for a replace by a directory in a build stamped with its sources: that
// build may have been made in another checkout (newVersionReport).
type moduleBuild struct {
	Path    string       `json:"path,omitempty"`
	Version string       `json:"version"`
	Sum     string       `json:"sum,omitempty"`
	Replace *moduleBuild `json:"replace,omitempty"`
}

// newVersionReport reads the build info of the running binary (nil when
// it has none) and the hash of its sources (sourceHash).
//
// A build that replaced the module by a directory records that directory,
// where the build ran. ./xcaddy.sh build copies a binary built from the
// same sources in any checkout, so in a binary stamped with its sources
// the directory may name another checkout: the report leaves it out and
// names the sources by their hash instead.
func newVersionReport(bi *debug.BuildInfo, sources string) versionReport {
	rep := versionReport{Version: Version, BadgerFormat: badgerstore.FormatVersion, PGSchema: pgstore.SchemaVersion, Sources: sources}
	if bi == nil {
		return rep
	}
	rep.GoVersion = bi.GoVersion
	mods := append([]*debug.Module{&bi.Main}, bi.Deps...)
	for _, m := range mods {
		if m != nil && m.Path == ownModulePath {
			rep.Module = buildModule(m)
			if r := m.Replace; r != nil && (r.Version == "" || r.Version == "(devel)") && sources != "" { // a directory
				rep.Module.Replace.Path = ""
			}
			break
		}
	}
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs", "vcs.revision", "vcs.time", "vcs.modified":
			if rep.VCS == nil {
				rep.VCS = map[string]string{}
			}
			rep.VCS[s.Key] = s.Value
		}
	}
	return rep
}

func buildModule(m *debug.Module) *moduleBuild {
	mb := &moduleBuild{Path: m.Path, Version: m.Version, Sum: m.Sum}
	if m.Replace != nil {
		mb.Replace = buildModule(m.Replace)
		if mb.Replace.Version == "" {
			// A replace by a directory has no version; go reports
			// such a build of a module as (devel).
			mb.Replace.Version = "(devel)"
		}
	}
	return mb
}

// write prints the report as lines for people.
func (r versionReport) write(w io.Writer) error {
	lines := []string{
		"caddy-mcp-tasks " + r.Version,
		fmt.Sprintf("store formats: badger %d, postgres schema %d", r.BadgerFormat, r.PGSchema),
	}
	switch m := r.Module; {
	case m == nil:
		lines = append(lines, "module: no build info")
	case m.Replace != nil && m.Replace.Path == "":
		lines = append(lines, fmt.Sprintf("module: %s %s => a checkout %s", m.Path, m.Version, m.Replace.Version))
	case m.Replace != nil:
		lines = append(lines, fmt.Sprintf("module: %s %s => %s %s", m.Path, m.Version, m.Replace.Path, m.Replace.Version))
	default:
		lines = append(lines, fmt.Sprintf("module: %s %s", m.Path, m.Version))
	}
	if r.Sources != "" {
		lines = append(lines, "sources: "+r.Sources+" (./xcaddy.sh build's source hash)")
	}
	if r.GoVersion != "" {
		lines = append(lines, "go: "+r.GoVersion)
	}
	if rev := r.VCS["vcs.revision"]; rev != "" {
		line := "revision: " + rev
		if r.VCS["vcs.modified"] == "true" {
			line += " (modified)"
		}
		lines = append(lines, line)
	}
	for _, l := range lines {
		if _, err := fmt.Fprintln(w, l); err != nil {
			return fmt.Errorf("writing the version: %w", err)
		}
	}
	return nil
}

func runVersion(cmd *cobra.Command, _ []string) error {
	bi, _ := debug.ReadBuildInfo()
	rep := newVersionReport(bi, sourceHash)
	if wantJSON(cmd) {
		enc := json.NewEncoder(cmd.OutOrStdout())
		if err := enc.Encode(rep); err != nil {
			return fmt.Errorf("writing the version: %w", err)
		}
		return nil
	}
	return rep.write(cmd.OutOrStdout())
}
