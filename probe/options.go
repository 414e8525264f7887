package probe

import (
	"fmt"
	"log/slog"
	"net/url"
	"strings"
	"time"

	promconfig "github.com/prometheus/common/config"
)

// What NewDriver applies to zero TargetOptions fields.
const (
	// DefaultStreamIdleTimeout and DefaultMaxResponseBytes bound options
	// that leave the configurable stream_idle_timeout and
	// max_response_bytes unset. config defaults them to these same values
	// (config.DefaultStreamIdleTimeout, config.DefaultMaxResponseBytes)
	// and always sets them, so these are the one definition of each and
	// only drivers built without a config rely on NewDriver for them.
	DefaultStreamIdleTimeout = 30 * time.Second
	DefaultMaxResponseBytes  = 64 << 20

	// DefaultMaxLineBytes and DefaultConnectTimeout are internal limits,
	// not configurable.
	DefaultMaxLineBytes   = 1 << 20
	DefaultConnectTimeout = 10 * time.Second
)

// Protocol names accepted by NewDriver; Protocols() describes each.
const (
	ProtocolOpenAIChat        = "openai_chat"
	ProtocolOpenAICompletions = "openai_completions"
	ProtocolTGI               = "tgi"
	ProtocolOllama            = "ollama"
	ProtocolTritonGenerate    = "triton_generate"
	ProtocolTritonGRPC        = "triton_grpc"
	ProtocolOpenAIResponses   = "openai_responses"
)

// TargetOptions is everything a driver needs to know about one target.
// The config layer fills it (config.Target.DriverOptions); zero values mean
// the defaults above.
type TargetOptions struct {
	// Name identifies the target in logs.
	Name string
	// URL is the server's base URL, e.g. http://127.0.0.1:8000. Drivers
	// append their API path; a URL already ending in /v1 (or in the full
	// endpoint path) is accepted as well.
	URL string
	// Address is host:port of gRPC protocols (triton_grpc).
	Address string
	// Model is sent when the Request does not name one.
	Model string
	// Headers are added to every request. A "Host" entry sets the Host.
	Headers map[string]string
	// BearerToken is the already-resolved secret sent as
	// "Authorization: Bearer". It is never logged nor put in an error.
	BearerToken string
	TLS         promconfig.TLSConfig
	// NewConnectionPerProbe disables keep-alive, so every probe pays (and
	// measures) DNS, connect and TLS.
	NewConnectionPerProbe bool
	// StreamIdleTimeout is the stall detector: once the response head has
	// arrived, a gap this long without any body byte ends the probe as
	// stream_stalled. It covers the wait for the first token too.
	StreamIdleTimeout time.Duration
	// MaxResponseBytes bounds the whole body; MaxLineBytes bounds one SSE
	// line (and one event's joined data). Beyond them: protocol_error.
	MaxResponseBytes int64
	MaxLineBytes     int
	// FollowRedirects follows up to DefaultMaxRedirects HTTP redirects;
	// by default a 3xx answer is a protocol_error.
	FollowRedirects bool
	// TrustedRedirectOrigins are the origins (scheme://host:port) a
	// redirect may go to with the target's credentials; a redirect to any
	// other origin is sent without them.
	TrustedRedirectOrigins []string
	// SecretQueryParams are query parameters whose values are secret,
	// besides redact.DefaultQueryParams.
	SecretQueryParams []string

	// The rest is Prometheus' HTTP client configuration
	// (http_client_config), for the HTTP drivers only.

	// Proxy routes requests through a forward proxy: proxy_url (with
	// no_proxy) or proxy_from_environment, and proxy_connect_header sent
	// with CONNECT for https targets. The zero value connects directly.
	Proxy promconfig.ProxyConfig
	// DisableHTTP2 keeps to HTTP/1.1; by default HTTP/2 is used where a
	// TLS server negotiates it.
	DisableHTTP2 bool
	// BasicAuth, Authorization and OAuth2 (at most one of them, and not
	// with BearerToken) authenticate every request through prometheus/
	// common's round trippers. Their files are read for every request.
	// An OAuth2 token is fetched (and cached until it expires) before the
	// probe's clock starts, so it never counts in TTFT.
	BasicAuth     *promconfig.BasicAuth
	Authorization *promconfig.Authorization
	OAuth2        *promconfig.OAuth2
	// ConnectTimeout bounds dialing and, separately, the TLS handshake.
	ConnectTimeout time.Duration
	// OllamaAPI selects the ollama protocol's endpoint: OllamaAPIChat
	// (/api/chat, also when empty) or OllamaAPIGenerate (/api/generate).
	OllamaAPI string
	// ServerLoadReport asks the server for its load with every request
	// (endpoint-load-metrics-format: text) and reads the report from the
	// answer into Result.ServerLoad (serverload.go). HTTP drivers only.
	ServerLoadReport bool
	// Triton configures the triton_generate and triton_grpc drivers.
	Triton TritonOptions
	// Pooling configures the embedding and rerank drivers.
	Pooling PoolingOptions
}

// withDefaults returns o with zero fields replaced by the defaults.
func (o TargetOptions) withDefaults() TargetOptions {
	if o.StreamIdleTimeout <= 0 {
		o.StreamIdleTimeout = DefaultStreamIdleTimeout
	}
	if o.MaxResponseBytes <= 0 {
		o.MaxResponseBytes = DefaultMaxResponseBytes
	}
	if o.MaxLineBytes <= 0 {
		o.MaxLineBytes = DefaultMaxLineBytes
	}
	if o.ConnectTimeout <= 0 {
		o.ConnectTimeout = DefaultConnectTimeout
	}
	return o
}

// NewDriver builds the driver for protocol against one target. It fails on
// an unknown protocol, an unusable URL or TLS settings that cannot be
// loaded (missing CA file, bad client key pair). A nil logger discards.
func NewDriver(protocol string, opts TargetOptions, logger *slog.Logger) (Driver, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	p := lookupProtocol(protocol)
	if p == nil {
		return nil, fmt.Errorf("unknown protocol %q (supported: %s)", protocol, strings.Join(SupportedProtocols(), ", "))
	}
	return p.newDriver(opts.withDefaults(), logger.With("protocol", protocol))
}

// parseBaseURL checks that a target URL is absolute http(s) with a host.
func parseBaseURL(raw string) (*url.URL, error) {
	if raw == "" {
		return nil, fmt.Errorf("target URL is empty")
	}
	u, err := url.Parse(raw)
	if err != nil {
		// url.Error repeats the URL, which may carry user:password.
		return nil, fmt.Errorf("target URL is not valid")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("target URL %q: scheme must be http or https", u.Redacted())
	}
	if u.Host == "" {
		return nil, fmt.Errorf("target URL %q has no host", u.Redacted())
	}
	return u, nil
}

// endpointURL appends an OpenAI API path (e.g. "/chat/completions") to the
// base URL: base + "/v1" + path, except when the base already ends in /v1
// or in /v1+path.
func endpointURL(base *url.URL, path string) string {
	u := *base
	p := strings.TrimRight(u.Path, "/")
	switch {
	case strings.HasSuffix(p, "/v1"+path):
	case strings.HasSuffix(p, "/v1"):
		p += path
	default:
		p += "/v1" + path
	}
	u.Path = p
	u.RawPath = ""
	return u.String()
}
