//go:build unix

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/llm-prober/llm-prober/internal/testutil"
)

// The Alertmanager test's timings. The rules' own thresholds (the 90 s
// floor of LLMProbeFailing and LLMTargetDown, every "for") are used as
// shipped; only how often Prometheus evaluates them and how long
// Alertmanager waits are shortened, as a user's faster setup would.
const (
	// amEvalInterval replaces every rule group's interval (30s and 5m
	// as shipped) and is Prometheus' evaluation_interval.
	amEvalInterval = "5s"
	// amGroupWait and amGroupInterval replace the example's 30s and 5m.
	// group_wait stays one evaluation interval, as shipped.
	amGroupWait             = "5s"
	amGroupInterval         = "10s"
	amGroupIntervalDuration = 10 * time.Second
	// amTestDeadline bounds everything after the build. A run takes
	// about 3 minutes: the 90 s floor after the kill dominates.
	amTestDeadline = 4*time.Minute + 30*time.Second
	// amTarget is the target whose server the test kills.
	amTarget = "sim-down"
)

// amProbes are amTarget's fast probes: several, so that one dead server
// raises one per-probe alert per probe, which must not reach the
// receiver. A slow one (amProberConfig) runs beside them.
var amProbes = []string{"chat", "long", "plain"}

// amProberConfig: one target, the simulator, with three probes every 2-3
// s. No SLOs: the burn-rate alerts' long windows (1h, 1d) would hold only
// the test's few seconds of history, so they would fire within seconds of
// the kill, which a 2-minute outage cannot make them do after an hour of
// history (at most 12.5% of the last hour failing); a test of them here
// would test the short history. Two %s: the simulator.
const amProberConfig = `targets:
  - name: ` + amTarget + `
    protocol: openai_chat
    url: http://%s
    model: sim-llm
    timeout: 5s
    server_metrics: {url: http://%s/metrics, kind: auto, timeout: 1s}
    probes:
      - name: chat
        workload: short
        schedule: {every: 2s}
      - name: long
        workload: short
        schedule: {every: 3s}
      - name: plain
        workload: short
        schedule: {every: 2s}
      # A slow probe beside the fast ones: after the restart the fast ones
      # succeed first, and LLMTargetDown must hold until this one has too,
      # or its LLMProbeFailing reaches the receiver as a second page once
      # the inhibition lifts.
      - name: slow
        workload: short
        schedule: {every: 20s}
workloads:
  short:
    prompts:
      inline: ["Explain in two sentences what a KV cache is."]
    max_tokens: 8
    ignore_eos: true
gpus:
  enabled: false
`

// amPrometheusConfig: 1 s scrapes, the rules (a copy with shorter group
// intervals), alerts sent to the test's Alertmanager. Four %s: the
// evaluation interval, the rules file, Alertmanager, the prober.
const amPrometheusConfig = `global:
  scrape_interval: 1s
  scrape_timeout: 1s
  evaluation_interval: %s
rule_files:
  - %s
alerting:
  alertmanagers:
    - static_configs:
        - targets: ['%s']
scrape_configs:
  - job_name: llm-prober
    static_configs:
      - targets: ['%s']
`

// TestAlertmanager is issue 26's "one dead server reaches a human as one
// notification", end to end: the simulator behind one target with several
// probes, the real prober, Debian's Prometheus with the shipped rules and
// Debian's Alertmanager with the mixin's example configuration
// (mixin/alertmanager/alertmanager.yml), its receivers pointed at a
// webhook server in the test. The test kills the simulator, asserts that
// exactly one firing notification reaches a receiver for the target, with
// LLMTargetDown in it and every probe's LLMProbeFailing inhibited, then
// restarts the simulator on the same port and asserts that a resolved
// notification arrives, and no other firing one.
func TestAlertmanager(t *testing.T) {
	if testing.Short() {
		t.Skip("end-to-end test skipped in -short mode")
	}
	// make test installs both (scripts/ensure-promtool.sh,
	// scripts/ensure-alertmanager.sh) and sets the REQUIRE variables, so
	// the test skips only when run by hand on a machine without them.
	prometheusBin := requirePrometheus(t, "the Alertmanager test")
	alertmanagerBin := testutil.RequireAlertmanager(t)
	root := testutil.RepoRoot(t)
	// Prometheus reads the rules and Alertmanager its configuration:
	// go test's cache must know of them.
	testutil.RecordInputs(t, ".yml", ".yaml")
	dir := t.TempDir()
	bin := testutil.BuildBinary(t)

	start := time.Now()
	since := func() time.Duration { return time.Since(start).Round(100 * time.Millisecond) }
	ctx, cancel := context.WithTimeout(context.Background(), amTestDeadline)
	defer cancel()

	hook := newWebhook(t)

	simAddr, proberAddr, promAddr, amAddr := testutil.FreeAddr(t), testutil.FreeAddr(t), testutil.FreeAddr(t), testutil.FreeAddr(t)
	simArgs := []string{"simulate", "--log.level=warn", "--listen", simAddr}
	// The simulator's Triton gRPC API listens on a fixed default port; the
	// test does not use it, so turn it off where the flag exists.
	if help, _ := exec.Command(bin, "simulate", "--help").CombinedOutput(); strings.Contains(string(help), "--grpc-listen") {
		simArgs = append(simArgs, "--grpc-listen=")
	}
	startSim := func() *testutil.Process {
		p := testutil.StartProcess(t, "simulate", exec.Command(bin, simArgs...))
		p.WaitHTTP(t, "http://"+simAddr+"/health")
		return p
	}
	sim := startSim()

	cfgPath := filepath.Join(dir, "llm-prober.yml")
	testutil.WriteFile(t, cfgPath, fmt.Sprintf(amProberConfig, simAddr, simAddr))
	prober := testutil.StartProcess(t, "llm-prober", exec.Command(bin,
		"--config.file="+cfgPath, "--web.listen-address="+proberAddr, "--log.level=warn"))
	prober.WaitReady(t, "http://"+proberAddr)

	amCfg := filepath.Join(dir, "alertmanager.yml")
	testutil.WriteFile(t, amCfg, testAlertmanagerConfig(t, filepath.Join(root, "mixin", "alertmanager", "alertmanager.yml"), hook.url))
	am := testutil.StartProcess(t, "alertmanager", exec.Command(alertmanagerBin,
		"--config.file="+amCfg,
		"--storage.path="+filepath.Join(dir, "alertmanager"),
		"--web.listen-address="+amAddr,
		// No high-availability cluster: no gossip port, no waiting for
		// peers before the first notification.
		"--cluster.listen-address=",
		"--log.level=warn"))
	am.WaitReady(t, "http://"+amAddr)

	rulesPath := filepath.Join(dir, "llm-prober-rules.yml")
	testutil.WriteFile(t, rulesPath, shortenRuleIntervals(t, filepath.Join(root, "alerts", "llm-prober-rules.yml"), amEvalInterval))
	promCfg := filepath.Join(dir, "prometheus.yml")
	testutil.WriteFile(t, promCfg, fmt.Sprintf(amPrometheusConfig, amEvalInterval, rulesPath, amAddr, proberAddr))
	prom := testutil.StartProcess(t, "prometheus", exec.Command(prometheusBin,
		"--config.file="+promCfg,
		"--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+promAddr,
		"--log.level=warn"))
	prom.WaitReady(t, "http://"+promAddr)
	api := &promAPI{base: "http://" + promAddr}
	amc := &amAPI{base: "http://" + amAddr}
	t.Logf("everything running after %s", since())

	// Healthy first: Prometheus sends to Alertmanager and has seen every
	// probe succeed a few times.
	poll(ctx, t, "Prometheus to discover Alertmanager", time.Second, func() (bool, string) {
		var data struct {
			Active []struct {
				URL string `json:"url"`
			} `json:"activeAlertmanagers"`
		}
		err := api.get(ctx, "/api/v1/alertmanagers", nil, &data)
		return err == nil && len(data.Active) > 0, fmt.Sprintf("%+v %v", data, err)
	})
	healthy := fmt.Sprintf(`count(llm_probe_requests_total{target=%q, outcome="success"} >= 3)`, amTarget)
	poll(ctx, t, "3 successes of every probe in Prometheus", time.Second, func() (bool, string) {
		v, err := api.value(ctx, healthy)
		return err == nil && v >= float64(len(amProbes)), fmt.Sprintf("%v probes (%v)", v, err)
	})
	if ns := hook.all(); len(ns) > 0 {
		t.Fatalf("notifications while the target was healthy:\n%s", describeNotifications(ns))
	}

	// Kill the server: a hard outage, every probe's connection refused.
	if err := sim.Cmd.Process.Kill(); err != nil {
		t.Fatalf("killing the simulator: %v", err)
	}
	if exited, _ := sim.Wait(testutil.StopTimeout); !exited {
		t.Fatalf("the simulator did not exit within %s of SIGKILL", testutil.StopTimeout)
	}
	killed := time.Now()
	t.Logf("simulator killed after %s", since())

	// The page: one firing notification for the target, LLMTargetDown in
	// it and nothing it inhibits.
	var page notification
	poll(ctx, t, "a firing notification for "+amTarget, time.Second, func() (bool, string) {
		ns := hook.firing(amTarget)
		if len(ns) == 0 {
			as, _ := api.alerts(ctx)
			return false, fmt.Sprintf("none yet; alerts in Prometheus: %v", alertNames(as))
		}
		page = ns[0]
		return true, ""
	})
	t.Logf("page %s after the kill (receiver %s): %s", page.at.Sub(killed).Round(100*time.Millisecond), page.Receiver, page.summary())
	if !slices.Contains(page.firingNames(), "LLMTargetDown") {
		t.Fatalf("the first firing notification for %s does not contain LLMTargetDown: a per-target alert did not page first, so the per-probe alerts were not inhibited:\n%s",
			amTarget, describeNotifications(hook.all()))
	}
	if names := page.firingNames(); len(names) != 1 {
		t.Errorf("the page carries %v, want LLMTargetDown alone (the rest inhibited)", names)
	}
	if page.Receiver != "page" {
		t.Errorf("LLMTargetDown went to receiver %q, want page", page.Receiver)
	}

	// Inhibited, not absent: every probe's LLMProbeFailing reaches
	// Alertmanager, which holds it back.
	var held []amAlert
	poll(ctx, t, "every probe's LLMProbeFailing suppressed in Alertmanager", time.Second, func() (bool, string) {
		as, err := amc.alerts(ctx, amTarget)
		if err != nil {
			return false, err.Error()
		}
		var failing []string
		for _, a := range as {
			if a.Labels["alertname"] == "LLMProbeFailing" && a.Status.State == "suppressed" && len(a.Status.InhibitedBy) > 0 {
				failing = append(failing, a.Labels["probe"])
			}
		}
		sort.Strings(failing)
		held = as
		// The slow probe's joins later (its streak reaches 90 s later).
		all := true
		for _, p := range amProbes {
			all = all && slices.Contains(failing, p)
		}
		return all, fmt.Sprintf("LLMProbeFailing suppressed for %v; alerts: %v", failing, amAlertNames(as))
	})
	// Anything not inhibited here (state active) also reaches the
	// receiver at the next group_interval: the count at the end fails.
	t.Logf("every probe's LLMProbeFailing inhibited after %s; the target's alerts in Alertmanager: %v", since(), amAlertNames(held))

	// The server comes back on the same port: the page resolves.
	// LLMTargetDown holds until every probe of the target has succeeded
	// again (the slow one last), so each LLMProbeFailing resolves while
	// still inhibited and none reaches the receiver on its own.
	// The slow probe's streak too, so that after the restart the fast
	// probes succeed while it still fails: LLMTargetDown must hold until
	// it has run again.
	poll(ctx, t, "the slow probe failing too", time.Second, func() (bool, string) {
		as, err := api.alerts(ctx)
		for _, a := range as {
			if a.Labels["alertname"] == "LLMProbeFailing" && a.Labels["probe"] == "slow" && a.State == "firing" {
				return true, ""
			}
		}
		return false, fmt.Sprintf("alerts in Prometheus: %v (%v)", alertNames(as), err)
	})
	startSim()
	restarted := time.Now()
	t.Logf("simulator restarted after %s", since())
	var resolved notification
	poll(ctx, t, "a resolved notification for "+amTarget, time.Second, func() (bool, string) {
		for _, n := range hook.all() {
			if n.GroupLabels["target"] == amTarget && n.Status == "resolved" {
				resolved = n
				return true, ""
			}
		}
		as, _ := api.alerts(ctx)
		return false, fmt.Sprintf("notifications so far:\n%s\nalerts in Prometheus: %v", describeNotifications(hook.all()), alertNames(as))
	})
	t.Logf("resolved %s after the restart (receiver %s): %s", resolved.at.Sub(restarted).Round(100*time.Millisecond), resolved.Receiver, resolved.summary())
	if !slices.Contains(resolved.names(), "LLMTargetDown") {
		t.Errorf("the resolved notification does not name LLMTargetDown: %s", resolved.summary())
	}

	// Watch on for one slow-probe interval and two group intervals: a
	// per-probe alert left firing after LLMTargetDown resolved would
	// arrive as a second page now.
	quiet := time.Now().Add(20*time.Second + 2*amGroupIntervalDuration)
	for time.Now().Before(quiet) && len(hook.firing(amTarget)) <= 1 {
		time.Sleep(time.Second)
	}

	// One page for one outage: no other firing notification for the
	// target, on any receiver, before or after recovery.
	if fs := hook.firing(amTarget); len(fs) != 1 {
		t.Errorf("%d firing notifications for %s, want exactly 1:\n%s", len(fs), amTarget, describeNotifications(hook.all()))
	}
	t.Logf("done after %s: %d notifications in all", since(), len(hook.all()))
}

// testAlertmanagerConfig is the example configuration at path with only
// its timings and receivers changed: group_wait and group_interval,
// wherever set, shortened; every receiver's webhook pointed at
// hookURL/<receiver name>. Anything else (routes, matchers, inhibit
// rules) is the shipped file's.
func testAlertmanagerConfig(t *testing.T, path, hookURL string) string {
	t.Helper()
	doc := readYAML(t, path)
	var timings int
	walkMappings(doc, func(m *yaml.Node) {
		for i := 0; i+1 < len(m.Content); i += 2 {
			switch m.Content[i].Value {
			case "group_wait":
				m.Content[i+1].Value = amGroupWait
				timings++
			case "group_interval":
				m.Content[i+1].Value = amGroupInterval
				timings++
			}
		}
	})
	if timings == 0 {
		t.Fatalf("%s sets no group_wait or group_interval", path)
	}
	receivers := mappingValue(doc.Content[0], "receivers")
	if receivers == nil || receivers.Kind != yaml.SequenceNode || len(receivers.Content) == 0 {
		t.Fatalf("%s has no receivers", path)
	}
	for _, r := range receivers.Content {
		name := mappingValue(r, "name")
		hooks := mappingValue(r, "webhook_configs")
		if name == nil || hooks == nil || hooks.Kind != yaml.SequenceNode || len(hooks.Content) == 0 {
			t.Fatalf("%s: every receiver of the example must be a webhook_configs one for the test to point it at its webhook", path)
		}
		for _, h := range hooks.Content {
			u := mappingValue(h, "url")
			if u == nil {
				t.Fatalf("%s: receiver %s has a webhook without url", path, name.Value)
			}
			u.Value = hookURL + "/" + url.PathEscape(name.Value)
		}
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

// shortenRuleIntervals is the rules file at path with every group's
// interval set to interval; expressions, "for" and labels untouched.
func shortenRuleIntervals(t *testing.T, path, interval string) string {
	t.Helper()
	doc := readYAML(t, path)
	groups := mappingValue(doc.Content[0], "groups")
	if groups == nil || groups.Kind != yaml.SequenceNode {
		t.Fatalf("%s has no groups", path)
	}
	for _, g := range groups.Content {
		if iv := mappingValue(g, "interval"); iv != nil {
			iv.Value = interval
		}
	}
	out, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return string(out)
}

func readYAML(t *testing.T, path string) *yaml.Node {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 || doc.Content[0].Kind != yaml.MappingNode {
		t.Fatalf("%s: not a YAML mapping", path)
	}
	return &doc
}

// mappingValue is the value of key in mapping node m, nil when m is not a
// mapping or has no such key.
func mappingValue(m *yaml.Node, key string) *yaml.Node {
	if m.Kind != yaml.MappingNode {
		return nil
	}
	for i := 0; i+1 < len(m.Content); i += 2 {
		if m.Content[i].Value == key {
			return m.Content[i+1]
		}
	}
	return nil
}

// walkMappings calls f with every mapping node under n.
func walkMappings(n *yaml.Node, f func(*yaml.Node)) {
	if n.Kind == yaml.MappingNode {
		f(n)
	}
	for _, c := range n.Content {
		walkMappings(c, f)
	}
}

// --- the webhook receiver ---------------------------------------------------

// notification is one webhook call of Alertmanager (its payload version
// 4), with when it arrived.
type notification struct {
	Receiver    string            `json:"receiver"`
	Status      string            `json:"status"` // firing while any alert in it fires
	GroupLabels map[string]string `json:"groupLabels"`
	Alerts      []struct {
		Status string            `json:"status"`
		Labels map[string]string `json:"labels"`
	} `json:"alerts"`
	at time.Time
}

func (n notification) names() []string {
	var out []string
	for _, a := range n.Alerts {
		out = append(out, a.Labels["alertname"])
	}
	return out
}

func (n notification) firingNames() []string {
	var out []string
	for _, a := range n.Alerts {
		if a.Status == "firing" {
			out = append(out, a.Labels["alertname"])
		}
	}
	return out
}

func (n notification) summary() string {
	var as []string
	for _, a := range n.Alerts {
		s := a.Labels["alertname"]
		if p := a.Labels["probe"]; p != "" {
			s += "/" + p
		}
		if slo := a.Labels["slo"]; slo != "" {
			s += "/" + slo
		}
		as = append(as, s+" "+a.Status)
	}
	return fmt.Sprintf("%s to %s for %v: %s", n.Status, n.Receiver, n.GroupLabels, strings.Join(as, ", "))
}

func describeNotifications(ns []notification) string {
	if len(ns) == 0 {
		return "  (none)"
	}
	var b strings.Builder
	for i, n := range ns {
		fmt.Fprintf(&b, "  %d. %s %s\n", i+1, n.at.Format("15:04:05.0"), n.summary())
	}
	return b.String()
}

// webhook records every notification Alertmanager sends it.
type webhook struct {
	url string
	mu  sync.Mutex
	got []notification
}

func newWebhook(t *testing.T) *webhook {
	w := &webhook{}
	srv := httptest.NewServer(http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		var n notification
		if err := json.NewDecoder(r.Body).Decode(&n); err != nil {
			t.Errorf("webhook %s: undecodable notification: %v", r.URL.Path, err)
			http.Error(rw, err.Error(), http.StatusBadRequest)
			return
		}
		n.at = time.Now()
		if want := "/" + n.Receiver; r.URL.Path != want {
			t.Errorf("notification for receiver %s arrived at %s, want %s", n.Receiver, r.URL.Path, want)
		}
		w.mu.Lock()
		w.got = append(w.got, n)
		w.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	w.url = srv.URL
	return w
}

func (w *webhook) all() []notification {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.got)
}

// firing are the notifications for target with an alert firing.
func (w *webhook) firing(target string) []notification {
	var out []notification
	for _, n := range w.all() {
		if n.GroupLabels["target"] == target && n.Status == "firing" {
			out = append(out, n)
		}
	}
	return out
}

// --- Alertmanager's API -------------------------------------------------------

type amAPI struct{ base string }

type amAlert struct {
	Labels map[string]string `json:"labels"`
	Status struct {
		State       string   `json:"state"` // active, suppressed or unprocessed
		InhibitedBy []string `json:"inhibitedBy"`
	} `json:"status"`
}

// alerts are the alerts Alertmanager holds for target, inhibited ones
// included.
func (a *amAPI) alerts(ctx context.Context, target string) ([]amAlert, error) {
	q := url.Values{"filter": {fmt.Sprintf("target=%q", target)}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, a.base+"/api/v2/alerts?"+q.Encode(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /api/v2/alerts: HTTP %d", resp.StatusCode)
	}
	var as []amAlert
	return as, json.NewDecoder(resp.Body).Decode(&as)
}

func amAlertNames(as []amAlert) []string {
	var names []string
	for _, a := range as {
		names = append(names, a.Labels["alertname"]+"/"+a.Labels["probe"]+"/"+a.Status.State)
	}
	sort.Strings(names)
	return names
}
