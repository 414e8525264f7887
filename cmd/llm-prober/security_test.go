package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llm-prober/llm-prober/internal/testutil"
)

// Planted secrets: the API key startDaemon writes to its key file, a
// basic-auth password sent in an Authorization header, and a custom
// credential header; then http_client_config's: an inline basic_auth
// password, an authorization credentials_file, an OAuth2 client secret
// (from a file) and the token it buys, a proxy URL's password and a
// proxy_connect_header value.
const (
	plantedAPIKey       = "sk-planted-secret-123456"
	plantedPassword     = "planted-pw-98765"
	plantedHeader       = "planted-hdr-key-24680"
	plantedHCCPassword  = "planted-hcc-pw-13579"
	plantedCredFile     = "planted-cred-file-97531"
	plantedClientSecret = "planted-client-secret-86420"
	plantedToken        = "planted-oauth-token-11223"
	plantedProxyPass    = "planted-proxy-pw-44556"
	plantedConnect      = "planted-connect-hdr-77889"
	// One per leak of issue 27: the API key and a custom credential header
	// of a target redirected to another origin; a password in
	// oauth2.token_url; a remote-write password a receiver echoes; tokens
	// in the query of a target URL, a server_metrics URL and a /probe
	// target; a discovered endpoint's password.
	plantedRedirectKey = "planted-redirect-key-31415"
	plantedRedirectHdr = "planted-redirect-hdr-27182"
	plantedTokenURLPw  = "planted-tokenurl-pw-16180"
	plantedRWPassword  = "planted-rw-pw-14142"
	plantedQueryKey    = "planted-query-key-17320"
	plantedSMToken     = "planted-sm-token-22360"
	plantedProbeQuery  = "planted-probeq-key-26457"
	plantedDiscPw      = "planted-disc-pw-24494"
)

var (
	plantedBasic      = base64.StdEncoding.EncodeToString([]byte("prober:" + plantedPassword))
	plantedHCCBasic   = base64.StdEncoding.EncodeToString([]byte("prober:" + plantedHCCPassword))
	plantedProxyBasic = base64.StdEncoding.EncodeToString([]byte("egress:" + plantedProxyPass))
	plantedRWBasic    = base64.StdEncoding.EncodeToString([]byte("rw:" + plantedRWPassword))
	plantedTokenBasic = base64.StdEncoding.EncodeToString([]byte("client:" + plantedTokenURLPw))
)

// forbidden are the strings no output may contain: each secret in every
// form a server could echo it, and a prefix long enough to matter if one
// were cut short by a length bound.
func forbidden() []string {
	out := []string{plantedAPIKey, plantedAPIKey[:10], plantedPassword, plantedPassword[:10], plantedBasic, plantedBasic[:12],
		"prober:" + plantedPassword, plantedHeader, plantedHeader[:10]}
	for _, s := range []string{plantedHCCPassword, plantedCredFile, plantedClientSecret, plantedToken, plantedProxyPass, plantedConnect, plantedHCCBasic, plantedProxyBasic,
		plantedRedirectKey, plantedRedirectHdr, plantedTokenURLPw, plantedRWPassword, plantedQueryKey, plantedSMToken, plantedProbeQuery, plantedDiscPw,
		plantedRWBasic, plantedTokenBasic} {
		out = append(out, s, s[:12])
	}
	return out
}

func assertNoSecrets(t *testing.T, where, text string) {
	t.Helper()
	for _, s := range forbidden() {
		if strings.Contains(text, s) {
			i := strings.Index(text, s)
			t.Errorf("%s leaks %q: …%s…", where, s, text[max(i-200, 0):min(i+len(s)+50, len(text))])
		}
	}
}

// echoServer answers every request with an error that quotes the request's
// credentials back, in the ways real servers and proxies do: plain text, a
// JSON error message, a message long enough that the prober's 300-character
// bound cuts the secret in two, a mid-stream error event, and the decoded
// basic-auth pair.
func echoServer(t *testing.T) string {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		var creds []string
		for _, h := range []string{"Authorization", "X-Api-Key", "Proxy-Authorization"} {
			if v := r.Header.Get(h); v != "" {
				creds = append(creds, h+": "+v)
			}
		}
		if u, p, ok := r.BasicAuth(); ok {
			creds = append(creds, "user "+u+" password "+p)
		}
		echo := strings.Join(creds, "; ")
		switch mode := strings.Split(strings.TrimPrefix(r.URL.Path, "/"), "/")[0]; mode {
		case "plain":
			http.Error(w, "unauthorized: you sent "+echo, http.StatusUnauthorized)
		case "json":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			fmt.Fprintf(w, `{"error":{"message":%q,"type":"auth","code":403}}`, "invalid credentials "+echo)
		case "cut":
			// The first secret straddles the 300th character: the bound
			// keeps its first 12 characters.
			scheme, _, _ := strings.Cut(r.Header.Get("Authorization"), " ")
			pad := strings.Repeat("x", 300-len("Authorization: "+scheme+" ")-12)
			http.Error(w, pad+echo, http.StatusBadGateway)
		case "stream":
			w.Header().Set("Content-Type", "text/event-stream")
			fmt.Fprintf(w, "data: {\"error\":{\"message\":%q,\"code\":500}}\n\n", "upstream rejected "+echo)
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// tokenServer is an OAuth2 token endpoint handing out plantedToken to the
// client that presents plantedClientSecret; with refuse it answers 401
// quoting the client secret back instead.
func tokenServer(t *testing.T, refuse bool) string {
	t.Helper()
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		id, secret, ok := r.BasicAuth()
		if !ok {
			id, secret = r.Form.Get("client_id"), r.Form.Get("client_secret")
		}
		w.Header().Set("Content-Type", "application/json")
		if refuse || secret != plantedClientSecret {
			w.WriteHeader(http.StatusUnauthorized)
			fmt.Fprintf(w, `{"error":"invalid_client","error_description":"client %s with secret %s refused"}`, id, secret)
			return
		}
		fmt.Fprintf(w, `{"access_token":%q,"token_type":"Bearer","expires_in":3600}`, plantedToken)
	}))
	t.Cleanup(ts.Close)
	return ts.URL
}

// hccConfig is targets authenticating through http_client_config against
// the echo server: basic_auth with an inline password, sent through the
// echo server as a proxy (which echoes Proxy-Authorization too, and has a
// proxy_connect_header it never gets: an http target needs no CONNECT),
// authorization from a credentials file, OAuth2 with a secret file, and
// OAuth2 against a token endpoint that refuses and quotes the secret.
func hccConfig(echo, tokenURL, refusingTokenURL, credFile, secretFile string) (cfg string, targets []string) {
	var b strings.Builder
	proxy := strings.Replace(echo, "http://", "http://egress:"+plantedProxyPass+"@", 1)
	for _, mode := range []string{"plain", "json", "cut", "stream"} {
		fmt.Fprintf(&b, `  - name: hcc-basic-%[1]s
    protocol: openai_chat
    url: %[2]s/%[1]s
    model: m
    http_client_config:
      basic_auth: {username: prober, password: %[3]s}
      proxy_url: %[4]s
      proxy_connect_header: {X-Proxy-Token: [%[5]s]}
    probes: [{name: p, schedule: {every: 200ms}}]
  - name: hcc-cred-%[1]s
    protocol: openai_chat
    url: %[2]s/%[1]s
    model: m
    http_client_config:
      authorization: {type: Token, credentials_file: %[6]s}
    probes: [{name: p, schedule: {every: 200ms}}]
  - name: hcc-oauth2-%[1]s
    protocol: openai_chat
    url: %[2]s/%[1]s
    model: m
    http_client_config:
      oauth2: {client_id: prober, client_secret_file: %[7]s, token_url: %[8]s}
    probes: [{name: p, schedule: {every: 200ms}}]
`, mode, echo, plantedHCCPassword, proxy, plantedConnect, credFile, secretFile, tokenURL)
		targets = append(targets, "hcc-basic-"+mode, "hcc-cred-"+mode, "hcc-oauth2-"+mode)
	}
	fmt.Fprintf(&b, `  - name: hcc-token-refused
    protocol: openai_chat
    url: %s/plain
    model: m
    http_client_config:
      oauth2: {client_id: prober, client_secret: %s, token_url: %s}
    probes: [{name: p, schedule: {every: 200ms}}]
`, echo, plantedClientSecret, refusingTokenURL)
	targets = append(targets, "hcc-token-refused")
	return b.String(), targets
}

// secretsConfig probes the echo server from targets carrying each secret.
func secretsConfig(echo string) string {
	var b strings.Builder
	b.WriteString("targets:\n")
	for _, mode := range []string{"plain", "json", "cut", "stream"} {
		fmt.Fprintf(&b, `  - name: key-%[1]s
    protocol: openai_chat
    url: %[2]s/%[1]s
    model: m
    api_key_file: key
    probes: [{name: p, schedule: {every: 200ms}}]
  - name: basic-%[1]s
    protocol: openai_chat
    url: %[2]s/%[1]s
    model: m
    headers: {Authorization: "Basic %[3]s", X-Api-Key: %[4]s}
    probes: [{name: p, schedule: {every: 200ms}}]
`, mode, echo, plantedBasic, plantedHeader)
	}
	b.WriteString("workloads:\n  default: {max_tokens: 4}\n")
	return b.String()
}

// TestSecretsNeverLeak scans every surface for the planted secrets while
// the probed server echoes them back in its errors: the daemon's debug
// logs, /metrics (text and OpenMetrics), /config, the status page "/" and
// every probe page with its errors and debug logs, check-config --print,
// and the probe subcommand's output.
func TestSecretsNeverLeak(t *testing.T) {
	echo := echoServer(t)
	dir := t.TempDir()
	credFile, secretFile := filepath.Join(dir, "credentials"), filepath.Join(dir, "client-secret")
	testutil.WriteFile(t, credFile, plantedCredFile+"\n")
	testutil.WriteFile(t, secretFile, plantedClientSecret+"\n")
	hcc, hccTargets := hccConfig(echo, tokenServer(t, false), tokenServer(t, true), credFile, secretFile)
	cfg := strings.Replace(secretsConfig(echo), "targets:\n", "targets:\n"+hcc, 1)
	td := startDaemon(t, cfg, func(o *serveOptions) { o.historyResults = 100 })
	targets := []string{}
	for _, mode := range []string{"plain", "json", "cut", "stream"} {
		targets = append(targets, "key-"+mode, "basic-"+mode)
	}
	targets = append(targets, hccTargets...)
	// Every target failed at least twice: once logged at warn with its
	// error, then at debug.
	testutil.WaitFor(t, "every target's failure logged 3 times", waitTimeout, func() bool {
		logs := td.logs.String()
		for _, tg := range targets {
			if strings.Count(logs, "target="+tg+" ") < 3 {
				return false
			}
		}
		return true
	})
	logs := td.logs.String()
	assertNoSecrets(t, "debug logs", logs)
	// The echoes did arrive, and were redacted rather than dropped.
	if !strings.Contains(logs, "<secret>") {
		t.Errorf("no redacted echo in the logs; did the echo server answer?\n%s", logs)
	}
	for _, path := range []string{"/metrics", "/config", "/", "/-/ready", "/-/healthy"} {
		_, _, body := get(t, "GET", td.url+path)
		assertNoSecrets(t, path, body)
	}
	req, _ := http.NewRequest("GET", td.url+"/metrics", nil)
	req.Header.Set("Accept", "application/openmetrics-text; version=1.0.0")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		assertNoSecrets(t, "/metrics (OpenMetrics, exemplars)", string(b))
	}
	// The status pages show the echoed errors, redacted, and the debug
	// log of each failure.
	_, _, index := get(t, "GET", td.url+"/")
	for _, tg := range targets {
		if !strings.Contains(index, `href="/probes/`+tg+`/p"`) {
			t.Errorf("/ lacks the probe page link of %s", tg)
		}
		status, _, page := get(t, "GET", td.url+"/probes/"+tg+"/p")
		assertNoSecrets(t, "/probes/"+tg+"/p", page)
		if status != http.StatusOK || !strings.Contains(page, "&lt;secret&gt;") || !strings.Contains(page, `class="debug-log"`) {
			t.Errorf("/probes/%s/p: %d; want the echoed credential as <secret> and a debug log:\n%s", tg, status, page)
		}
	}
	if !strings.Contains(index, "&lt;secret&gt;") {
		t.Errorf("/ should show the failing probes' redacted errors:\n%s", index)
	}
	if _, _, c := get(t, "GET", td.url+"/config"); strings.Count(c, "<secret>") < 3*4+2*4+1 ||
		!strings.Contains(c, "password: <secret>") || !strings.Contains(c, "- <secret>") || !strings.Contains(c, "egress:xxxxx@") ||
		!strings.Contains(c, "client_secret: <secret>") {
		t.Errorf("/config should show the API key, both credential headers and http_client_config's secrets as <secret>:\n%s", c)
	}

	var stdout, stderr bytes.Buffer
	if code := run(context.Background(), []string{"check-config", "--print", td.cfgPath}, &stdout, &stderr); code != 0 {
		t.Fatalf("check-config --print: exit %d: %s", code, stderr.String())
	}
	assertNoSecrets(t, "check-config --print", stdout.String()+stderr.String())

	for _, tg := range targets {
		stdout.Reset()
		stderr.Reset()
		code := run(context.Background(), []string{"--log.level=debug", "probe", "--config.file=" + td.cfgPath, "--target=" + tg}, &stdout, &stderr)
		if code != 1 {
			t.Errorf("probe %s: exit %d, want 1 (the server refuses)", tg, code)
		}
		out := stdout.String() + stderr.String()
		assertNoSecrets(t, "probe --target="+tg, out)
		if !strings.Contains(out, "<secret>") {
			t.Errorf("probe %s: the echoed credential should show as <secret>:\n%s", tg, out)
		}
	}
	t.Run("issue27", testIssue27Leaks)
}

// headerEcho records every request's headers and answers status with
// all of them quoted back, as a careless receiver or gateway does.
type headerEcho struct {
	url  string
	mu   sync.Mutex
	seen strings.Builder
}

func startHeaderEcho(t *testing.T, status int) *headerEcho {
	t.Helper()
	e := &headerEcho{}
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		var b strings.Builder
		_ = r.Header.Write(&b)
		e.mu.Lock()
		e.seen.WriteString(r.URL.String() + "\n" + b.String())
		e.mu.Unlock()
		http.Error(w, "refused; you sent:\n"+b.String(), status)
	}))
	t.Cleanup(ts.Close)
	e.url = ts.URL
	return e
}

func (e *headerEcho) headers() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.seen.String()
}

// issue27Config plants one distinct secret per leak of issue 27.
func issue27Config(origin, echo, rw, sdFile, keyFile string) string {
	return fmt.Sprintf(`targets:
  - name: redirected
    protocol: openai_chat
    url: %[1]s
    model: m
    api_key_file: %[9]s
    headers: {X-Auth-Token: %[5]s}
    follow_redirects: true
    probes: [{name: p, schedule: {every: 200ms}}]
  - name: query
    protocol: openai_chat
    url: %[2]s/plain?api_key=%[6]s
    model: m
    server_metrics: {url: "%[2]s/plain/metrics?token=%[7]s", kind: vllm, timeout: 1s}
    probes: [{name: p, schedule: {every: 200ms}}]
modules:
  chat:
    protocol: openai_chat
    model: m
    allowed_targets: '%[2]s/plain.*'
    probes: [{name: p, schedule: {every: 1h}}]
target_discovery:
  - module: chat
    file_sd_configs: [{files: [%[4]s], refresh_interval: 1s}]
remote_write:
  - url: %[3]s/api/v1/write
    interval: 1s
    basic_auth: {username: rw, password: %[8]s}
workloads:
  default: {max_tokens: 4}
`, origin, echo, rw, sdFile, plantedRedirectHdr, plantedQueryKey, plantedSMToken, plantedRWPassword, keyFile)
}

// testIssue27Leaks: each leak of issue 27, with its own secret, through
// every output: debug logs, /metrics, /config, the status pages,
// /probe?debug=true, check-config (--print), the probe subcommand and
// bench's JSON, CSV, HTML, request export and stdout.
func testIssue27Leaks(t *testing.T) {
	echo := echoServer(t)
	// 1: the target redirects (307) to another port of the same host,
	// which must get neither the API key nor the X-Auth-Token header.
	elsewhere := startHeaderEcho(t, http.StatusUnauthorized)
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		http.Redirect(w, r, elsewhere.url+r.URL.Path, http.StatusTemporaryRedirect)
	}))
	t.Cleanup(origin.Close)
	// 3: a remote-write receiver answering 400 with the request's headers.
	receiver := startHeaderEcho(t, http.StatusBadRequest)
	// 5: a discovered endpoint with a password, refused by the module.
	dir := t.TempDir()
	sdFile, keyFile := filepath.Join(dir, "sd.yml"), filepath.Join(dir, "rkey")
	testutil.WriteFile(t, keyFile, plantedRedirectKey+"\n")
	testutil.WriteFile(t, sdFile, fmt.Sprintf("- targets: ['http://disc:%s@203.0.113.9:1/v1']\n", plantedDiscPw))
	cfg := issue27Config(origin.URL, echo, receiver.url, sdFile, keyFile)
	td := startDaemon(t, cfg, func(o *serveOptions) { o.historyResults = 100 })

	testutil.WaitFor(t, "every leak's log line", waitTimeout, func() bool {
		// Model-server metrics are fetched while /metrics is scraped.
		_, _, _ = get(t, "GET", td.url+"/metrics")
		logs := td.logs.String()
		for _, want := range []string{"target=redirected ", "target=query ", "Remote write receiver rejected samples",
			"Discovered target not probed", "Scraping model-server metrics failed"} {
			if !strings.Contains(logs, want) {
				return false
			}
		}
		return strings.Count(logs, "target=redirected ") >= 3 && strings.Count(logs, "target=query ") >= 3
	})
	if seen := elsewhere.headers(); !strings.Contains(seen, "/v1/chat/completions") {
		t.Errorf("the redirect never reached the other origin:\n%s", seen)
	} else {
		assertNoSecrets(t, "headers sent to the redirect's other origin", seen)
	}
	if seen := receiver.headers(); !strings.Contains(seen, "Basic ") {
		t.Errorf("the remote-write receiver got no credentials; was the case exercised?\n%s", seen)
	}

	_, _, debug := get(t, "GET", td.url+"/probe?module=chat&debug=true&target="+url.QueryEscape(echo+"/plain?key="+plantedProbeQuery))
	assertNoSecrets(t, "/probe?debug=true", debug)
	if !strings.Contains(debug, "key=<secret>") {
		t.Errorf("/probe?debug=true should show the query token as <secret>:\n%s", debug)
	}
	assertNoSecrets(t, "debug logs", td.logs.String())
	for _, path := range []string{"/metrics", "/config", "/", "/probes/redirected/p", "/probes/query/p"} {
		_, _, body := get(t, "GET", td.url+path)
		assertNoSecrets(t, path, body)
	}
	if _, _, c := get(t, "GET", td.url+"/config"); !strings.Contains(c, "api_key=<secret>") || !strings.Contains(c, "token=<secret>") {
		t.Errorf("/config should show the query tokens as <secret>:\n%s", c)
	}

	var stdout, stderr bytes.Buffer
	for _, args := range [][]string{{"check-config", "--print", td.cfgPath}, {"check-config", td.cfgPath}} {
		stdout.Reset()
		stderr.Reset()
		_ = run(context.Background(), args, &stdout, &stderr)
		assertNoSecrets(t, strings.Join(args[:len(args)-1], " "), stdout.String()+stderr.String())
	}
	for _, tg := range []string{"redirected", "query"} {
		stdout.Reset()
		stderr.Reset()
		_ = run(context.Background(), []string{"--log.level=debug", "probe", "--config.file=" + td.cfgPath, "--target=" + tg}, &stdout, &stderr)
		assertNoSecrets(t, "probe --target="+tg, stdout.String()+stderr.String())
	}
	out := filepath.Join(dir, "bench")
	code, bout, berr := runBenchArgs(context.Background(), t, "--log.level=debug", "--config.file", td.cfgPath, "--target", "query",
		"--concurrency", "1", "--duration", "300ms", "--warmup", "0s",
		"--output", out+".json", "--csv", out+".csv", "--html", out+".html", "--export-requests", out+".jsonl")
	assertNoSecrets(t, "bench stdout and stderr", bout+berr)
	for _, ext := range []string{".json", ".csv", ".html", ".jsonl"} {
		b, err := os.ReadFile(out + ext)
		if err != nil {
			t.Errorf("bench (exit %d) wrote no %s: %v\n%s%s", code, ext, err, bout, berr)
			continue
		}
		assertNoSecrets(t, "bench "+ext, string(b))
	}

	// 2: oauth2.token_url with a password is refused at load, without
	// quoting it, by every command that loads the file.
	tokenCfg := testutil.WriteConfig(t, fmt.Sprintf(`targets:
  - name: oauth
    protocol: openai_chat
    url: %s/plain
    model: m
    http_client_config:
      oauth2: {client_id: prober, client_secret: %s, token_url: "http://client:%s@127.0.0.1:1/token"}
    probes: [{name: p, schedule: {every: 1h}}]
`, echo, plantedClientSecret, plantedTokenURLPw), nil)
	for _, args := range [][]string{{"check-config", "--print", tokenCfg}, {"check-config", tokenCfg}, {"probe", "--config.file=" + tokenCfg, "--target=oauth"}} {
		stdout.Reset()
		stderr.Reset()
		code := run(context.Background(), args, &stdout, &stderr)
		assertNoSecrets(t, strings.Join(args, " "), stdout.String()+stderr.String())
		if code == 0 || !strings.Contains(stderr.String(), "token_url") {
			t.Errorf("%v: exit %d, want the token_url refused:\n%s%s", args, code, stdout.String(), stderr.String())
		}
	}
}

// webPassword and its bcrypt hash (cost 4, so tests stay fast; produced once
// with golang.org/x/crypto/bcrypt, which exporter-toolkit uses to check it).
const (
	webUser     = "scraper"
	webPassword = "planted-web-pw-4711"
	webHash     = "$2a$04$yIc58Zadt2OVqg03IStBFOD1DU33mFaJw3wV2TZhNlhAbbvsmE4MG"
)

// startSecureDaemon is startDaemon behind an exporter-toolkit web config
// with TLS and basic auth.
func startSecureDaemon(t *testing.T, disableReload bool) (url string, client *http.Client, logs *testutil.SyncBuffer, cfgPath string) {
	t.Helper()
	cfgPath = testutil.WriteConfig(t, goodConfig, map[string]string{"key": plantedAPIKey + "\n"})
	dir := filepath.Dir(cfgPath)
	cert := testutil.SelfSignedCert(t)
	certFile, keyFile := filepath.Join(dir, "web.crt"), filepath.Join(dir, "web.key")
	testutil.WriteFile(t, certFile, string(cert.CertPEM))
	testutil.WriteFile(t, keyFile, string(cert.KeyPEM))
	webConfig := filepath.Join(dir, "web.yml")
	testutil.WriteFile(t, webConfig, fmt.Sprintf("tls_server_config:\n  cert_file: %s\n  key_file: %s\nbasic_auth_users:\n  %s: %s\n", certFile, keyFile, webUser, webHash))

	logs = &testutil.SyncBuffer{}
	// Registered first, so it runs after the daemon stopped.
	t.Cleanup(func() {
		assertNoSecrets(t, "logs", logs.String())
		if strings.Contains(logs.String(), webPassword) {
			t.Error("web password in the logs")
		}
	})
	addr := serveInProcess(t, serveOptions{configFile: cfgPath, disableReload: disableReload, reloadSignals: make(chan os.Signal, 1)}, webConfig, logs)
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: cert.Pool}}
	client = &http.Client{Transport: tr, Timeout: 10 * time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	url = "https://" + addr
	testutil.WaitFor(t, "200 OK from /-/ready over TLS with basic auth", testutil.ReadyTimeout, func() bool {
		req, _ := http.NewRequest("GET", url+"/-/ready", nil)
		req.SetBasicAuth(webUser, webPassword)
		resp, err := client.Do(req)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return url, client, logs, cfgPath
}

func TestWebConfigTLSAndBasicAuth(t *testing.T) {
	for _, disableReload := range []bool{false, true} {
		t.Run(fmt.Sprintf("disable-reload=%v", disableReload), func(t *testing.T) {
			url, client, _, _ := startSecureDaemon(t, disableReload)
			do := func(method, path, user, pw string) (int, string) {
				t.Helper()
				req, _ := http.NewRequest(method, url+path, nil)
				if user != "" {
					req.SetBasicAuth(user, pw)
				}
				resp, err := client.Do(req)
				if err != nil {
					t.Fatalf("%s %s: %v", method, path, err)
				}
				defer resp.Body.Close()
				b, _ := io.ReadAll(resp.Body)
				return resp.StatusCode, string(b)
			}
			// Every endpoint, the status page and reload included, is
			// behind the same authentication.
			for _, c := range []struct{ method, path string }{
				{"GET", "/"}, {"GET", "/metrics"}, {"GET", "/config"}, {"GET", "/-/healthy"}, {"GET", "/-/ready"},
				{"POST", "/-/reload"}, {"PUT", "/-/reload"}, {"GET", "/no-such-page"},
			} {
				if code, _ := do(c.method, c.path, "", ""); code != http.StatusUnauthorized {
					t.Errorf("%s %s without credentials: %d, want 401", c.method, c.path, code)
				}
				if code, _ := do(c.method, c.path, webUser, "wrong-password"); code != http.StatusUnauthorized {
					t.Errorf("%s %s with a wrong password: %d, want 401", c.method, c.path, code)
				}
				if code, _ := do(c.method, c.path, "intruder", webPassword); code != http.StatusUnauthorized {
					t.Errorf("%s %s with an unknown user: %d, want 401", c.method, c.path, code)
				}
			}
			for _, c := range []struct {
				method, path string
				want         int
				contains     string
			}{
				{"GET", "/", 200, "/metrics"},
				{"GET", "/metrics", 200, "llm_prober_build_info"},
				{"GET", "/config", 200, "api_key: <secret>"},
				{"GET", "/-/healthy", 200, "Healthy"},
			} {
				code, body := do(c.method, c.path, webUser, webPassword)
				if code != c.want || !strings.Contains(body, c.contains) {
					t.Errorf("%s %s authenticated: %d, body contains %q: %v", c.method, c.path, code, c.contains, strings.Contains(body, c.contains))
				}
				assertNoSecrets(t, c.path, body)
			}
			code, body := do("POST", "/-/reload", webUser, webPassword)
			switch {
			case disableReload && code != http.StatusForbidden:
				t.Errorf("authenticated POST /-/reload with --web.disable-reload: %d %s, want 403", code, body)
			case !disableReload && code != http.StatusOK:
				t.Errorf("authenticated POST /-/reload: %d %s, want 200", code, body)
			}

			// Plain HTTP and an untrusted certificate get nothing.
			plain := "http" + strings.TrimPrefix(url, "https")
			req, _ := http.NewRequest("GET", plain+"/metrics", nil)
			req.SetBasicAuth(webUser, webPassword)
			if resp, err := http.DefaultClient.Do(req); err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK || strings.Contains(string(b), "llm_prober_build_info") {
					t.Errorf("plain HTTP to the TLS port served metrics: %d", resp.StatusCode)
				}
			}
			untrusting := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
			if resp, err := untrusting.Get(url + "/metrics"); err == nil {
				resp.Body.Close()
				t.Errorf("a client without the CA connected: %d", resp.StatusCode)
			}
		})
	}
}

// TestProbesOnlyConfiguredTargets: no endpoint takes a target from the
// request but /probe, and /probe only for a module of the configuration
// whose allowed_targets match (none here: 400). Every request below names
// a canary server, which must never be contacted; unknown paths are 404.
func TestProbesOnlyConfiguredTargets(t *testing.T) {
	var hits atomic.Int64
	canary := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { hits.Add(1) }))
	t.Cleanup(canary.Close)
	td := startDaemon(t, goodConfig)
	q := "?target=" + canary.URL + "&url=" + canary.URL + "&address=" + strings.TrimPrefix(canary.URL, "http://") + "&module=openai_chat"
	known := map[string]bool{"/": true, "/metrics": true, "/config": true, "/-/healthy": true, "/-/ready": true, "/-/reload": true}
	for _, path := range []string{"/", "/metrics", "/config", "/-/healthy", "/-/ready", "/-/reload",
		"/probe", "/probe/", "/-/probe", "/api/probe", "/api/v1/probe", "/v1/chat/completions", "/targets", "/debug/pprof/"} {
		for _, method := range []string{"GET", "POST"} {
			status, _, _ := get(t, method, td.url+path+q)
			switch {
			case path == "/probe" && status != http.StatusBadRequest:
				t.Errorf("%s %s with a module the configuration lacks: %d, want 400", method, path, status)
			case path != "/probe" && !known[path] && status != http.StatusNotFound:
				t.Errorf("%s %s: %d, want 404 (no such endpoint)", method, path, status)
			}
		}
	}
	time.Sleep(300 * time.Millisecond)
	if n := hits.Load(); n != 0 {
		t.Errorf("the canary named in request parameters was contacted %d times", n)
	}
	// The two refused calls of /probe (GET and POST) are counted where an
	// operator looks.
	if _, _, body := get(t, "GET", td.url+"/metrics"); !strings.Contains(body, `llm_prober_probe_endpoint_rejected_total{reason="bad_request"} 2`) {
		t.Errorf("/metrics lacks the 2 refused /probe calls:\n%s", grepLines(body, "llm_prober_probe_endpoint"))
	}
}

func grepLines(s, sub string) string {
	var out []string
	for l := range strings.Lines(s) {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
}
