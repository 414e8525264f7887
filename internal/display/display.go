// Package display bounds and cleans text that pages and snapshots show: a
// server's error cut to a size, an endpoint without credentials.
package display

import (
	"net/url"
	"strings"
	"unicode/utf8"
)

// MaxErrorBytes bounds an error message a page shows: a server can send
// megabytes where a line is meant.
const MaxErrorBytes = 1024

// MaxEchoBytes bounds how much of a caller's input (a /probe target,
// module or probe name; a discovered endpoint) an error repeats: enough to
// recognise it, not a caller's 500 KB back into a response or a log.
const MaxEchoBytes = 256

// Cut returns s as valid UTF-8 of at most n bytes, marked with "…" when
// shortened, in its own memory.
func Cut(s string, n int) string {
	if len(s) <= n && utf8.ValidString(s) {
		return strings.Clone(s)
	}
	const more = "…"
	if len(s) > n {
		i := n - len(more)
		for i > 0 && !utf8.RuneStart(s[i]) {
			i--
		}
		s = s[:i] + more
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// Endpoint is a target's URL or address as pages may show it: no
// userinfo (config refuses it anyway), and no query or fragment, where
// some hosted APIs take a key.
func Endpoint(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" {
		// A gRPC host:port, or something unparsable: cut at the first
		// character that could start a query or userinfo.
		if i := strings.IndexAny(raw, "?#@"); i >= 0 {
			return raw[:i] + "…"
		}
		return raw
	}
	hidden := u.RawQuery != "" || u.Fragment != "" || u.User != nil
	u.User, u.RawQuery, u.Fragment, u.ForceQuery = nil, "", "", false
	if hidden {
		return u.String() + "?…"
	}
	return u.String()
}
