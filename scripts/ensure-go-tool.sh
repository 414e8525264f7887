#!/usr/bin/env bash
# Usage: ensure-go-tool.sh DIR PACKAGE@VERSION
# Makes sure a Go command that tests need (helm, Prometheus 3) is built in
# DIR, with `go install` from the module proxy; idempotent: does nothing
# when DIR holds it already. Builds take minutes (helm about 4, Prometheus
# about 6 on 2 cores), so DIR should be a cache that outlives the checkout.
#
# Exit 0: the command is there. Exit 3: it cannot be built here (no go, or
# the module proxy unreachable); the reason is printed, make test goes on
# and the tests that need it skip. Exit 1: wrong usage.
set -euo pipefail
if [ $# != 2 ]; then
	echo "usage: $0 DIR PACKAGE@VERSION" >&2
	exit 1
fi
dir=$1 pkg=$2
name=$(basename "${pkg%@*}")
if [ -x "$dir/$name" ]; then
	exit 0
fi
go=${GO:-go}
if ! command -v "$go" >/dev/null 2>&1; then
	echo "WARNING: $go not found; cannot build $pkg, the tests that need $name will skip." >&2
	exit 3
fi
echo "Building $pkg into $dir (once; it takes a few minutes)..." >&2
mkdir -p "$dir"
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! GOBIN="$dir" GOFLAGS=-mod=mod "$go" install "$pkg" >"$log" 2>&1; then
	echo "WARNING: could not build $pkg (offline, or the module proxy refused it?); the tests that need $name will skip. Last lines:" >&2
	tail -n 5 "$log" >&2
	exit 3
fi
echo "Built $dir/$name" >&2
