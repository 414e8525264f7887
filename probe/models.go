package probe

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Model lists: what a server says it serves, for model discovery. The
// list is fetched over the target's own HTTP client (TLS, proxy,
// authentication, redaction), bounded in size, and parsed strictly: a
// list that does not parse is an error, never an empty list, so the
// caller can keep the last good one.

// Model-list APIs (TargetOptions are the target's; the API says which
// endpoint lists its models).
const (
	// ModelsAPIOpenAI: GET /v1/models, {"data":[{"id":…}]}. vLLM lists
	// its LoRA adapters there too (with the base model as parent).
	ModelsAPIOpenAI = "openai"
	// ModelsAPIOllama: GET /api/tags, {"models":[{"name":…}]}.
	ModelsAPIOllama = "ollama"
	// ModelsAPITriton: POST /v2/repository/index {"ready":true},
	// [{"name","version","state"}]; only READY models are taken.
	ModelsAPITriton = "triton"
)

// ModelsAPIs lists the model-list APIs.
func ModelsAPIs() []string { return []string{ModelsAPIOpenAI, ModelsAPIOllama, ModelsAPITriton} }

// DefaultModelsAPI is the model-list API of a protocol's server.
func DefaultModelsAPI(protocol string) string {
	switch protocol {
	case ProtocolOllama, ProtocolOllamaEmbed:
		return ModelsAPIOllama
	case ProtocolTritonGenerate, ProtocolTritonGRPC:
		return ModelsAPITriton
	}
	return ModelsAPIOpenAI
}

const (
	// MaxModelListBytes bounds a model list: thousands of entries fit.
	MaxModelListBytes = 4 << 20
	// MaxModelNameBytes bounds one model name, as config bounds a
	// target's model: it becomes a label value.
	MaxModelNameBytes = 256
)

// ModelLister fetches one target's model list.
type ModelLister struct {
	t      *httpTarget
	api    string
	url    string
	method string
	body   []byte
}

// NewModelLister builds the lister of api for the target opts describes;
// opts.URL is the server's base URL.
func NewModelLister(api string, opts TargetOptions, logger *slog.Logger) (*ModelLister, error) {
	if logger == nil {
		logger = slog.New(slog.DiscardHandler)
	}
	t, err := newHTTPTarget(opts.withDefaults(), logger)
	if err != nil {
		return nil, err
	}
	l := &ModelLister{t: t, api: api, method: http.MethodGet}
	switch api {
	case ModelsAPIOpenAI:
		l.url = endpointURL(t.base, "/models")
	case ModelsAPIOllama:
		l.url = nativeEndpoint(t.base, "/api/tags", "/api/tags")
	case ModelsAPITriton:
		l.url = nativeEndpoint(t.base, "/v2/repository/index", "/v2/repository/index")
		l.method, l.body = http.MethodPost, []byte(`{"ready":true}`)
	default:
		t.close()
		return nil, fmt.Errorf("target %q: unknown model-list api %q (want %s)", opts.Name, api, strings.Join(ModelsAPIs(), ", "))
	}
	return l, nil
}

// URL is where the list is fetched, for messages (credentials removed).
func (l *ModelLister) URL() string {
	u, err := url.Parse(l.url)
	if err != nil {
		return ""
	}
	u.User, u.RawQuery = nil, ""
	return u.String()
}

// Close releases idle connections.
func (l *ModelLister) Close() { l.t.close() }

// List fetches and parses the model list within ctx. The names come in
// the server's order, without duplicates.
func (l *ModelLister) List(ctx context.Context) ([]string, error) {
	names, err := l.list(ctx)
	return names, l.t.redact(err)
}

func (l *ModelLister) list(ctx context.Context) ([]string, error) {
	req, err := http.NewRequestWithContext(ctx, l.method, l.url, bytes.NewReader(l.body))
	if err != nil {
		return nil, errBuildRequest
	}
	id := newRequestID()
	l.t.setHeaders(req, id, false)
	if l.body == nil {
		req.Header.Del("Content-Type")
	}
	if l.t.auth != nil {
		h, err := l.t.auth.authorize(ctx, l.url, func(r *http.Request) { l.t.setHeaders(r, id, false) })
		if err != nil {
			return nil, fmt.Errorf("authenticating: %w", err)
		}
		for k, v := range h {
			req.Header[k] = v
		}
	}
	resp, err := l.t.client.Do(req)
	if err != nil {
		return nil, fmt.Errorf("fetching the model list: %w", unwrapURLError(err))
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		snippet, _ := io.ReadAll(io.LimitReader(resp.Body, errorBodyBytes))
		msg := errorMessage(snippet)
		if msg != "" {
			msg = ": " + msg
		}
		return nil, fmt.Errorf("model list answered HTTP %d%s", resp.StatusCode, msg)
	}
	if ce := strings.TrimSpace(resp.Header.Get("Content-Encoding")); ce != "" && !strings.EqualFold(ce, "identity") {
		return nil, fmt.Errorf("model list sent Content-Encoding %q although identity was asked for", sanitize([]byte(ce)))
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxModelListBytes+1))
	if err != nil {
		return nil, fmt.Errorf("reading the model list: %w", unwrapURLError(err))
	}
	if len(data) > MaxModelListBytes {
		return nil, fmt.Errorf("model list is larger than %d bytes", MaxModelListBytes)
	}
	return ParseModelList(l.api, data)
}

// errEmptyList: a list without one usable name is treated as a failure:
// a server that serves nothing cannot be probed, and a proxy or a
// restarting server answering an empty list must not stop every probe.
var errEmptyList = errors.New("model list holds no model")

// ParseModelList parses a model list of api. Names that are not usable
// as label values (empty, over MaxModelNameBytes, not printable UTF-8)
// are skipped; a list left with none is an error.
func ParseModelList(api string, data []byte) ([]string, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 {
		return nil, errors.New("model list is empty (no body)")
	}
	var raw []string
	switch api {
	case ModelsAPIOpenAI:
		var l struct {
			Data *[]struct {
				ID string `json:"id"`
			} `json:"data"`
		}
		if err := decodeJSON(data, &l); err != nil {
			return nil, fmt.Errorf("model list is not JSON of /v1/models (%v): %s", err, sanitize(data))
		}
		if l.Data == nil {
			return nil, fmt.Errorf("model list has no data array: %s", sanitize(data))
		}
		for _, m := range *l.Data {
			raw = append(raw, m.ID)
		}
	case ModelsAPIOllama:
		var l struct {
			Models *[]struct {
				Name  string `json:"name"`
				Model string `json:"model"`
			} `json:"models"`
		}
		if err := decodeJSON(data, &l); err != nil {
			return nil, fmt.Errorf("model list is not JSON of /api/tags (%v): %s", err, sanitize(data))
		}
		if l.Models == nil {
			return nil, fmt.Errorf("model list has no models array: %s", sanitize(data))
		}
		for _, m := range *l.Models {
			n := m.Name
			if n == "" {
				n = m.Model
			}
			raw = append(raw, n)
		}
	case ModelsAPITriton:
		var l []struct {
			Name  string `json:"name"`
			State string `json:"state"`
		}
		if err := decodeJSON(data, &l); err != nil {
			return nil, fmt.Errorf("model list is not JSON of Triton's repository index (%v): %s", err, sanitize(data))
		}
		if l == nil {
			return nil, fmt.Errorf("repository index is null, not a list")
		}
		for _, m := range l {
			// Older Tritons ignore "ready" and list every model of the
			// repository; one that is not loaded cannot be probed.
			if m.State == "" || m.State == "READY" {
				raw = append(raw, m.Name)
			}
		}
	default:
		return nil, fmt.Errorf("unknown model-list api %q", api)
	}
	var names []string
	seen := make(map[string]bool, len(raw))
	for _, n := range raw {
		if usableModelName(n) && !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	if len(names) == 0 {
		return nil, errEmptyList
	}
	return names, nil
}

func usableModelName(s string) bool {
	if s == "" || len(s) > MaxModelNameBytes || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}
