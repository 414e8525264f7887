package redact

import (
	"bytes"
	"encoding/base64"
	"errors"
	"io/fs"
	"log/slog"
	"strings"
	"testing"
)

func TestString(t *testing.T) {
	basic := base64.StdEncoding.EncodeToString([]byte("prober:planted-pw-1"))
	p := New([]string{"X-Session"}, "sk-configured-123", "Basic "+basic)
	for _, c := range []struct{ in, want string }{
		{"no secret here", "no secret here"},
		{"you sent sk-configured-123!", "you sent <secret>!"},
		{"cut at sk-confi…", "cut at <secret>…"},
		{"user prober password planted-pw-1", "user prober password <secret>"},
		{`Post "http://u:pw-in-url@h:80/v1": refused`, `Post "http://u:xxxxx@h:80/v1": refused`},
		{"https://tok3n@h/", "https://xxxxx@h/"},
		{"GET https://h/v1?api_key=abc123&model=m&KEY=zz", "GET https://h/v1?api_key=<secret>&model=m&KEY=<secret>"},
		{"https://h/v1?x-session=s1&sig=aa", "https://h/v1?x-session=<secret>&sig=<secret>"},
		{"https://h/v1?monkey=1&tokens=2", "https://h/v1?monkey=1&tokens=2"},
		{"Authorization: Bearer abc.def-123", "Authorization: Bearer <secret>"},
		{"Authorization: Basic " + base64.StdEncoding.EncodeToString([]byte("a:b")), "Authorization: Basic <secret>"},
		{`{"headers":{"X-Auth-Token":"tok-1","x-api-key":"k9"}}`, `{"headers":{"X-Auth-Token":"<secret>","x-api-key":"<secret>"}}`},
		{"Basic authentication failed; Bearer token required", "Basic authentication failed; Bearer token required"},
		{"max_tokens=4 prompt_tokens: 12", "max_tokens=4 prompt_tokens: 12"},
		{"proxy http://egress:xxxxx@h", "proxy http://egress:xxxxx@h"},
		{"client_secret=abcdef&grant_type=client_credentials", "client_secret=<secret>&grant_type=client_credentials"},
	} {
		if got := p.String(c.in); got != c.want {
			t.Errorf("String(%q)\n got %q\nwant %q", c.in, got, c.want)
		}
	}
}

func TestURL(t *testing.T) {
	p := New([]string{"deployment_token"}, "sk-literal-9")
	for in, want := range map[string]string{
		"http://h:8000/v1":                       "http://h:8000/v1",
		"https://u:pw@h/v1?api-key=k&model=m":    "https://u:xxxxx@h/v1?api-key=<secret>&model=m",
		"https://h/v1?Deployment_Token=x&v=2024": "https://h/v1?Deployment_Token=<secret>&v=2024",
		"https://h/sk-literal-9/v1":              "https://h/<secret>/v1",
		"localhost:8001":                         "localhost:8001",
		"user:pw@localhost:8001":                 "xxxxx@localhost:8001",
		"user:pw@h:1/p?q@x":                      "xxxxx@h:1/p?q@x",
	} {
		if got := p.URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestErrorKeepsIs(t *testing.T) {
	p := New(nil, "sk-err-secret")
	err := p.Error(errors.Join(fs.ErrNotExist, errors.New("key sk-err-secret refused")))
	if strings.Contains(err.Error(), "sk-err-secret") || !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Error: %v (Is ErrNotExist: %v)", err, errors.Is(err, fs.ErrNotExist))
	}
	plain := errors.New("nothing")
	if p.Error(plain) != plain {
		t.Error("an error without secrets should come back as it was")
	}
}

func TestHandler(t *testing.T) {
	var buf bytes.Buffer
	l := slog.New(NewHandler(slog.NewTextHandler(&buf, nil), nil))
	l.With("url", "https://h/v1?token=t-with").WithGroup("g").Info("sent https://u:p4ss@h",
		"err", errors.New("HTTP 400: Authorization: Basic "+base64.StdEncoding.EncodeToString([]byte("rw:rw-pass-1"))),
		"n", 3, slog.Group("inner", "endpoint", "https://h/?api_key=inner-k"))
	out := buf.String()
	for _, s := range []string{"t-with", "p4ss", "rw-pass-1", base64.StdEncoding.EncodeToString([]byte("rw:rw-pass-1")), "inner-k"} {
		if strings.Contains(out, s) {
			t.Errorf("log line leaks %q: %s", s, out)
		}
	}
	if !strings.Contains(out, "g.n=3") || !strings.Contains(out, "<secret>") {
		t.Errorf("log line lost its shape: %s", out)
	}
}

// FuzzString: no input makes redaction panic, and a planted secret never
// survives, wherever it is put in the text.
func FuzzString(f *testing.F) {
	f.Add("you sent %s", "sk-planted-1")
	f.Add("Authorization: Basic %s…", "c2VjcmV0OnBhc3N3b3Jk")
	f.Add("https://u:%s@h/v1?api_key=%s", "pw-xyz")
	f.Add("%s%s%s", "aaaa")
	f.Add("cut %s", "\xff\xfe<>…")
	f.Fuzz(func(t *testing.T, text, secret string) {
		p := New([]string{"custom"}, secret)
		_ = p.URL(text)
		planted := strings.ReplaceAll(text, "%s", secret)
		got := p.String(planted)
		// A secret made of mask characters cannot be told from a mask.
		if len(secret) < MinSecretLen || strings.ContainsAny(secret, "<>") || strings.Contains(passwordMask+Mask, secret) {
			return
		}
		// Nor from text the masks themselves produce.
		if strings.Contains(Default().String(strings.ReplaceAll(text, "%s", "")), secret) {
			return
		}
		if strings.Contains(got, secret) {
			t.Errorf("secret %q survives in %q -> %q", secret, planted, got)
		}
	})
}

func TestHeaderSecret(t *testing.T) {
	for _, c := range []struct {
		name, value string
		want        bool
	}{
		{"X-Auth-Token", "abc", true},
		{"X-Api-Key", "k", true},
		{"X-Tenant", "prod", false},
		{"X-Pooled-Fault", "zero", false},
		{"Accept", "application/json", false},
		{"X-Tenant", "tn-8f3a9c21", true},
		{"X-Note", "release 2024", false},
		{"X-Any", "", false},
	} {
		if got := HeaderSecret(c.name, c.value); got != c.want {
			t.Errorf("HeaderSecret(%q, %q) = %v, want %v", c.name, c.value, got, c.want)
		}
	}
}

// BenchmarkString: the cost of one typical probe error through a target's
// policy (paid once per failed probe and per log record).
func BenchmarkString(b *testing.B) {
	p := New(nil, "sk-configured-123", "Basic "+base64.StdEncoding.EncodeToString([]byte("u:planted-pw-1")))
	msg := `HTTP 401 Unauthorized: {"error":{"message":"invalid credentials Authorization: Bearer sk-configured-123 for https://api.example/v1/chat/completions?api_key=abc","type":"auth"}}`
	b.ReportAllocs()
	for b.Loop() {
		_ = p.String(msg)
	}
}
