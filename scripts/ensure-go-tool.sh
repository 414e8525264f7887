#!/usr/bin/env bash
# Usage: ensure-go-tool.sh BIN PACKAGE@VERSION
# Makes sure BIN is the Go command PACKAGE built at VERSION, building it
# with `go install` from the module proxy when it is missing or another
# version. make test needs two: helm (the chart's test) and Prometheus 3
# (TestHistogramModes' 3.x modes; Debian has no package). Builds take
# minutes (helm about 4, Prometheus about 6 on 2 cores), so BIN should lie
# in a cache that outlives the checkout (~/.cache/llm-prober). Several
# checkouts may share it: the build runs under a lock, into a temporary
# directory, and the binary is moved into place only when complete.
#
# Exit 0: BIN is there (make then requires the tests that use it to run).
# Exit 3: it cannot be built here (no go, the proxy unreachable, the build
# failed); the reason is printed, make test goes on and those tests skip.
# Exit 1: wrong usage or anything else, which fails make test.
set -euo pipefail
if [ $# != 2 ]; then
	echo "usage: $0 BIN PACKAGE@VERSION" >&2
	exit 1
fi
bin=$1 pkg=$2
version=${pkg##*@}
module=${pkg%@*}
module=${module%%/cmd/*}
name=$(basename "$bin")
dir=$(dirname "$bin")
go=${GO:-go}

# built_version prints the version of module the binary was built from.
built_version() {
	"$go" version -m "$1" 2>/dev/null | awk -v m="$module" '$1 == "mod" && $2 == m { print $3 }'
}
ready() { [ -x "$bin" ] && [ "$(built_version "$bin")" = "$version" ]; }

if ready; then
	exit 0
fi
if ! command -v "$go" >/dev/null 2>&1; then
	echo "WARNING: $name is missing at $bin and there is no $go to build it; the tests that need it will skip." >&2
	exit 3
fi
mkdir -p "$dir" || { echo "ERROR: cannot create $dir" >&2; exit 1; }
if command -v flock >/dev/null 2>&1; then
	exec 9>"$dir/.lock"
	flock 9
	if ready; then
		exit 0
	fi
fi
echo "$name not found at $bin; building $pkg (once; a few minutes on 2 cores)..." >&2
tmp=$(mktemp -d "$dir/build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
log=$dir/build.log
start=$(date +%s)
if ! GOBIN=$tmp GOFLAGS=-mod=mod "$go" install "$pkg" >"$log" 2>&1; then
	echo "WARNING: could not build $pkg (offline, or the module proxy refused it?); the tests that need $name will skip. Last lines of $log:" >&2
	tail -n 5 "$log" >&2
	exit 3
fi
mv -f "$tmp/$(basename "${pkg%@*}")" "$bin"
echo "$name ($version) built in $(($(date +%s) - start))s: $bin" >&2
