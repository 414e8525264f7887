#!/usr/bin/env bash
# Makes sure Debian's chromium is installed: the status page's browser test
# (cmd/llm-prober/status_browser_test.go) loads the page in headless
# Chromium. Idempotent: does nothing when /usr/bin/chromium is there.
#
# Exit 0: Chromium is there (make then requires the browser test to run).
# Exit 3: it cannot be installed here (no apt-get, no root, offline or no
# such package); the reason is printed and make test goes on, the browser
# test skipping. Exit 1: anything else, which fails make test. A dpkg lock
# held by another apt-get or dpkg (unattended-upgrades) is waited for, up
# to 10 minutes (scripts/lib/apt.sh, APT_LOCK_WAIT): still held after that
# is exit 1, not a reason to skip the test.
set -euo pipefail
# shellcheck source=lib/apt.sh
. "$(dirname "$0")/lib/apt.sh"
chromium=${CHROMIUM:-/usr/bin/chromium}
if [ -x "$chromium" ]; then
	exit 0
fi
echo "Chromium not found at $chromium; installing Debian's chromium package (about 100 MB)..." >&2
if ! command -v apt-get >/dev/null 2>&1; then
	echo "WARNING: Chromium is missing and apt-get is not available; the status page's browser test will skip. Install Chromium and set CHROMIUM=/path/to/it to run it." >&2
	exit 3
fi
if ! apt_root; then
	echo "WARNING: Chromium is missing and installing it needs root; the status page's browser test will skip. Run: apt-get install chromium" >&2
	exit 3
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
rc=0
apt_install "$log" chromium || rc=$?
case $rc in
0) ;;
1)
	echo "WARNING: could not install Debian's chromium package (offline, or no such package?); the status page's browser test will skip. Last lines of apt-get:" >&2
	tail -n 5 "$log" >&2
	exit 3
	;;
*) exit 1 ;;
esac
if [ ! -x "$chromium" ]; then
	echo "ERROR: the chromium package installed but $chromium is missing." >&2
	exit 1
fi
echo "Chromium installed: $("$chromium" --version 2>/dev/null | head -n1)" >&2
