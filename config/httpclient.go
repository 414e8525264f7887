package config

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"net/http"
	"net/url"
	"reflect"
	"slices"
	"strings"

	promconfig "github.com/prometheus/common/config"

	"github.com/llm-prober/llm-prober/internal/redact"
	"github.com/llm-prober/llm-prober/probe"
)

// This file is a target's http_client_config: Prometheus' HTTP client
// settings (prometheus/common's HTTPClientConfig, as blackbox_exporter's
// modules have them) for proxies, authentication and TLS, with the
// prober's own defaults and the rules that keep it consistent with the
// target's short forms (api_key_file, tls_config, follow_redirects).

// oauth2JWTBearer is the RFC 7523 grant type prometheus/common supports
// beside client_credentials.
const oauth2JWTBearer = "urn:ietf:params:oauth:grant-type:jwt-bearer"

var (
	// structPresets are the defaults of library structs that the walker
	// decodes key by key, so their own UnmarshalYAML (which would set
	// Prometheus' defaults) never runs.
	structPresets = map[reflect.Type]func(any){
		// Prometheus follows redirects by default; a prober does not (see
		// Target.FollowRedirects). HTTP/2 is attempted over TLS as it is
		// without the block.
		reflect.TypeFor[promconfig.HTTPClientConfig](): func(p any) {
			c := p.(*promconfig.HTTPClientConfig)
			c.FollowRedirects = false
			c.EnableHTTP2 = true
		},
	}

	// scalarStructs are library structs written as one scalar.
	scalarStructs = map[reflect.Type]bool{
		reflect.TypeFor[promconfig.URL](): true,
	}

	// refusedKeys are library keys llm-prober does not support, each with
	// what to use instead. Secret references need a secret manager,
	// which the prober has none of.
	refusedKeys = map[reflect.Type]map[string]string{
		// A module's endpoint never comes from the file (fleet.go).
		reflect.TypeFor[Module](): {
			"name":    moduleEndpointHint,
			"url":     moduleEndpointHint,
			"address": moduleEndpointHint,
			// One URL for every endpoint of a module would scrape one
			// server N times under N names.
			"server_metrics": "a module's endpoints each have their own metrics; scrape them with Prometheus' service discovery",
		},
		reflect.TypeFor[promconfig.HTTPClientConfig](): {
			"http_headers": "set request headers with the target's headers: (values of credential headers are redacted like secrets)",
		},
		reflect.TypeFor[promconfig.BasicAuth](): {
			"username_ref": "secret references need a secret manager; use username or username_file",
			"password_ref": "secret references need a secret manager; use password_file",
		},
		reflect.TypeFor[promconfig.Authorization](): {
			"credentials_ref": "secret references need a secret manager; use credentials_file",
		},
		reflect.TypeFor[promconfig.OAuth2](): {
			"client_secret_ref":          "secret references need a secret manager; use client_secret_file",
			"client_certificate_key_ref": "secret references need a secret manager; use client_certificate_key_file",
		},
		reflect.TypeFor[promconfig.TLSConfig](): {
			"ca_ref":   "secret references need a secret manager; use ca_file or ca",
			"cert_ref": "secret references need a secret manager; use cert_file or cert",
			"key_ref":  "secret references need a secret manager; use key_file",
		},
	}
)

// has reports whether path was written in the file.
func (d *decoder) has(path string) bool {
	_, ok := d.positions[path]
	return ok
}

// conflict reports that the key at path conflicts with the key at other,
// naming other's line.
func (d *decoder) conflict(path, other, advice string) {
	line := 0
	if n := d.positions[other]; n != nil {
		line = n.Line
	}
	d.at(path, "conflicts with %s (line %d); %s", other, line, advice)
}

// authKeys are the http_client_config keys that authenticate, in the order
// a conflict names them.
var authKeys = []string{"authorization", "bearer_token", "bearer_token_file", "basic_auth", "oauth2"}

// authKey is the path of the first authenticating key written in the block
// at hp, "" when there is none.
func (d *decoder) authKey(hp string) string {
	for _, k := range authKeys {
		if d.has(hp + "." + k) {
			return hp + "." + k
		}
	}
	return ""
}

// validateHTTPClient checks a target's http_client_config beside what the
// library's own Validate (run by the walker) checks.
func validateHTTPClient(d *decoder, path string, t *Target, proto probe.Protocol, known bool) {
	h := t.HTTPClientConfig
	if h == nil {
		return
	}
	hp := path + ".http_client_config"
	if known && proto.Endpoint != probe.EndpointURL {
		d.at(hp, "applies to HTTP protocols only; %s takes api_key_file or api_key_env, headers and tls_config (proxies and OAuth2 are not supported over gRPC)", t.Protocol)
		return
	}
	if auth := d.authKey(hp); auth != "" {
		for _, k := range []string{"api_key_file", "api_key_env"} {
			if d.has(path + "." + k) {
				d.conflict(auth, path+"."+k, "authenticate one way ("+k+" is the short form of authorization with credentials)")
			}
		}
		for name := range t.Headers {
			if http.CanonicalHeaderKey(name) == "Authorization" {
				d.conflict(join(path+".headers", name), auth, "authenticate one way")
			}
		}
	}
	for _, k := range []string{"tls_config", "follow_redirects"} {
		if d.has(path+"."+k) && d.has(hp+"."+k) {
			d.conflict(hp+"."+k, path+"."+k, "set "+k+" in one place")
		}
	}
	if u := h.ProxyURL.URL; u != nil && u.String() != "" {
		switch {
		case !slices.Contains([]string{"http", "https", "socks5", "socks5h"}, u.Scheme):
			d.at(hp+".proxy_url", "proxy URL %q must use http, https, socks5 or socks5h", u.Redacted())
		case u.Host == "":
			d.at(hp+".proxy_url", "proxy URL %q has no host", u.Redacted())
		}
	}
	if o := h.OAuth2; o != nil {
		op := hp + ".oauth2"
		if u, err := url.Parse(o.TokenURL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			d.at(op+".token_url", "token URL must be an http or https URL with a host")
		} else if u.User != nil {
			d.at(op+".token_url", "URL %q carries credentials, which would show in logs and pages; %s", redact.Default().URL(o.TokenURL), credentialAdvice(op+".token_url"))
		}
		if o.GrantType != "" && o.GrantType != "client_credentials" && o.GrantType != oauth2JWTBearer {
			d.at(op+".grant_type", "unknown grant type %q; want client_credentials or %s", o.GrantType, oauth2JWTBearer)
		}
		if u := o.ProxyURL.URL; u != nil && u.String() != "" && u.Host == "" {
			d.at(op+".proxy_url", "proxy URL %q has no host", u.Redacted())
		}
	}
}

// resolveHTTPClient makes the block's file paths relative to the config
// file's directory, checks that the secret files can be read (they are
// read again for every request, so a rotated file needs no reload), and
// records a digest of the inline secrets for the target's fingerprint.
func resolveHTTPClient(d *decoder, path, dir string, t *Target) {
	h := t.HTTPClientConfig
	if h == nil {
		return
	}
	hp := path + ".http_client_config"
	h.SetDirectory(dir)
	type secretFile struct{ key, file string }
	var files []secretFile
	if b := h.BasicAuth; b != nil {
		files = append(files, secretFile{hp + ".basic_auth.username_file", b.UsernameFile}, secretFile{hp + ".basic_auth.password_file", b.PasswordFile})
	}
	if a := h.Authorization; a != nil {
		key := hp + ".authorization.credentials_file"
		if !d.has(key) && d.has(hp+".bearer_token_file") {
			// Validate moved bearer_token_file into authorization.
			key = hp + ".bearer_token_file"
		}
		files = append(files, secretFile{key, a.CredentialsFile})
	}
	if o := h.OAuth2; o != nil {
		// OAuth2.SetDirectory leaves this one out.
		o.ClientCertificateKeyFile = promconfig.JoinDir(dir, o.ClientCertificateKeyFile)
		files = append(files, secretFile{hp + ".oauth2.client_secret_file", o.ClientSecretFile}, secretFile{hp + ".oauth2.client_certificate_key_file", o.ClientCertificateKeyFile})
	}
	for _, f := range files {
		if f.file == "" {
			continue
		}
		key := f.key[strings.LastIndex(f.key, ".")+1:]
		b, err := readSecretFile(f.file, key)
		switch {
		case err != nil:
			d.at(f.key, "cannot read %s: %v", key, err)
		case len(bytes.TrimSpace(b)) == 0:
			d.at(f.key, "%s %s is empty", key, f.file)
		}
	}
	t.SecretsDigest = secretsDigest(t)
}

// secretsDigest hashes the target's inline secrets. They print as <secret>
// in every encoding, so without it a reload that changed only an inline
// password would look like no change at all (engine fingerprints targets
// by their JSON).
func secretsDigest(t *Target) string {
	h := t.HTTPClientConfig
	if h == nil {
		return ""
	}
	sum := sha256.New()
	add := func(s promconfig.Secret) {
		sum.Write([]byte(s))
		sum.Write([]byte{0})
	}
	add(h.TLSConfig.Key)
	if b := h.BasicAuth; b != nil {
		add(b.Password)
	}
	if a := h.Authorization; a != nil {
		add(a.Credentials)
	}
	if o := h.OAuth2; o != nil {
		add(o.ClientSecret)
		add(o.ClientCertificateKey)
		add(o.TLSConfig.Key)
		addProxyHeader(sum, o.ProxyConnectHeader)
	}
	addProxyHeader(sum, h.ProxyConnectHeader)
	return hex.EncodeToString(sum.Sum(nil))
}

func addProxyHeader(sum interface{ Write([]byte) (int, error) }, ph promconfig.ProxyHeader) {
	names := make([]string, 0, len(ph))
	for k := range ph {
		names = append(names, k)
	}
	slices.Sort(names)
	for _, k := range names {
		fmt.Fprintf(sum, "%s\x00", k)
		for _, v := range ph[k] {
			fmt.Fprintf(sum, "%s\x00", v)
		}
	}
}

// effectiveTLS is the TLS settings of the target: http_client_config's
// tls_config, or the target's own (validation lets only one be set).
func (t *Target) effectiveTLS() promconfig.TLSConfig {
	if h := t.HTTPClientConfig; h != nil && h.TLSConfig != (promconfig.TLSConfig{}) {
		return h.TLSConfig
	}
	return t.TLSConfig
}

// httpClientOptions copies http_client_config into the driver's options.
func (t *Target) httpClientOptions(o *probe.TargetOptions) {
	o.TLS = t.effectiveTLS()
	o.FollowRedirects = t.FollowRedirects
	o.TrustedRedirectOrigins = slices.Clone(t.FollowRedirectsTrustedOrigins)
	h := t.HTTPClientConfig
	if h == nil {
		return
	}
	o.FollowRedirects = o.FollowRedirects || h.FollowRedirects
	o.DisableHTTP2 = !h.EnableHTTP2
	o.Proxy = h.ProxyConfig
	if h.BasicAuth != nil {
		b := *h.BasicAuth
		o.BasicAuth = &b
	}
	if h.Authorization != nil {
		a := *h.Authorization
		o.Authorization = &a
	}
	if h.OAuth2 != nil {
		oa := *h.OAuth2
		oa.Scopes = slices.Clone(oa.Scopes)
		o.OAuth2 = &oa
	}
}
