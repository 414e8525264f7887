package main

import (
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/internal/testutil"
	"github.com/llm-prober/llm-prober/internal/webroute"
)

var hrefRE = regexp.MustCompile(`href="([^"]+)"`)

// TestRoutePrefixLinksResolve serves the daemon as a reverse proxy sees
// it: under /prober (--web.route-prefix), and at / with /prober in the
// external URL (a proxy that strips the prefix, which the test plays).
// Every link of the status page and a probe page resolves, and metrics
// are served at --web.telemetry-path.
func TestRoutePrefixLinksResolve(t *testing.T) {
	sim := startSimulator(t)
	for _, c := range []struct {
		name                  string
		external, route       string
		strippedByProxy       bool
		telemetry, metricsURL string
	}{
		{name: "route-prefix", route: "/prober", telemetry: "/metrics", metricsURL: "/prober/metrics"},
		{name: "external-url behind a stripping proxy", external: "http://proxy.example/prober/", route: "/", strippedByProxy: true,
			telemetry: "/prometheus", metricsURL: "/prober/prometheus"},
	} {
		t.Run(c.name, func(t *testing.T) {
			paths, err := webroute.Parse(c.external, c.route, c.telemetry)
			if err != nil {
				t.Fatal(err)
			}
			cfgPath := testutil.WriteConfig(t, simConfig(sim, "a"), map[string]string{"key": "k\n"})
			addr := serveInProcess(t, serveOptions{configFile: cfgPath, paths: paths}, "", &testutil.SyncBuffer{})
			// base is what a user's browser talks to.
			base := "http://" + addr
			get := func(path string) (int, string) {
				t.Helper()
				if c.strippedByProxy {
					if !strings.HasPrefix(path, "/prober/") {
						return http.StatusNotFound, "outside the proxy's prefix: " + path
					}
					path = strings.TrimPrefix(path, "/prober")
				}
				resp, err := (&http.Client{Timeout: 10 * time.Second}).Get(base + path)
				if err != nil {
					t.Fatalf("GET %s: %v", path, err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(b)
			}
			testutil.WaitFor(t, "a probe result on the status page", 10*time.Second, func() bool {
				code, body := get("/prober/")
				return code == http.StatusOK && strings.Contains(body, "/prober/probes/sim/a")
			})
			_, index := get("/prober/")
			seen := map[string]bool{}
			pages := []string{index}
			if code, probePage := get("/prober/probes/sim/a"); code == http.StatusOK {
				pages = append(pages, probePage)
			} else {
				t.Fatalf("probe page: %d", code)
			}
			for _, page := range pages {
				for _, m := range hrefRE.FindAllStringSubmatch(page, -1) {
					link := m[1]
					if seen[link] || strings.HasPrefix(link, "http") || strings.HasPrefix(link, "#") {
						continue
					}
					seen[link] = true
					u, err := url.Parse(link)
					if err != nil || !strings.HasPrefix(u.Path, "/prober/") {
						t.Errorf("link %q is not under /prober/", link)
						continue
					}
					code, body := get(u.RequestURI())
					// /-/reload answers a GET with 405 and how to reload.
					if code != http.StatusOK && !(u.Path == "/prober/-/reload" && code == http.StatusMethodNotAllowed) {
						t.Errorf("link %s: HTTP %d: %.200s", link, code, body)
					}
				}
			}
			t.Logf("followed %d links: %v", len(seen), seen)
			if len(seen) < 7 {
				t.Errorf("only %d links on the pages", len(seen))
			}
			if !seen[c.metricsURL] {
				t.Errorf("no link to %s among %v", c.metricsURL, seen)
			}
			if code, body := get(c.metricsURL); code != http.StatusOK || !strings.Contains(body, "promhttp_metric_handler_requests_total") {
				t.Errorf("metrics at %s: %d, promhttp_metric_handler_requests_total missing", c.metricsURL, code)
			}
		})
	}
}
