// Package scripts holds the tests of the repository's shell scripts.
package scripts

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// fakeApt puts an apt-get (and a sudo that runs its arguments) first on
// PATH: it answers the first locked calls as apt-get does when
// unattended-upgrades holds the dpkg lock, then fails with failure when
// that is set, and otherwise "installs" by creating the file installs.
func fakeApt(t *testing.T, locked int, failure, installs string) []string {
	t.Helper()
	bin := t.TempDir()
	script := `#!/bin/sh
n=$(cat "$0.calls" 2>/dev/null || echo 0); n=$((n + 1)); echo "$n" >"$0.calls"
if [ "$n" -le ` + strconv.Itoa(locked) + ` ]; then
	echo "E: Could not get lock /var/lib/dpkg/lock-frontend. It is held by process 4242 (unattended-upgr)" >&2
	echo "E: Unable to acquire the dpkg frontend lock (/var/lib/dpkg/lock-frontend), is another process using it?" >&2
	exit 100
fi
if [ -n "` + failure + `" ]; then echo "E: ` + failure + `" >&2; exit 100; fi
case " $* " in *" install "*) : >"` + installs + `"; chmod +x "` + installs + `";; esac
`
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(bin, name), []byte(text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	write("apt-get", script)
	write("sudo", "#!/bin/sh\n[ \"$1\" = -n ] && shift\nexec \"$@\"\n")
	return append(os.Environ(), "PATH="+bin+string(os.PathListSeparator)+os.Getenv("PATH"), "APT_LOCK_POLL=0.05")
}

// runChromium runs ensure-chromium.sh with CHROMIUM at a path of the
// test's and returns its exit status and output.
func runChromium(t *testing.T, env []string, chromium string) (int, string) {
	t.Helper()
	cmd := exec.Command("bash", "ensure-chromium.sh")
	cmd.Env = append(env, "CHROMIUM="+chromium)
	out, err := cmd.CombinedOutput()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return code, string(out)
}

// TestEnsureWaitsForDpkgLock: a held dpkg lock is waited for, saying so,
// and the install goes on once it is released.
func TestEnsureWaitsForDpkgLock(t *testing.T) {
	chromium := filepath.Join(t.TempDir(), "chromium")
	code, out := runChromium(t, fakeApt(t, 3, "", chromium), chromium)
	if code != 0 {
		t.Fatalf("exit %d, want 0 once the lock is released:\n%s", code, out)
	}
	if !strings.Contains(out, "Waiting for the apt/dpkg lock (held by process 4242 (unattended-upgr))") {
		t.Errorf("no message about waiting for the lock:\n%s", out)
	}
}

// TestEnsureFailsOnLockStillHeld: a lock held past APT_LOCK_WAIT fails
// (exit 1), naming the holder, instead of skipping the tests (exit 3).
func TestEnsureFailsOnLockStillHeld(t *testing.T) {
	chromium := filepath.Join(t.TempDir(), "chromium")
	code, out := runChromium(t, append(fakeApt(t, 1_000_000, "", chromium), "APT_LOCK_WAIT=1"), chromium)
	if code != 1 || !strings.Contains(out, "ERROR: another apt-get or dpkg still holds the package lock after 1s (held by process 4242 (unattended-upgr))") {
		t.Errorf("exit %d, want 1 with the lock's holder:\n%s", code, out)
	}
}

// TestEnsureSkipsWhenNotInstallable: a package that cannot be installed
// is still exit 3 for Chromium (make goes on, the browser test skips).
func TestEnsureSkipsWhenNotInstallable(t *testing.T) {
	chromium := filepath.Join(t.TempDir(), "chromium")
	code, out := runChromium(t, fakeApt(t, 0, "Unable to locate package chromium", chromium), chromium)
	if code != 3 || !strings.Contains(out, "Unable to locate package chromium") {
		t.Errorf("exit %d, want 3 with apt-get's error:\n%s", code, out)
	}
}

// TestEnsureScriptsShareLockWait: every ensure-*.sh that runs apt-get does
// it through lib/apt.sh, so that none of them treats a held lock as
// "cannot install".
func TestEnsureScriptsShareLockWait(t *testing.T) {
	files, err := filepath.Glob("ensure-*.sh")
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			code, _, _ := strings.Cut(line, "#")
			if strings.Contains(code, "apt-get ") && !strings.Contains(code, "echo") && !strings.Contains(code, "command -v apt-get") {
				t.Errorf("%s runs apt-get itself; use apt_install from lib/apt.sh: %s", f, strings.TrimSpace(line))
			}
		}
		if strings.Contains(string(b), "apt-get") && !strings.Contains(string(b), `. "$(dirname "$0")/lib/apt.sh"`) {
			t.Errorf("%s mentions apt-get but does not source lib/apt.sh", f)
		}
	}
}
