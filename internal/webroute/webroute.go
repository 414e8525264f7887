// Package webroute places the daemon's HTTP endpoints under a path prefix,
// with the meaning Prometheus and Alertmanager give --web.external-url and
// --web.route-prefix: the external URL is where users reach the daemon
// (links on its pages start with its path), the route prefix is where the
// daemon serves (by default the external URL's path). Behind a proxy that
// strips /prober, external URL http://host/prober/ with route prefix /
// serves at / and links to /prober/…; behind one that does not, the route
// prefix follows the external path.
package webroute

import (
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/alecthomas/kingpin/v2"
)

// Paths are where the daemon serves and what its links start with.
type Paths struct {
	// Route is the serving prefix without a trailing slash ("" for the
	// root).
	Route string
	// External is the path links start with, without a trailing slash.
	External string
	// Telemetry is where /metrics is served, under Route.
	Telemetry string
}

// Parse checks the three flags. externalURL may be empty (links then
// follow the route prefix); routePrefix empty means the external URL's
// path.
func Parse(externalURL, routePrefix, telemetryPath string) (Paths, error) {
	var p Paths
	if externalURL != "" {
		u, err := url.Parse(externalURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return p, fmt.Errorf("--web.external-url %q: want an absolute http(s) URL such as https://example.com/prober/", externalURL)
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return p, fmt.Errorf("--web.external-url %q: must not have a query or fragment", externalURL)
		}
		p.External = cleanPrefix(u.Path)
	}
	if routePrefix == "" {
		p.Route = p.External
	} else {
		if !strings.HasPrefix(routePrefix, "/") {
			return p, fmt.Errorf("--web.route-prefix %q: must start with /", routePrefix)
		}
		p.Route = cleanPrefix(routePrefix)
		if externalURL == "" {
			p.External = p.Route
		}
	}
	if !strings.HasPrefix(telemetryPath, "/") || strings.ContainsAny(telemetryPath, "?#") {
		return p, fmt.Errorf("--web.telemetry-path %q: must be a path starting with /", telemetryPath)
	}
	if telemetryPath == "/" || strings.HasPrefix(telemetryPath, "/-/") || strings.HasPrefix(telemetryPath, "/probes/") {
		return p, fmt.Errorf("--web.telemetry-path %q: taken by the status page or the /-/ endpoints", telemetryPath)
	}
	p.Telemetry = telemetryPath
	return p, nil
}

func cleanPrefix(s string) string {
	s = "/" + strings.Trim(s, "/")
	if s == "/" {
		return ""
	}
	return s
}

// AddFlags adds --web.external-url, --web.route-prefix and
// --web.telemetry-path to cmd, as exporter-toolkit's kingpinflag adds the
// listener flags; the function returned parses them once the command line
// is parsed.
func AddFlags(cmd *kingpin.CmdClause) func() (Paths, error) {
	external := cmd.Flag("web.external-url", "The URL under which llm-prober is externally reachable (for example, behind a reverse proxy); its path prefixes every link, and the route prefix by default.").String()
	route := cmd.Flag("web.route-prefix", "Prefix for the internal routes of web endpoints. Defaults to the path of --web.external-url.").String()
	telemetry := cmd.Flag("web.telemetry-path", "Path under which to expose metrics.").Default("/metrics").String()
	return func() (Paths, error) { return Parse(*external, *route, *telemetry) }
}

// Link is the address users follow to path (which starts with /).
func (p Paths) Link(path string) string { return p.External + path }

// Mount serves h, whose routes start at /, under Route. Below the prefix
// nothing is served but a redirect from / to it, as Prometheus does.
func (p Paths) Mount(h http.Handler) http.Handler {
	if p.Route == "" {
		return h
	}
	mux := http.NewServeMux()
	mux.Handle(p.Route+"/", http.StripPrefix(p.Route, h))
	mux.Handle(p.Route, http.RedirectHandler(p.Route+"/", http.StatusFound))
	mux.Handle("/{$}", http.RedirectHandler(p.Route+"/", http.StatusFound))
	return mux
}
