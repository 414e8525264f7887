#!/usr/bin/env bash
# Makes sure promtool and prometheus (the end-to-end test runs a real one)
# are on PATH, installing Debian's prometheus package, which provides both,
# when they are not. Idempotent: does nothing when both are already there.
set -euo pipefail
if command -v promtool >/dev/null 2>&1 && command -v prometheus >/dev/null 2>&1; then
	exit 0
fi
echo "promtool or prometheus not found; installing Debian's prometheus package (gives both, 2.42)..." >&2
if ! command -v apt-get >/dev/null 2>&1; then
	echo "ERROR: promtool is missing and apt-get is not available. Install Prometheus' promtool (2.42 or newer) and put it on PATH." >&2
	exit 1
fi
sudo=""
if [ "$(id -u)" != 0 ]; then
	if command -v sudo >/dev/null 2>&1; then
		sudo="sudo"
	else
		echo "ERROR: promtool is missing and installing it needs root. Run: apt-get install prometheus" >&2
		exit 1
	fi
fi
export DEBIAN_FRONTEND=noninteractive
# The package's post-install script would try to start the Prometheus service;
# on machines without an init system that must not fail the install.
$sudo apt-get install -y --no-install-recommends prometheus >/dev/null 2>&1 ||
	{ $sudo apt-get update >/dev/null && $sudo apt-get install -y --no-install-recommends prometheus >/dev/null; } || {
	echo "ERROR: could not install Debian's prometheus package (apt-get install prometheus failed); install promtool by hand." >&2
	exit 1
}
for tool in promtool prometheus; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "ERROR: the prometheus package installed but $tool is not on PATH." >&2
		exit 1
	fi
done
echo "promtool installed: $(promtool --version 2>&1 | head -n1)" >&2
