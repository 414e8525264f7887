#!/usr/bin/env bash
# Makes sure promtool and prometheus (the end-to-end test runs a real one)
# are on PATH, installing Debian's prometheus package, which provides both,
# when they are not. Idempotent: does nothing when both are already there.
# A dpkg lock held by another apt-get or dpkg is waited for, up to 10
# minutes (scripts/lib/apt.sh, APT_LOCK_WAIT). Exit 1: they are missing
# and cannot be installed; the reason is printed.
set -euo pipefail
# shellcheck source=lib/apt.sh
. "$(dirname "$0")/lib/apt.sh"
if command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1; then
	exit 0
fi
echo "promtool or prometheus not found; installing Debian's prometheus package (gives both, 2.42)..." >&2
if ! command -v apt-get >/dev/null 2>&1; then
	echo "ERROR: promtool is missing and apt-get is not available. Install Prometheus' promtool (2.42 or newer) and put it on PATH." >&2
	exit 1
fi
if ! apt_root; then
	echo "ERROR: promtool is missing and installing it needs root. Run: apt-get install prometheus" >&2
	exit 1
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# The package's post-install script would try to start the Prometheus service;
# on machines without an init system that must not fail the install.
rc=0
apt_install "$log" prometheus || rc=$?
if [ "$rc" = 1 ]; then
	echo "ERROR: could not install Debian's prometheus package (offline, or no such package?); install promtool by hand. Last lines of apt-get:" >&2
	tail -n 5 "$log" >&2
fi
if [ "$rc" != 0 ]; then
	exit 1
fi
for tool in promtool prometheus; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "ERROR: the prometheus package installed but $tool is not on PATH." >&2
		exit 1
	fi
done
echo "promtool installed: $(promtool --version 2>&1 | head -n1)" >&2
