package webroute

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestParse(t *testing.T) {
	for _, c := range []struct {
		ext, route, telemetry string
		want                  Paths
	}{
		{"", "", "/metrics", Paths{"", "", "/metrics"}},
		{"http://h:9847/prober/", "", "/metrics", Paths{"/prober", "/prober", "/metrics"}},
		{"https://h/a/b", "/", "/m", Paths{"", "/a/b", "/m"}},
		{"", "/prober/", "/metrics", Paths{"/prober", "/prober", "/metrics"}},
		{"http://proxy/x/", "/y", "/metrics", Paths{"/y", "/x", "/metrics"}},
	} {
		got, err := Parse(c.ext, c.route, c.telemetry)
		if err != nil || got != c.want {
			t.Errorf("Parse(%q, %q, %q) = %+v, %v; want %+v", c.ext, c.route, c.telemetry, got, err, c.want)
		}
	}
	for _, bad := range [][3]string{
		{"host/prober", "", "/metrics"},
		{"ftp://h/", "", "/metrics"},
		{"http://h/?q=1", "", "/metrics"},
		{"", "prober", "/metrics"},
		{"", "", "metrics"},
		{"", "", "/"},
		{"", "", "/-/healthy"},
		{"", "", "/probes/x"},
	} {
		if _, err := Parse(bad[0], bad[1], bad[2]); err == nil {
			t.Errorf("Parse(%q, %q, %q) accepted", bad[0], bad[1], bad[2])
		}
	}
}

func TestMount(t *testing.T) {
	inner := http.NewServeMux()
	inner.HandleFunc("/{$}", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("index")) })
	inner.HandleFunc("/metrics", func(w http.ResponseWriter, r *http.Request) { w.Write([]byte("metrics")) })
	h := Paths{Route: "/prober"}.Mount(inner)
	for path, want := range map[string]string{
		"/prober/":        "200 index",
		"/prober/metrics": "200 metrics",
		"/prober":         "302 /prober/",
		"/":               "302 /prober/",
		"/metrics":        "404 ",
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		got := rec.Result().Status[:3] + " "
		if rec.Code == http.StatusFound {
			got += rec.Header().Get("Location")
		} else if rec.Code == http.StatusOK {
			got += rec.Body.String()
		}
		if got != want {
			t.Errorf("GET %s: %q, want %q", path, got, want)
		}
	}
	if (Paths{}).Mount(inner) != http.Handler(inner) {
		t.Error("no prefix should serve the handler itself")
	}
}
