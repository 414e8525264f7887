# shellcheck shell=bash
# Installing Debian packages for the ensure-*.sh scripts, sourced by them:
# one place that knows how to get root and how to wait for the dpkg lock.
#
# Another apt-get or dpkg (unattended-upgrades on a fresh machine, a
# parallel make) may hold the dpkg or apt lists lock for minutes. That is
# not "cannot install here": apt_install waits for it, up to
# APT_LOCK_WAIT seconds (default 600), saying so every minute, and fails
# with its own status (4) when it is still held, so that a caller can fail
# clearly instead of skipping the tests that need the package.

# apt_root sets apt_sudo to what runs apt-get as root ("" when root
# already); it fails when root cannot be had without a password.
apt_root() {
	apt_sudo=""
	if [ "$(id -u)" != 0 ]; then
		if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
			apt_sudo="sudo -n"
		else
			return 1
		fi
	fi
}

# apt_locked reports whether the apt-get output in file $1 failed on a
# lock another process holds.
apt_locked() {
	grep -qE 'Could not get lock|Unable to (acquire|lock) the (dpkg |administration )?(frontend |directory|lock)|is another process using it' "$1"
}

# apt_get_waiting LOG ARGS... runs apt-get ARGS (as $apt_sudo) with its
# output in LOG, again while it fails on a held lock, until $apt_deadline.
# Status 0: done; 4: the lock was still held at the deadline; 1: apt-get
# failed otherwise.
apt_get_waiting() {
	local log=$1
	shift
	local next_note=0
	while :; do
		# shellcheck disable=SC2086 # apt_sudo is a command and its flag
		if $apt_sudo apt-get "$@" >"$log" 2>&1; then
			return 0
		fi
		if ! apt_locked "$log"; then
			return 1
		fi
		if [ "$SECONDS" -ge "$apt_deadline" ]; then
			return 4
		fi
		if [ "$SECONDS" -ge "$next_note" ]; then
			echo "Waiting for the apt/dpkg lock ($(grep -m1 -oE 'held by process [0-9]+( \([^)]*\))?' "$log" || echo 'held by another process')), up to $((apt_deadline - SECONDS))s more..." >&2
			next_note=$((SECONDS + 60))
		fi
		sleep "${APT_LOCK_POLL:-5}"
	done
}

# apt_install LOG PACKAGE... installs the packages without recommends.
# The package lists may be missing or stale (a fresh image has none): it
# tries them as they are, then once more after an update. Call apt_root
# first. Status 0: installed; 4: the dpkg or apt lock was held by another
# process for over APT_LOCK_WAIT seconds (the message is printed); 1: the
# install failed otherwise (offline, no such package), its output in LOG.
apt_install() {
	local log=$1 rc
	shift
	apt_deadline=$((SECONDS + ${APT_LOCK_WAIT:-600}))
	export DEBIAN_FRONTEND=noninteractive
	apt_get_waiting "$log" install -y --no-install-recommends "$@" && return 0
	rc=$?
	if [ "$rc" = 1 ]; then
		apt_get_waiting "$log" update && apt_get_waiting "$log" install -y --no-install-recommends "$@" && return 0
		rc=$?
	fi
	if [ "$rc" = 4 ]; then
		echo "ERROR: another apt-get or dpkg still holds the package lock after ${APT_LOCK_WAIT:-600}s ($(grep -m1 -oE 'held by process [0-9]+( \([^)]*\))?' "$log" || echo 'holder unknown')); let it finish (or stop it) and run this again. Last lines of apt-get:" >&2
		tail -n 3 "$log" >&2
	fi
	return "$rc"
}
