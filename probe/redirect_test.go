package probe

import (
	"io"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	promconfig "github.com/prometheus/common/config"
)

// TestRedirectCredentials: a followed redirect to another origin (here
// the same host on another port, which net/http treats as the same host)
// carries none of the target's credentials: not the API key, not
// http_client_config's Authorization, not any configured header, whatever
// its name. The same origin, and an origin the target trusts, get them.
func TestRedirectCredentials(t *testing.T) {
	var mu sync.Mutex
	got := map[string]http.Header{}
	answer := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			got[name] = r.Header.Clone()
			mu.Unlock()
			sseHandler(ev(chatDelta("a")), ev(chatFinish("stop")), ev("[DONE]"))(w, r)
		}
	}
	other := startServer(t, answer("other"))
	origin := startServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		switch {
		case strings.HasPrefix(r.URL.Path, "/same"):
			if r.URL.Query().Get("moved") == "" {
				http.Redirect(w, r, "/same/v1/chat/completions?moved=1", http.StatusTemporaryRedirect)
				return
			}
			answer("same")(w, r)
		default:
			http.Redirect(w, r, other.URL+"/v1/chat/completions", http.StatusTemporaryRedirect)
		}
	}))
	credentials := map[string]string{
		"Authorization": "", // set by the API key, or by basic_auth
		"X-Api-Key":     "planted-redirect-api-key",
		"X-Auth-Token":  "planted-redirect-auth-token",
		"X-Tenant":      "planted-redirect-tenant",
	}
	configure := func(trusted ...string) func(*TargetOptions) {
		return func(o *TargetOptions) {
			o.FollowRedirects = true
			o.TrustedRedirectOrigins = trusted
			o.Headers = map[string]string{}
			for k, v := range credentials {
				if v != "" {
					o.Headers[k] = v
				}
			}
		}
	}
	apiKey := func(o *TargetOptions) { o.BearerToken = "planted-redirect-bearer" }
	basic := func(o *TargetOptions) {
		o.BasicAuth = &promconfig.BasicAuth{Username: "u", Password: "planted-redirect-basic"}
	}
	for _, c := range []struct {
		name, path, at string
		trusted        []string
		auth           func(*TargetOptions)
		wantCreds      bool
	}{
		{"other port, API key", "", "other", nil, apiKey, false},
		{"other port, basic_auth", "", "other", nil, basic, false},
		{"same origin keeps them", "/same", "same", nil, apiKey, true},
		{"trusted origin keeps them", "", "other", []string{other.URL}, apiKey, true},
		{"trust of another origin does not extend", "", "other", []string{"http://127.0.0.1:1"}, basic, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			mu.Lock()
			clear(got)
			mu.Unlock()
			mod := configure(c.trusted...)
			d, _ := newDriver(t, ProtocolOpenAIChat, origin.URL+c.path, func(o *TargetOptions) { mod(o); c.auth(o) })
			r := probeOnce(t, d, streamReq(), 10*time.Second)
			if r.Outcome != OutcomeSuccess {
				t.Fatalf("outcome %s: %v", r.Outcome, r.Err)
			}
			mu.Lock()
			h := got[c.at]
			mu.Unlock()
			if h == nil {
				t.Fatalf("the redirect never reached %s", c.at)
			}
			for k := range credentials {
				if has := h.Get(k) != ""; has != c.wantCreds {
					t.Errorf("%s at the redirect's %s origin: %q (want present: %v)", k, c.at, h.Get(k), c.wantCreds)
				}
			}
			if h.Get("Content-Type") != "application/json" {
				t.Errorf("the redirected request lost its other headers: %v", h)
			}
		})
	}
}

func TestOrigin(t *testing.T) {
	for in, want := range map[string]string{
		"http://H.example/v1":     "http://h.example:80",
		"http://h.example:80/x":   "http://h.example:80",
		"https://h.example":       "https://h.example:443",
		"https://h.example:8443/": "https://h.example:8443",
		"http://[::1]:9/":         "http://::1:9",
	} {
		u, _ := url.Parse(in)
		if got := Origin(u); got != want {
			t.Errorf("Origin(%s) = %s, want %s", in, got, want)
		}
	}
}
