package testutil

import (
	"os"
	"os/exec"
	"testing"
)

// RequireTool returns the path of program name on PATH. Where it is
// missing the test is skipped, or fails when the environment variable
// require is set (make test sets it where it installed the program); hint
// says how to get it.
func RequireTool(t testing.TB, name, require, hint string) string {
	t.Helper()
	path, err := exec.LookPath(name)
	if err != nil {
		if os.Getenv(require) != "" {
			t.Fatalf("%s is required (%s is set) but not on PATH: %s", name, require, hint)
		}
		t.Skipf("%s not on PATH: %s", name, hint)
	}
	return path
}

// RequirePromtool is RequireTool for promtool, which make test installs
// (Debian's prometheus package, through scripts/ensure-promtool.sh) before
// it sets LLM_PROBER_REQUIRE_PROMTOOL.
func RequirePromtool(t testing.TB) string {
	t.Helper()
	return RequireTool(t, "promtool", "LLM_PROBER_REQUIRE_PROMTOOL",
		"`make test` installs Debian's prometheus package (scripts/ensure-promtool.sh), or apt-get install prometheus")
}

// alertmanagerHint says how to get Alertmanager and amtool.
const alertmanagerHint = "`make test` installs Debian's prometheus-alertmanager package (scripts/ensure-alertmanager.sh), or apt-get install prometheus-alertmanager, or put Alertmanager 0.25+'s alertmanager and amtool on PATH"

// RequireAlertmanager is RequireTool for Alertmanager: Debian's
// prometheus-alertmanager, else upstream's alertmanager. make test installs
// the former (scripts/ensure-alertmanager.sh) before it sets
// LLM_PROBER_REQUIRE_ALERTMANAGER.
func RequireAlertmanager(t testing.TB) string {
	t.Helper()
	if path, err := exec.LookPath("prometheus-alertmanager"); err == nil {
		return path
	}
	return RequireTool(t, "alertmanager", "LLM_PROBER_REQUIRE_ALERTMANAGER",
		"neither prometheus-alertmanager (Debian's name) nor alertmanager is on PATH; "+alertmanagerHint)
}

// RequireAmtool is RequireTool for amtool, which comes with Alertmanager.
func RequireAmtool(t testing.TB) string {
	t.Helper()
	return RequireTool(t, "amtool", "LLM_PROBER_REQUIRE_ALERTMANAGER", alertmanagerHint)
}
