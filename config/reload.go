package config

import (
	"context"
	"fmt"
	"net/http"
	"os"
)

// ReloadOn reloads the configuration at every value of signals (SIGHUP)
// until ctx ends. Errors are logged and counted by Reload itself.
func (sc *SafeConfig) ReloadOn(ctx context.Context, signals <-chan os.Signal) {
	for {
		select {
		case <-signals:
			_ = sc.Reload()
		case <-ctx.Done():
			return
		}
	}
}

// ReloadHandler serves /-/reload: POST (or PUT) reloads, as Prometheus'
// does; disabled answers 403 and points at SIGHUP
// (--web.disable-reload).
func (sc *SafeConfig) ReloadHandler(disabled bool) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if r.Method != http.MethodPost && r.Method != http.MethodPut {
			w.Header().Set("Allow", "POST, PUT")
			w.WriteHeader(http.StatusMethodNotAllowed)
			fmt.Fprintln(w, "This endpoint requires a POST request.")
			return
		}
		if disabled {
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprintln(w, "Reloading over HTTP is disabled by --web.disable-reload; send SIGHUP instead.")
			return
		}
		if err := sc.Reload(); err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, "failed to reload config, keeping the running one:\n%v\n", err)
			return
		}
		fmt.Fprintln(w, "Config reloaded")
	})
}

// ReadyHandler serves /-/ready: 200 once a valid configuration is loaded,
// 503 before.
func (sc *SafeConfig) ReadyHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if sc.Get() == nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "Not ready: no valid configuration loaded yet")
			return
		}
		fmt.Fprintln(w, "Ready")
	})
}

// ConfigHandler serves /config: the running configuration with defaults
// filled in and secrets shown as <secret> (Marshal).
func (sc *SafeConfig) ConfigHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		cfg := sc.Get()
		if cfg == nil {
			w.WriteHeader(http.StatusServiceUnavailable)
			fmt.Fprintln(w, "no configuration loaded")
			return
		}
		b, err := cfg.Marshal()
		if err != nil {
			w.WriteHeader(http.StatusInternalServerError)
			fmt.Fprintf(w, "cannot render config: %v\n", err)
			return
		}
		_, _ = w.Write(b)
	})
}
