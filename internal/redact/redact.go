// Package redact is the one place that decides what is secret in what the
// prober writes: logs, pages, printed configuration, bench reports and
// errors quoted from servers. Every output goes through a Policy.
//
// A Policy removes, from any text:
//   - the configured secrets it was given (API keys, passwords, bearer
//     tokens, OAuth2 client secrets and tokens, every configured header
//     value, remote-write credentials), in every form a server may echo
//     them (CredentialParts), including a prefix left before "…" when a
//     length bound cut one short;
//   - the password of a URL's userinfo (and a userinfo without password,
//     which is a token by itself);
//   - the values of query parameters named as secret: DefaultQueryParams
//     and those the configuration adds (secret_query_params);
//   - credentials after an auth scheme (Basic, Bearer, Token) and the
//     values of credential headers (Authorization, X-Api-Key, Cookie, …)
//     quoted in a server's error body.
//
// Redaction replaces each with Mask (xxxxx for a URL's password, as
// net/url does); it never drops the surrounding text, so an error still
// says what went wrong.
package redact

import (
	"cmp"
	"encoding/base64"
	"errors"
	"net/url"
	"regexp"
	"slices"
	"strings"
	"sync"
	"unicode/utf8"
)

// Mask replaces a secret in text.
const Mask = "<secret>"

// passwordMask replaces a URL's password, as url.URL.Redacted does.
const passwordMask = "xxxxx"

// MinSecretLen is the shortest configured secret redacted literally:
// shorter strings would mask unrelated text and protect nothing. It is
// also the shortest prefix of a secret redacted before a "…".
const MinSecretLen = 4

// DefaultQueryParams are the query parameters whose values are secret
// without configuration: the names hosted APIs and signed URLs use for
// keys, tokens and signatures. Matched case-insensitively.
func DefaultQueryParams() []string {
	return []string{
		"api_key", "api-key", "apikey", "key", "x-api-key",
		"token", "access_token", "refresh_token", "id_token", "auth", "auth_token",
		"authorization", "bearer", "jwt", "session", "sessionid", "session_id",
		"password", "passwd", "pwd", "secret", "client_secret",
		"sig", "signature", "code",
		"x-amz-signature", "x-amz-credential", "x-amz-security-token",
		"x-goog-signature", "x-goog-credential",
	}
}

// credentialHeaders are header (or form and JSON) names whose echoed
// value is masked in text wherever it appears as "name: value" or
// "name=value".
const credentialHeaders = `authorization|proxy-authorization|x-api-key|api-key|api_key|apikey|x-auth-token|x-goog-api-key|` +
	`cookie|set-cookie|access_token|refresh_token|client_secret|password|passwd`

var (
	// userinfoRE: scheme://userinfo@ in text.
	userinfoRE = regexp.MustCompile(`([A-Za-z][A-Za-z0-9+.-]*://)([^/?#@\s"'<>]+)@`)
	// schemeRE: an auth scheme and its credential.
	schemeRE = regexp.MustCompile(`(?i)\b(basic|bearer|token)([ \t]+)([A-Za-z0-9._~+/=-]+)`)
	// headerRE: a credential header quoted with its value, in
	// "Name: value", "name=value" or JSON "name":"value" form.
	headerRE = regexp.MustCompile(`(?i)(^|[^A-Za-z0-9_-])(` + credentialHeaders + `)("?[ \t]*[:=][ \t]*"?)([^\s"',;&<>]+)`)
)

// Policy decides what is secret. Its zero value is not usable; build one
// with New. A Policy is immutable, so safe for concurrent use.
type Policy struct {
	secrets      []string // longest first
	secretParams map[string]bool
}

// defaultPolicy is New(nil): built once, never changed.
var defaultPolicy = sync.OnceValue(func() *Policy { return New(nil) })

// Default is the policy without configured secrets or parameters: the
// patterns and DefaultQueryParams only.
func Default() *Policy { return defaultPolicy() }

// New is a policy that masks the secrets (each expanded by
// CredentialParts) and the values of queryParams besides
// DefaultQueryParams.
func New(queryParams []string, secrets ...string) *Policy {
	p := &Policy{secretParams: map[string]bool{}}
	for _, n := range append(DefaultQueryParams(), queryParams...) {
		if n = strings.ToLower(strings.TrimSpace(n)); n != "" {
			p.secretParams[n] = true
		}
	}
	return p.with(secrets)
}

// With is p with more secrets (each expanded by CredentialParts).
func (p *Policy) With(secrets ...string) *Policy {
	if len(secrets) == 0 {
		return p
	}
	return p.with(secrets)
}

func (p *Policy) with(secrets []string) *Policy {
	out := &Policy{secretParams: p.secretParams, secrets: slices.Clone(p.secrets)}
	for _, s := range secrets {
		for _, part := range CredentialParts(s) {
			if len(part) >= MinSecretLen && !slices.Contains(out.secrets, part) {
				out.secrets = append(out.secrets, part)
			}
		}
	}
	// Longest first: a secret containing another is masked whole.
	slices.SortStableFunc(out.secrets, func(a, b string) int { return cmp.Compare(len(b), len(a)) })
	return out
}

// SecretParam reports whether a query parameter's value is secret.
func (p *Policy) SecretParam(name string) bool { return p.secretParams[strings.ToLower(name)] }

// CredentialParts returns the strings to redact for one credential value:
// the value itself, its credential after an auth scheme ("Basic x",
// "Bearer x"), and for Basic the decoded user:password and the password,
// so a server that echoes a header in any of these forms does not leak it.
func CredentialParts(value string) []string {
	out := []string{value}
	scheme, cred, ok := strings.Cut(strings.TrimSpace(value), " ")
	if !ok {
		return out
	}
	cred = strings.TrimSpace(cred)
	if len(cred) >= MinSecretLen {
		out = append(out, cred)
	}
	if strings.EqualFold(scheme, "Basic") {
		if dec, err := base64.StdEncoding.DecodeString(cred); err == nil && utf8.Valid(dec) {
			if _, pw, ok := strings.Cut(string(dec), ":"); ok && len(pw) >= MinSecretLen {
				out = append(out, string(dec), pw)
			}
		}
	}
	return out
}

// SensitiveHeader guesses whether a header name carries a credential
// (Authorization, X-Api-Key, Cookie, X-Auth-Token, …).
func SensitiveHeader(name string) bool {
	n := strings.ToLower(name)
	for _, s := range []string{"auth", "key", "token", "secret", "cookie", "password", "signature"} {
		if strings.Contains(n, s) {
			return true
		}
	}
	return false
}

// HeaderSecret reports whether a configured header's value is masked in
// free text (errors, logs): always for a header named like a credential,
// otherwise when the value looks like a token (8 characters or more, a
// digit among them, no space). A plain value such as "prod" or "zero"
// would otherwise mask every occurrence of that word in every error.
// Outputs that show the configuration mask every header value, and a
// redirect to another origin drops every configured header, whatever
// this says.
func HeaderSecret(name, value string) bool {
	if value == "" {
		return false
	}
	if SensitiveHeader(name) {
		return true
	}
	return len(value) >= 8 && strings.ContainsAny(value, "0123456789") && !strings.ContainsAny(value, " \t")
}

// String is s with every secret the policy knows masked.
func (p *Policy) String(s string) string {
	if s == "" {
		return s
	}
	s = p.literal(s)
	// Cheap checks first: most text has no URL, header or scheme in it,
	// and the patterns cost far more than a scan.
	if strings.Contains(s, "@") {
		s = userinfoRE.ReplaceAllStringFunc(s, maskUserinfo)
	}
	if strings.Contains(s, "=") {
		s = p.maskParams(s)
	}
	lower := strings.ToLower(s)
	if containsAny(lower, "auth", "key", "token", "cookie", "secret", "passw") {
		s = headerRE.ReplaceAllStringFunc(s, maskHeader)
	}
	if containsAny(lower, "basic", "bearer", "token") {
		s = schemeRE.ReplaceAllStringFunc(s, maskScheme)
	}
	return s
}

func containsAny(s string, subs ...string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// maskParams masks the value of every secret query parameter: a name after
// '?', '&' or ';', then '=', then the value up to the next separator.
func (p *Policy) maskParams(s string) string {
	var b strings.Builder
	last := 0
	for i := 0; i < len(s); i++ {
		if c := s[i]; c != '?' && c != '&' && c != ';' {
			continue
		}
		eq := strings.IndexByte(s[i+1:], '=')
		if eq <= 0 {
			continue
		}
		name := s[i+1 : i+1+eq]
		if strings.ContainsAny(name, "?&;#= \t\n\"'<>") || !p.secretParams[strings.ToLower(name)] {
			continue
		}
		start := i + 1 + eq + 1
		end := start
		for end < len(s) && !strings.ContainsRune("&#;\"'<> \t\r\n", rune(s[end])) {
			end++
		}
		if end == start || s[start:end] == Mask {
			continue
		}
		b.WriteString(s[last:start])
		b.WriteString(Mask)
		last = end
		i = end - 1
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// literal masks the configured secrets, and a prefix of one that a length
// bound cut short right before "…".
func (p *Policy) literal(msg string) string {
	for _, s := range p.secrets {
		msg = strings.ReplaceAll(msg, s, Mask)
	}
	if len(p.secrets) == 0 || !strings.Contains(msg, "…") {
		return msg
	}
	var b strings.Builder
	rest := msg
	for {
		i := strings.Index(rest, "…")
		if i < 0 {
			b.WriteString(rest)
			return b.String()
		}
		head := rest[:i]
		for _, s := range p.secrets {
			for n := min(len(s)-1, len(head)); n >= MinSecretLen; n-- {
				if strings.HasSuffix(head, s[:n]) {
					head = head[:len(head)-n] + Mask
					break
				}
			}
		}
		b.WriteString(head)
		b.WriteString("…")
		rest = rest[i+len("…"):]
	}
}

func maskUserinfo(m string) string {
	sm := userinfoRE.FindStringSubmatch(m)
	scheme, info := sm[1], sm[2]
	if user, _, ok := strings.Cut(info, ":"); ok {
		return scheme + user + ":" + passwordMask + "@"
	}
	if info == passwordMask || info == Mask {
		return m
	}
	// A userinfo without a password is a token by itself.
	return scheme + passwordMask + "@"
}

func maskHeader(m string) string {
	sm := headerRE.FindStringSubmatch(m)
	lead, name, sep, value := sm[1], sm[2], sm[3], sm[4]
	switch strings.ToLower(value) {
	case "basic", "bearer", "token", strings.ToLower(Mask):
		// The scheme's credential follows; schemeRE masks it.
		return m
	}
	if strings.HasPrefix(value, Mask) || value == passwordMask {
		return m
	}
	return lead + name + sep + Mask
}

func maskScheme(m string) string {
	sm := schemeRE.FindStringSubmatch(m)
	scheme, space, cred := sm[1], sm[2], sm[3]
	if !looksLikeCredential(scheme, cred) {
		return m
	}
	return scheme + space + Mask
}

// looksLikeCredential keeps prose ("Basic authentication failed",
// "Bearer token required") readable: a Basic credential decodes to
// user:password; a bearer token has 8 characters or more, not all
// letters.
func looksLikeCredential(scheme, cred string) bool {
	if strings.EqualFold(scheme, "basic") {
		dec, err := base64.StdEncoding.DecodeString(cred)
		if err != nil {
			dec, err = base64.RawStdEncoding.DecodeString(strings.TrimRight(cred, "="))
		}
		return err == nil && strings.Contains(string(dec), ":")
	}
	if len(cred) < 8 {
		return false
	}
	return strings.IndexFunc(cred, func(r rune) bool {
		return (r < 'a' || r > 'z') && (r < 'A' || r > 'Z')
	}) >= 0
}

// URL is raw as outputs may show it: the userinfo's password as xxxxx
// (a userinfo without one as xxxxx), the values of secret query
// parameters and any configured secret masked. Text that does not parse
// as a URL (a gRPC host:port) goes through String.
func (p *Policy) URL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || u.Host == "" {
		// A gRPC address may still carry user:password@ before its host.
		end := len(raw)
		if i := strings.IndexAny(raw, "/?#"); i >= 0 {
			end = i
		}
		if i := strings.LastIndex(raw[:end], "@"); i >= 0 && !strings.Contains(raw, "://") {
			raw = passwordMask + raw[i:]
		}
		return p.String(raw)
	}
	if u.User != nil {
		if _, ok := u.User.Password(); ok {
			u.User = url.UserPassword(u.User.Username(), passwordMask)
		} else {
			u.User = url.User(passwordMask)
		}
	}
	if u.RawQuery != "" {
		parts := strings.Split(u.RawQuery, "&")
		for i, kv := range parts {
			k, _, ok := strings.Cut(kv, "=")
			name, err := url.QueryUnescape(k)
			if err != nil {
				name = k
			}
			if ok && p.SecretParam(name) {
				parts[i] = k + "=" + Mask
			}
		}
		u.RawQuery = strings.Join(parts, "&")
	}
	return p.literal(u.String())
}

// Error is err with its message redacted. When something was masked,
// the result no longer unwraps to err (whose message holds the secret)
// but still answers errors.Is and errors.As for it.
func (p *Policy) Error(err error) error {
	if err == nil {
		return nil
	}
	msg := err.Error()
	red := p.String(msg)
	if red == msg {
		return err
	}
	return &Redacted{msg: red, orig: err}
}

// Redacted is an error whose message had secrets masked.
type Redacted struct {
	msg  string
	orig error
}

func (e *Redacted) Error() string { return e.msg }

// Is answers for the original error, so that callers classifying by
// sentinel still can. There is deliberately no Unwrap or As: they would
// hand out the original, whose message holds the secret.
func (e *Redacted) Is(target error) bool { return errors.Is(e.orig, target) }
