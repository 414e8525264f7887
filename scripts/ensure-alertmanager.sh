#!/usr/bin/env bash
# Makes sure Alertmanager and amtool are on PATH, installing Debian's
# prometheus-alertmanager package (binaries prometheus-alertmanager and
# amtool) when they are not. test/e2e's TestAlertmanager runs a real
# Alertmanager with mixin/alertmanager/alertmanager.yml, and mixin's tests
# check that file with amtool. Idempotent: does nothing when both are
# already there (the upstream binary name `alertmanager` counts too).
#
# Another apt-get or dpkg (unattended-upgrades, a parallel make) may hold
# the dpkg lock: the install waits up to 10 minutes for it
# (scripts/lib/apt.sh, APT_LOCK_WAIT) rather than failing at once.
#
# Exit 0: both are there. Exit 1: they are missing and cannot be installed
# here (no apt-get, no root, offline); the reason is printed, and make test
# fails, as it requires the Alertmanager test to run.
set -euo pipefail
# shellcheck source=lib/apt.sh
. "$(dirname "$0")/lib/apt.sh"
have_alertmanager() {
	command -v prometheus-alertmanager >/dev/null 2>&1 || command -v alertmanager >/dev/null 2>&1
}
if have_alertmanager && command -v amtool >/dev/null 2>&1; then
	exit 0
fi
echo "Alertmanager or amtool not found; installing Debian's prometheus-alertmanager package (gives both)..." >&2
if ! command -v apt-get >/dev/null 2>&1; then
	echo "ERROR: Alertmanager is missing and apt-get is not available. Install Alertmanager 0.25 or newer (its release tarball has both alertmanager and amtool) and put both on PATH." >&2
	exit 1
fi
if ! apt_root; then
	echo "ERROR: Alertmanager is missing and installing it needs root. Run: apt-get install prometheus-alertmanager" >&2
	exit 1
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
# The package's post-install script tries to start the Alertmanager
# service; where there is no init system it says so without failing.
rc=0
apt_install "$log" prometheus-alertmanager || rc=$?
if [ "$rc" = 1 ]; then
	echo "ERROR: could not install Debian's prometheus-alertmanager package (offline, or no such package?). Last lines of apt-get:" >&2
	tail -n 5 "$log" >&2
fi
if [ "$rc" != 0 ]; then
	exit 1
fi
if ! have_alertmanager; then
	echo "ERROR: the prometheus-alertmanager package installed but neither prometheus-alertmanager nor alertmanager is on PATH." >&2
	exit 1
fi
if ! command -v amtool >/dev/null 2>&1; then
	echo "ERROR: the prometheus-alertmanager package installed but amtool is not on PATH." >&2
	exit 1
fi
echo "Alertmanager installed: $( (prometheus-alertmanager --version || alertmanager --version) 2>&1 | head -n1)" >&2
