package probe

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// A redirect whose Location is not a URL is the server breaking the
// protocol, not a connection that broke: protocol_error, with or without
// follow_redirects (net/http parses Location before asking whether to
// follow), and the error says what to do. The Location itself is not
// quoted: it may carry a token in its query.
func TestHostileUnparsableLocation(t *testing.T) {
	for _, loc := range []string{"http://[::1", "http://h/%zz?token=sk-in-location", "://no-scheme"} {
		for _, follow := range []bool{false, true} {
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				_, _ = io.Copy(io.Discard, r.Body)
				w.Header()["Location"] = []string{loc}
				w.WriteHeader(http.StatusFound)
			})
			ts := startServer(t, h)
			d, _ := newDriver(t, ProtocolOpenAIChat, ts.URL, func(o *TargetOptions) { o.FollowRedirects = follow })
			r := probeOnce(t, d, streamReq(), 5*time.Second)
			wantOutcome(t, r, OutcomeProtocolError, "Location header that is not a valid URL")
			if strings.Contains(r.Err.Error(), "sk-in-location") {
				t.Errorf("error quotes the Location: %v", r.Err)
			}
		}
	}
}
