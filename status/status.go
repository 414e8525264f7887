// Package status renders the prober's status pages: "/" with every target
// and probe, the model servers' and GPUs' state, and "/probes/{target}/{probe}"
// with a probe's recent results and the debug log of its failures. Pages
// are rendered on the server with html/template (which escapes everything a
// server may have sent back) and need no JavaScript.
package status

import (
	"bytes"
	"embed"
	"html/template"
	"log/slog"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/llm-prober/llm-prober/collector"
	"github.com/llm-prober/llm-prober/config"
)

//go:embed templates/*.html
var templateFS embed.FS

// DefaultStaleAfter is how old the model servers' and GPUs' last
// collection may be before a page load collects them itself. Prometheus
// scraping the prober keeps them fresher than that, and then the page
// never scrapes a server.
const DefaultStaleAfter = 60 * time.Second

// ServerSource gives the model servers' last scrape; *collector.ServerMetrics.
type ServerSource interface {
	Snapshot() []collector.ServerSnapshot
	Refresh()
}

// GPUSource gives the last NVML collection; *collector.GPUCollector.
type GPUSource interface {
	Snapshot() collector.GPUSnapshot
	Refresh()
}

// Link is one link of the page's header.
type Link struct {
	Address, Text, Description string
}

// DaemonLinks are the header links of the daemon's pages: metrics (at
// telemetry), configuration, health, readiness and reload, each address
// made by link (which adds the external path).
func DaemonLinks(link func(path string) string, telemetry string) []Link {
	return []Link{
		{Address: link(telemetry), Text: "Metrics", Description: "probe results, server and GPU metrics, and the prober's own"},
		{Address: link("/config"), Text: "Configuration", Description: "the running configuration, secrets hidden"},
		{Address: link("/-/healthy"), Text: "Health", Description: "200 while the process runs"},
		{Address: link("/-/ready"), Text: "Readiness", Description: "200 once a valid configuration is loaded"},
		{Address: link("/-/reload"), Text: "Reload info", Description: "POST reloads the configuration (so does SIGHUP); a GET says how"},
	}
}

// Options configures a Handler. Config is required; the others may be nil.
type Options struct {
	// Config returns the running configuration (nil before the first
	// successful load).
	Config func() *config.Config
	// History holds the recent results; nil when disabled.
	History *History
	Servers ServerSource
	GPUs    GPUSource
	// Version and BuildContext are shown in the footer.
	Version, BuildContext string
	// Links are shown in the header as given: their addresses must carry
	// Root already.
	Links []Link
	// Root is the path every link of the pages starts with: the path of
	// --web.external-url, without a trailing slash ("" at the root).
	Root string
	// StaleAfter: see DefaultStaleAfter; 0 means that, negative never
	// collects from the page.
	StaleAfter time.Duration
	// Now is the clock; nil means time.Now.
	Now    func() time.Time
	Logger *slog.Logger
}

// Handler serves the status pages.
type Handler struct {
	opts                  Options
	index, probe, missing *template.Template
	// refreshMu lets one page load at a time collect stale server and GPU
	// state; the others wait for it and then find it fresh.
	refreshMu sync.Mutex
	bufs      sync.Pool
}

// New parses the templates.
func New(opts Options) (*Handler, error) {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.StaleAfter == 0 {
		opts.StaleAfter = DefaultStaleAfter
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	h := &Handler{opts: opts, bufs: sync.Pool{New: func() any { return new(bytes.Buffer) }}}
	parse := func(page string) (*template.Template, error) {
		return template.New(page).ParseFS(templateFS, "templates/layout.html", "templates/charts.html", "templates/"+page)
	}
	var err error
	if h.index, err = parse("index.html"); err != nil {
		return nil, err
	}
	if h.probe, err = parse("probe.html"); err != nil {
		return nil, err
	}
	if h.missing, err = parse("notfound.html"); err != nil {
		return nil, err
	}
	return h, nil
}

// Register adds the pages to mux: "/" exactly, the probe pages, and a 404
// page for every other path mux does not serve.
func (h *Handler) Register(mux *http.ServeMux) {
	mux.HandleFunc("GET /{$}", h.ServeIndex)
	mux.HandleFunc("GET /probes/{target}/{probe}", h.ServeProbe)
	mux.HandleFunc("/", h.ServeNotFound)
}

// ProbePath is the address of a probe's page.
func ProbePath(target, probeName string) string {
	return "/probes/" + url.PathEscape(target) + "/" + url.PathEscape(probeName)
}

// ServeIndex serves "/".
func (h *Handler) ServeIndex(w http.ResponseWriter, _ *http.Request) {
	h.render(w, http.StatusOK, h.index, h.indexView(h.opts.Config(), h.refresh()))
}

// ServeProbe serves "/probes/{target}/{probe}".
func (h *Handler) ServeProbe(w http.ResponseWriter, r *http.Request) {
	v, ok := h.probeView(h.opts.Config(), r.PathValue("target"), r.PathValue("probe"), r.URL.Query().Get("result"))
	if !ok {
		h.notFound(w, "No probe "+r.PathValue("probe")+" on target "+r.PathValue("target")+" in the running configuration.")
		return
	}
	h.render(w, http.StatusOK, h.probe, v)
}

// ServeNotFound answers 404 for every path no other handler serves.
func (h *Handler) ServeNotFound(w http.ResponseWriter, r *http.Request) {
	h.notFound(w, "Nothing is served at "+r.URL.Path+".")
}

func (h *Handler) notFound(w http.ResponseWriter, msg string) {
	h.render(w, http.StatusNotFound, h.missing, notFoundView{page: h.page("Not found"), Message: msg})
}

func (h *Handler) render(w http.ResponseWriter, code int, t *template.Template, data any) {
	buf := h.bufs.Get().(*bytes.Buffer)
	buf.Reset()
	defer h.bufs.Put(buf)
	// Rendered whole before anything is sent, so a template error is a
	// clean 500 rather than half a page.
	if err := t.ExecuteTemplate(buf, "page", data); err != nil {
		h.opts.Logger.Error("Cannot render the status page", "err", err)
		http.Error(w, "cannot render the page; see the prober's log", http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	// The pages need no script, style sheet or image from anywhere: refuse
	// them all, so text a server sent back can never become active even
	// if escaping were ever wrong.
	w.Header().Set("Content-Security-Policy", "default-src 'none'; style-src 'unsafe-inline'; img-src data:; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	_, _ = w.Write(buf.Bytes())
}

// state is the servers' and GPUs' state a page shows.
type state struct {
	servers []collector.ServerSnapshot
	gpu     *collector.GPUSnapshot
}

// refresh returns the servers' and GPUs' last state, first collecting it
// when it is older than StaleAfter (nothing scrapes the prober), bounded by
// the collectors' own timeouts.
func (h *Handler) refresh() state {
	var s state
	if h.opts.Servers == nil && h.opts.GPUs == nil {
		return s
	}
	h.refreshMu.Lock()
	defer h.refreshMu.Unlock()
	now := h.opts.Now()
	stale := func(at time.Time) bool {
		return h.opts.StaleAfter > 0 && (at.IsZero() || now.Sub(at) > h.opts.StaleAfter)
	}
	if h.opts.Servers != nil {
		s.servers = h.opts.Servers.Snapshot()
		for _, sv := range s.servers {
			if stale(sv.CollectedAt) {
				h.opts.Servers.Refresh()
				s.servers = h.opts.Servers.Snapshot()
				break
			}
		}
	}
	if h.opts.GPUs != nil {
		g := h.opts.GPUs.Snapshot()
		if g.Loaded && stale(g.CollectedAt) {
			h.opts.GPUs.Refresh()
			g = h.opts.GPUs.Snapshot()
		}
		s.gpu = &g
	}
	return s
}
