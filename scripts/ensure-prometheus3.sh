#!/usr/bin/env bash
# Makes sure a Prometheus 3 binary is at $PROMETHEUS3 (default
# ~/.cache/llm-prober/prom3/prometheus): test/e2e's TestHistogramModes runs
# it in the histogram modes Debian's Prometheus 2.42 cannot (native and
# classic histograms stored together; classic ones converted to native).
# Debian has no Prometheus 3 package, so it is built from the Go module
# proxy (about 6 minutes on 2 cores, once; the binary is cached).
# Idempotent: does nothing when the binary is there and is the wanted
# version. Unlike scripts/ensure-go-tool.sh it checks the cached binary's
# version (the cache path carries none), and builds under a lock into a
# temporary file moved into place, as several checkouts share the cache.
#
# Exit 0: the binary is there (make then requires the 3.x modes to run).
# Exit 3: it cannot be built here (no go, proxy unreachable, build failed);
# the reason is printed and make test goes on, the 3.x modes skipping.
# Exit 1: anything else, which fails make test.
set -euo pipefail
version=${PROMETHEUS3_VERSION:-v0.316.0} # the module version of Prometheus 3.16
bin=${PROMETHEUS3:-$HOME/.cache/llm-prober/prom3/prometheus}
dir=$(dirname "$bin")
go=${GO:-go}
module=github.com/prometheus/prometheus

# built_version prints the module version the binary was built from.
built_version() {
	"$go" version -m "$1" 2>/dev/null | awk -v m="$module" '$1 == "mod" && $2 == m { print $3 }'
}

if [ -x "$bin" ] && [ "$(built_version "$bin")" = "$version" ]; then
	exit 0
fi
if ! command -v "$go" >/dev/null 2>&1; then
	echo "WARNING: Prometheus 3 is missing at $bin and there is no go to build it; the Prometheus 3 modes of TestHistogramModes will skip." >&2
	exit 3
fi
mkdir -p "$dir" || { echo "ERROR: cannot create $dir" >&2; exit 1; }
# One build at a time per cache directory: a second make test (another
# worktree) waits for the first and then finds the binary.
if command -v flock >/dev/null 2>&1; then
	exec 9>"$dir/.lock"
	flock 9
	if [ -x "$bin" ] && [ "$(built_version "$bin")" = "$version" ]; then
		exit 0
	fi
fi
echo "Prometheus 3 not found at $bin; building $module/cmd/prometheus@$version with $go (about 6 minutes on 2 cores, once)..." >&2
tmp=$(mktemp -d "$dir/build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
log=$dir/build.log
start=$(date +%s)
if ! GOBIN=$tmp "$go" install "$module/cmd/prometheus@$version" >"$log" 2>&1; then
	echo "WARNING: could not build Prometheus 3 (go install $module/cmd/prometheus@$version failed; offline, or the module proxy refused it?); the Prometheus 3 modes of TestHistogramModes will skip. Last lines of $log:" >&2
	tail -n 5 "$log" >&2
	exit 3
fi
mv -f "$tmp/prometheus" "$bin"
echo "Prometheus 3 ($version) built in $(($(date +%s) - start))s: $bin" >&2
