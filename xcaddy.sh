#!/usr/bin/env bash
# Builds and runs Caddy with the mcp_tasks module.
#
#   ./xcaddy.sh build   build ./caddy (Caddy v2.11.9 + this module) and the demo upstream
#                       (XCADDY_GO_BUILD_FLAGS: go build flags after the script's own)
#   ./xcaddy.sh build-command  print the xcaddy command build runs (variables, then arguments;
#                       build also stamps the source hash through XCADDY_GO_BUILD_FLAGS)
#   ./xcaddy.sh source-hash  print the hash of the sources build stamps into ./caddy
#   ./xcaddy.sh run     build, start the demo MCP upstream on 127.0.0.1:9100 and run
#                       Caddyfile.example (the gateway on http://localhost:8080/mcp)
#   ./xcaddy.sh test    lint, build, then run every test (unit and end-to-end)
#   ./xcaddy.sh unit [go test flags]  the unit tests (every package but the
#                       end-to-end ones), with -race: the loop while working
#   ./xcaddy.sh lint [golangci-lint flags]  static analysis (.ci/golangci.yml)
#   ./xcaddy.sh fuzz [time]  run every Go fuzz target for time each (default 10m)
#   ./xcaddy.sh bench   build, then measure the task path and print the table
#   ./xcaddy.sh soak [duration] [badger|postgres|both] [soak flags]
#                       build, then run the soak (default 30m on each store)
#
# Needs Go only; the tests install what else they need (Node 22 and the MCP
# conformance suite from npm) into a cache directory outside the repository,
# and PostgreSQL's server binaries and chromium with apt-get when run as root.
set -euo pipefail

cd "$(dirname "$(readlink -f "$0")")"

CADDY_VERSION=v2.11.9
MODULE=$(go list -m)
CACHE_DIR=${XDG_CACHE_HOME:-$HOME/.cache}/caddy-mcp-tasks
DEMO_BIN=$CACHE_DIR/demo-upstream

# The tools (xcaddy, golangci-lint) are pinned in a module file of their
# own, so that they stay out of go.mod and so out of the module graph of
# every build that plugs this module in. Update one with
#   (cd .ci/tools && go get -tool PACKAGE@VERSION && go mod tidy)
TOOLS_MODFILE=.ci/tools/go.mod

# go build stamps binaries with the checkout's git state and fails when git
# cannot read it (git missing, a repository owned by another user: "dubious
# ownership"). Only then is the stamp left out.
if [[ -e .git ]] && ! git status --porcelain >/dev/null 2>&1; then
	echo "git cannot read this checkout; building without VCS stamps (-buildvcs=false)" >&2
	export GOFLAGS="${GOFLAGS:-} -buildvcs=false"
fi

# source_hash names what goes into ./caddy: Caddy's version, the Go
# toolchain, the go build flags, the module's requirements, xcaddy's version, every non-test Go file the plugin
# is built from and the console's files it embeds. A build of the same
# sources is taken from the cache.
source_hash() {
	{
		echo "$CADDY_VERSION $(go env GOVERSION)"
		build_flags HASH # the go build flags, with the hash's place
		cat go.mod go.sum .ci/tools/go.mod
		find caddymodule taskproxy auth \( -name '*.go' ! -name '*_test.go' -o -path 'caddymodule/console/*' \) -type f -print0 |
			LC_ALL=C sort -z | xargs -0 sha256sum
	} | sha256sum | cut -c1-16
}

# xcaddy_build runs xcaddy with this module replaced by the checkout. Go
# still asks whether $MODULE/caddymodule is a module of its own, and a
# module proxy that answers that with 403 rather than 404 (as the one this
# was written on does) fails the build. GONOPROXY and GOVCS=...:off answer
# every lookup of this module's paths with "not found" before asking
# anyone, so the replace wins whatever GOPROXY is; nothing else is fetched
# differently.
#
# xcaddy_command prints, one a line, the variables and then the arguments
# of that xcaddy run (./xcaddy.sh build-command), so that a test can check
# that README.md documents the very command this script runs.
xcaddy_command() {
	local noproxy govcs
	noproxy=$(go env GONOPROXY)
	govcs=$(go env GOVCS)
	printf '%s\n' "GONOPROXY=$MODULE${noproxy:+,$noproxy}" "GOVCS=$MODULE:off${govcs:+,$govcs}" \
		xcaddy build "$CADDY_VERSION" --with "$MODULE/caddymodule" --replace "$MODULE=."
}

xcaddy_build() {
	local line vars=() args=()
	while IFS= read -r line; do
		if [[ ${#args[@]} -eq 0 && $line == *=* ]]; then
			vars+=("$line")
		else
			args+=("$line")
		fi
	done < <(xcaddy_command)
	# args[0] is xcaddy itself, run as the pinned Go tool.
	env "${vars[@]}" go tool -modfile="$TOOLS_MODFILE" "${args[@]}" "$@"
}

# build_flags are the go build flags of ./caddy: xcaddy's own defaults
# and the source hash stamped into the module (caddymodule.sourceHash),
# then the caller's XCADDY_GO_BUILD_FLAGS, which go build lets win where
# they set a flag again (their -ldflags drops the stamp, their -tags
# xcaddy's). They are part of source_hash, so a build with other flags is
# never taken from the cache. A cached binary may have been built
# in another checkout; caddy mcp-tasks version then names its sources by
# this hash, which is true of it, rather than by that checkout's directory.
build_flags() {
	echo "-ldflags '-w -s -X $MODULE/caddymodule.sourceHash=$1' -trimpath -tags nobadger,nomysql,nopgx${XCADDY_GO_BUILD_FLAGS:+ $XCADDY_GO_BUILD_FLAGS}"
}

build() {
	mkdir -p "$CACHE_DIR/builds"
	local cached hash
	hash=$(source_hash)
	cached="$CACHE_DIR/builds/caddy-$hash"
	# ./caddy is replaced by a rename, never written in place: a ./caddy
	# that is running (./xcaddy.sh run in another terminal) keeps its file,
	# where writing into it fails with "text file busy".
	if [[ -x $cached ]]; then
		echo "using ./caddy built from the same sources ($cached)" >&2
		cp "$cached" ./caddy.tmp.$$ && mv -f ./caddy.tmp.$$ ./caddy
	else
		echo "building ./caddy ($CADDY_VERSION with $MODULE)" >&2
		# The plugin package is caddymodule; the module root holds no Go
		# package, so the module is replaced by this directory and the
		# package imported.
		XCADDY_GO_BUILD_FLAGS=$(build_flags "$hash") xcaddy_build --output ./caddy.tmp.$$
		cp ./caddy.tmp.$$ "$cached.tmp.$$" && mv -f "$cached.tmp.$$" "$cached"
		mv -f ./caddy.tmp.$$ ./caddy
		# Keep the five newest builds.
		ls -1t "$CACHE_DIR"/builds/caddy-* 2>/dev/null | tail -n +6 | xargs -r rm -f
	fi
	go build -o "$DEMO_BIN" ./integration/cmd/demo-upstream
}

# demo_pid is global, not local to run: the EXIT trap runs after run has
# returned, when its locals are gone (and set -u would fail on them).
demo_pid=

stop_demo() {
	if [[ -n $demo_pid ]]; then
		kill "$demo_pid" 2>/dev/null || true
		wait "$demo_pid" 2>/dev/null || true
		demo_pid=
	fi
}

run() {
	build
	"$DEMO_BIN" -addr 127.0.0.1:9100 -path /mcp &
	demo_pid=$!
	# EXIT covers Caddy failing to start (set -e) as well as Ctrl-C.
	trap stop_demo EXIT
	trap 'stop_demo; exit 130' INT TERM
	cat >&2 <<'MSG'

The gateway serves MCP on http://localhost:8080/mcp (demo upstream on 127.0.0.1:9100).
Try a 2025-11-25 session:

  curl -si http://localhost:8080/mcp -H 'Content-Type: application/json' \
    -H 'Accept: application/json, text/event-stream' \
    -d '{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"curl","version":"1"}}}'

Stop with Ctrl-C.
MSG
	./caddy run --config Caddyfile.example --adapter caddyfile
}

# The PostgreSQL store's tests start a throwaway cluster from the server
# binaries (taskproxy/pgstore/pgtest); on a fresh Debian or Ubuntu machine
# running as root they are installed here. Otherwise those tests fail and
# say what is missing, unless MCP_TASKS_TEST_DSN names a server.
ensure_postgres() {
	if [[ -n ${MCP_TASKS_TEST_DSN:-} ]] || compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null; then
		return
	fi
	if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
		echo "installing postgresql for the store tests" >&2
		apt-get update -qq >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >&2
	fi
}

# Tests that drive tools from Debian install them here when they are
# missing, as PostgreSQL is: the alert rules are checked with promtool
# (prometheus), the systemd unit with systemd-analyze (systemd), and the
# console is driven in a headless chromium. Without root or apt-get those
# tests skip and say what is missing.
ensure_test_tools() {
	local missing=()
	command -v promtool >/dev/null || missing+=(prometheus)
	command -v systemd-analyze >/dev/null || missing+=(systemd)
	command -v chromium >/dev/null || missing+=(chromium)
	if [[ ${#missing[@]} -eq 0 ]]; then
		return
	fi
	if [[ $(id -u) -eq 0 ]] && command -v apt-get >/dev/null; then
		echo "installing ${missing[*]} for the tests" >&2
		apt-get update -qq >&2
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
	fi
}

# run_lint runs golangci-lint, pinned as a Go tool in .ci/tools/go.mod,
# with .ci/golangci.yml over the whole module. The first run builds the tool and
# fills its cache (minutes); later runs take about a minute. Runs of other
# checkouts may share the cache at once: without --allow-parallel-runners
# the second one fails ("parallel golangci-lint is running").
run_lint() {
	echo "linting (golangci-lint, .ci/golangci.yml)" >&2
	go tool -modfile="$TOOLS_MODFILE" golangci-lint run --allow-parallel-runners --config .ci/golangci.yml "$@" ./...
}

# unit_packages prints every package but the end-to-end ones: ./integration
# (a real Caddy per test) and the PostgreSQL replica suite.
unit_packages() {
	go list ./... | grep -vE '/integration$|/pgstore/replicatest$'
}

# run_unit runs the unit tests with the race detector: the loop to run
# while working (./xcaddy.sh test runs them too, with everything else).
# Many wait on PostgreSQL or Badger's disk writes: 8 at a time (here
# 46 s at the default of 2, 39 s at 8).
run_unit() {
	ensure_postgres
	# shellcheck disable=SC2046 # one argument per package
	go test -race -count=1 -parallel 8 "$@" $(unit_packages)
}

run_tests() {
	# Lint first: it is the quickest to fail.
	run_lint
	build
	ensure_postgres
	ensure_test_tools
	# -parallel 12: the end-to-end tests mostly wait on other processes
	# (each starts its own Caddy, upstreams and stores on addresses and
	# directories of its own), so they share the machine's cores well: on
	# two cores ./integration took 205 s with 4 at a time, 155 s with 8 and
	# 127 s with 12 (its processes then used about 40 % of the two cores).
	CADDY_BINARY="$PWD/caddy" DEMO_UPSTREAM_BINARY="$DEMO_BIN" \
		go test -race -count=1 -timeout 20m -parallel 12 ./... "$@"
	# A short run of every fuzz target (their seeds and saved failures ran
	# above as ordinary tests); ./xcaddy.sh fuzz runs long campaigns. A
	# count, not a duration: a duration can run out while the fuzzer still
	# measures its corpus on a loaded machine, which go test reports as a
	# failure ("context deadline exceeded"). Each target has its own count
	# (fuzz_short_count), so that the whole step stays under 3 minutes.
	run_fuzz "${MCP_TASKS_FUZZ_TIME:-short}"
}

# fuzz_short_count prints the executions of a target in the short run of
# ./xcaddy.sh test: about 10 s each on two shared cores. Targets that walk
# bigger machinery run fewer.
fuzz_short_count() {
	case $1 in
	FuzzUnmarshalCaddyfile) echo 5000x ;; # Caddy's lexer, dispenser and module registry: ~1,500/s, and its instrumented build alone takes most of a minute
	FuzzIdempotencyFingerprint) echo 30000x ;; # three fingerprints and a respelling per input: ~3,000/s
	FuzzDiscoveryRewrite | FuzzVerify) echo 50000x ;; # whole upstream answers; HMAC-signed tokens
	*) echo 100000x ;; # FuzzParseMessage, FuzzCheckReadMembers, FuzzEqualFold, FuzzEdit, FuzzInt (~35,000/s), FuzzReader, FuzzDecodeRecord
	esac
}

# fuzz_targets prints "package target" for every Go fuzz target of the module.
fuzz_targets() {
	grep -rE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*\(' . |
		sed -E 's|^\./(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]*)\(.*|./\1 \2|' | LC_ALL=C sort
}

# run_fuzz runs every fuzz target for the given time each ("short": each
# target's fuzz_short_count). A failing input is written under the package's
# testdata/fuzz, where it stays as a test case of every later run: commit it
# with the fix. MCP_TASKS_FUZZ_PARALLEL sets the fuzzing workers (default:
# one per CPU).
run_fuzz() {
	local time=$1 each pkg target
	fuzz_targets | while read -r pkg target; do
		each=$time
		if [[ $time == short ]]; then
			each=$(fuzz_short_count "$target")
		fi
		echo "fuzzing $target ($pkg) for $each" >&2
		go test -run '^$' -fuzz "^$target\$" -fuzztime "$each" ${MCP_TASKS_FUZZ_PARALLEL:+-parallel "$MCP_TASKS_FUZZ_PARALLEL"} "$pkg"
	done
}

run_bench() {
	build
	ensure_postgres
	go test -run '^$' -bench . -benchmem -benchtime 2s ./taskproxy
	go run ./integration/bench -caddy ./caddy "$@"
}

# run_soak runs the soak (integration/bench/soak.go): a steady mix of both
# protocol versions for the given duration on each store asked for, sampling
# Caddy's RSS, goroutines, open files and the store's size; it exits non-zero
# when a goal is not met. Extra arguments are flags of the soak (-soak-rate,
# -soak-ttl, ...; go run ./integration/bench -h lists them).
run_soak() {
	local duration=${1:-30m} store=${2:-both}
	shift $(($# < 2 ? $# : 2))
	build
	if [[ $store != badger ]]; then
		ensure_postgres
	fi
	go run ./integration/bench -caddy ./caddy -soak "$duration" -soak-store "$store" "$@"
}

case "${1:-}" in
build) build ;;
build-command) xcaddy_command ;;
source-hash) source_hash ;;
bench) shift; run_bench "$@" ;;
soak) shift; run_soak "$@" ;;
run) run ;;
test) shift; run_tests "$@" ;;
unit) shift; run_unit "$@" ;;
lint) shift; run_lint "$@" ;;
fuzz) run_fuzz "${2:-10m}" ;;
*)
	echo "usage: $0 build|build-command|source-hash|run|test [go test flags]|unit [go test flags]|lint [golangci-lint flags]|fuzz [time per target]|bench [bench flags]|soak [duration] [badger|postgres|both]" >&2
	exit 2
	;;
esac
