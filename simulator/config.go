package simulator

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// Config is the whole simulator configuration. Zero values are not
// meaningful: start from DefaultConfig (LoadConfigFile does).
type Config struct {
	// Seed makes every random draw (output length and text, jitter, fault
	// draws) reproducible for the same sequence of requests.
	Seed int64 `yaml:"seed"`
	// ServedModelNames are the names /v1/models lists and requests may use;
	// the first is the model_name label of /metrics, as vLLM does.
	ServedModelNames []string `yaml:"served_model_names"`
	// MaxModelLen bounds prompt + max_tokens, answered with vLLM's 400.
	MaxModelLen int `yaml:"max_model_len"`
	// MaxRequestBodyBytes bounds every request body.
	MaxRequestBodyBytes int64 `yaml:"max_request_body_bytes"`
	// ShutdownTimeout bounds how long in-flight requests may finish after
	// the serving context is cancelled; they are aborted afterwards.
	ShutdownTimeout time.Duration `yaml:"shutdown_timeout"`
	// OpenAIServer is the server the OpenAI-compatible routes answer as:
	// vllm, llamacpp (llama.cpp's llama-server: its timings object,
	// context check, usage placement and error shapes), tgi or ollama
	// (their stream errors and framing; docs/simulator.md).
	OpenAIServer string `yaml:"openai_server"`

	Latency     LatencyConfig     `yaml:"latency"`
	Scheduler   SchedulerConfig   `yaml:"scheduler"`
	Output      OutputConfig      `yaml:"output"`
	Faults      FaultConfig       `yaml:"faults"`
	GroundTruth GroundTruthConfig `yaml:"ground_truth"`
	Metrics     MetricsConfig     `yaml:"metrics"`
	// RateLimit makes the OpenAI-compatible routes send rate-limit
	// headers (ratelimit.go); off when both limits are 0.
	RateLimit RateLimitConfig `yaml:"rate_limit"`
	// PrefixCache models automatic prefix caching (prefixcache.go).
	PrefixCache PrefixCacheConfig `yaml:"prefix_cache"`
}

// LatencyConfig is the latency model; see docs/simulator.md for formulas.
type LatencyConfig struct {
	TTFTBase         time.Duration `yaml:"ttft_base"`
	PrefillPerToken  time.Duration `yaml:"prefill_per_token"`
	DecodeBase       time.Duration `yaml:"decode_base"`
	DecodePerRunning time.Duration `yaml:"decode_per_running"`
	// Jitter is relative: every planned duration is multiplied by a factor
	// drawn uniformly from [1-Jitter, 1+Jitter].
	Jitter float64 `yaml:"jitter"`
}

// SchedulerConfig bounds the simulated engine like continuous batching does.
type SchedulerConfig struct {
	MaxRunning            int `yaml:"max_running"`
	MaxQueue              int `yaml:"max_queue"`
	KVCacheCapacityTokens int `yaml:"kv_cache_capacity_tokens"`
}

// OutputConfig shapes answers when the request does not say otherwise.
type OutputConfig struct {
	// MeanTokens is the mean "natural length" (where EOS would occur).
	MeanTokens int `yaml:"mean_tokens"`
	// LengthSpread is relative: the natural length is uniform in
	// MeanTokens*[1-LengthSpread, 1+LengthSpread], at least 1.
	LengthSpread float64 `yaml:"length_spread"`
	// RoleChunk is immediate, with_first_token or off.
	RoleChunk           string `yaml:"role_chunk"`
	TokensPerChunk      int    `yaml:"tokens_per_chunk"`
	ReasoningTokens     int    `yaml:"reasoning_tokens"`
	SeparateFinishChunk bool   `yaml:"separate_finish_chunk"`
	// Answer, when set, is every chat and completions answer's content
	// (words, one token each) in place of random words (answer.go).
	Answer string `yaml:"answer"`
	// CompletionsDefaultMaxTokens is what /v1/completions uses without
	// max_tokens (16 on vLLM).
	CompletionsDefaultMaxTokens int `yaml:"completions_default_max_tokens"`
}

// FaultConfig holds random fault rates (probabilities 0..1 per request).
// Requests carrying an X-Sim-Fault header get exactly the faults it names
// instead.
type FaultConfig struct {
	ErrorRate            float64       `yaml:"error_rate"`
	ErrorStatus          int           `yaml:"error_status"`
	ResetRate            float64       `yaml:"reset_rate"`
	StallRate            float64       `yaml:"stall_rate"`
	StallDuration        time.Duration `yaml:"stall_duration"`
	MalformedRate        float64       `yaml:"malformed_rate"`
	SlowFirstTokenRate   float64       `yaml:"slow_first_token_rate"`
	SlowFirstTokenDelay  time.Duration `yaml:"slow_first_token_delay"`
	TruncateRate         float64       `yaml:"truncate_rate"`
	ErrorEventRate       float64       `yaml:"error_event_rate"`
	ErrorEventStatusCode int           `yaml:"error_event_status"`
	// CloseAfterStream closes the connection after every streamed answer
	// although the response head allowed keep-alive, as llama.cpp's
	// llama-server does (docs/simulator.md): a client that reuses the
	// connection writes its next request into a closed socket.
	// CloseAfterStreamDelay is how long after the answer's last byte the
	// close comes; the wider it is, the more often a back-to-back client
	// reuses the connection before it notices.
	CloseAfterStream      bool          `yaml:"close_after_stream"`
	CloseAfterStreamDelay time.Duration `yaml:"close_after_stream_delay"`
	// ModelLoadDelay, when positive, makes the model load on demand as
	// Ollama's does: the first request after start, and the first after
	// the model sat idle for ModelKeepAlive, waits this long before it is
	// scheduled, and Ollama's load_duration reports the wait. Requests
	// arriving during a load wait for the same load.
	ModelLoadDelay time.Duration `yaml:"model_load_delay"`
	// ModelKeepAlive is how long an idle model stays loaded (Ollama's
	// OLLAMA_KEEP_ALIVE, 5m by default): 0 unloads it as soon as no
	// request is in flight, a negative value never does.
	ModelKeepAlive time.Duration `yaml:"model_keep_alive"`
	// SSEPingInterval, when positive, sends an SSE comment line as
	// sse-starlette's EventSourceResponse does (": ping - <time>") every
	// interval on OpenAI-compatible streams, from the response head on.
	SSEPingInterval time.Duration `yaml:"sse_ping_interval"`
	// OmitDone ends OpenAI-compatible streams without "data: [DONE]" after
	// a complete answer, as some servers do (docs/simulator.md).
	OmitDone bool `yaml:"omit_done"`
	// DisconnectRelease is what happens to the slot of a running request
	// whose client goes away: empty or 0s frees it at once (vLLM),
	// a duration frees it that much later, "leak" never does (until
	// POST /debug/slots/release). X-Sim-Options' disconnect_release
	// overrides it per request.
	DisconnectRelease string `yaml:"disconnect_release"`
}

// GroundTruthConfig bounds the per-request ground-truth store.
type GroundTruthConfig struct {
	Capacity          int `yaml:"capacity"`
	MaxChunksPerEntry int `yaml:"max_chunks_per_request"`
}

// MetricsConfig selects the exposed metric names.
type MetricsConfig struct {
	// Naming picks whose metric names /metrics uses: vllm, triton, tgi,
	// sglang or trtllm (see metrics.go; trtllm also at /prometheus/metrics,
	// trtllm-serve's path); the engine state behind them is the same.
	Naming string `yaml:"naming"`
	// LegacyNames also exposes vllm:gpu_cache_usage_perc and
	// vllm:time_per_output_token_seconds, the names older vLLM releases use.
	LegacyNames bool `yaml:"legacy_names"`
	// SpecDecodeTokens is the draft tokens a speculative decoder proposes
	// per decode step, counted in vllm:spec_decode_num_draft_tokens_total
	// (vLLM naming; 0: no speculative decoding, no such counters); the
	// part SpecDecodeAcceptance of them is counted accepted.
	SpecDecodeTokens     int     `yaml:"spec_decode_tokens"`
	SpecDecodeAcceptance float64 `yaml:"spec_decode_acceptance"`
}

// Servers the OpenAI-compatible routes can answer as.
const (
	OpenAIServerVLLM     = "vllm"
	OpenAIServerLlamaCpp = "llamacpp"
	// OpenAIServerTGI: TGI's OpenAI routes (in-stream error events,
	// `data:` framing, finish_reason "" on completions chunks).
	OpenAIServerTGI = "tgi"
	// OpenAIServerOllama: Ollama's /v1 routes (mid-stream errors dropped,
	// the stream ends without [DONE]).
	OpenAIServerOllama = "ollama"
)

// Role chunk modes.
const (
	RoleChunkImmediate      = "immediate"
	RoleChunkWithFirstToken = "with_first_token"
	RoleChunkOff            = "off"
)

// DefaultConfig returns a configuration that looks like a small, fast
// vLLM deployment: about 30 ms TTFT and 8 ms per token when idle.
func DefaultConfig() Config {
	return Config{
		Seed:                1,
		ServedModelNames:    []string{"sim-llm"},
		MaxModelLen:         8192,
		MaxRequestBodyBytes: 4 << 20,
		ShutdownTimeout:     5 * time.Second,
		OpenAIServer:        OpenAIServerVLLM,
		Latency: LatencyConfig{
			TTFTBase:         30 * time.Millisecond,
			PrefillPerToken:  50 * time.Microsecond,
			DecodeBase:       8 * time.Millisecond,
			DecodePerRunning: 300 * time.Microsecond,
			Jitter:           0.05,
		},
		Scheduler: SchedulerConfig{
			MaxRunning:            32,
			MaxQueue:              1024,
			KVCacheCapacityTokens: 65536,
		},
		Output: OutputConfig{
			MeanTokens:                  128,
			LengthSpread:                0.5,
			RoleChunk:                   RoleChunkImmediate,
			TokensPerChunk:              1,
			ReasoningTokens:             0,
			CompletionsDefaultMaxTokens: 16,
		},
		Faults: FaultConfig{
			ErrorStatus:         503,
			StallDuration:       2 * time.Second,
			SlowFirstTokenDelay: time.Second,
			// Long enough that a client sending back to back almost
			// always writes into the connection before it closes.
			CloseAfterStreamDelay: 2 * time.Millisecond,
			ErrorEventStatusCode:  500,
			ModelKeepAlive:        5 * time.Minute,
		},
		GroundTruth: GroundTruthConfig{
			Capacity:          10000,
			MaxChunksPerEntry: 4096,
		},
		Metrics: MetricsConfig{Naming: NamingVLLM, SpecDecodeAcceptance: 0.7},
		// Off by default, so that repeated prompts keep the latency model
		// of docs/simulator.md; vLLM's block size and a KV-sized budget.
		PrefixCache: PrefixCacheConfig{BlockTokens: 16, CapacityTokens: 65536},
	}
}

// fieldError names the YAML path of an invalid value so that
// LoadConfigFile can point at its line.
type fieldError struct {
	path string
	msg  string
}

func (e *fieldError) Error() string { return e.path + ": " + e.msg }

// Validate reports every invalid value, each naming its YAML key.
func (c Config) Validate() error {
	var errs []error
	bad := func(path, format string, args ...any) {
		errs = append(errs, &fieldError{path: path, msg: fmt.Sprintf(format, args...)})
	}
	rate := func(path string, v float64) {
		if !(v >= 0 && v <= 1) {
			bad(path, "must be between 0 and 1, got %v", v)
		}
	}
	nonNeg := func(path string, d time.Duration) {
		if d < 0 {
			bad(path, "must not be negative, got %s", d)
		}
	}
	if len(c.ServedModelNames) == 0 {
		bad("served_model_names", "at least one model name is required")
	}
	seen := map[string]bool{}
	for i, n := range c.ServedModelNames {
		if n == "" || len(n) > 256 {
			bad(fmt.Sprintf("served_model_names[%d]", i), "must be 1..256 characters")
		}
		if seen[n] {
			bad(fmt.Sprintf("served_model_names[%d]", i), "duplicate name %q", n)
		}
		seen[n] = true
	}
	if c.MaxModelLen < 2 || c.MaxModelLen > 1<<24 {
		bad("max_model_len", "must be between 2 and %d, got %d", 1<<24, c.MaxModelLen)
	}
	if c.MaxRequestBodyBytes < 1024 || c.MaxRequestBodyBytes > 1<<30 {
		bad("max_request_body_bytes", "must be between 1024 and 1GiB, got %d", c.MaxRequestBodyBytes)
	}
	if c.ShutdownTimeout <= 0 || c.ShutdownTimeout > 10*time.Minute {
		bad("shutdown_timeout", "must be in (0, 10m], got %s", c.ShutdownTimeout)
	}
	switch c.OpenAIServer {
	case OpenAIServerVLLM, OpenAIServerLlamaCpp, OpenAIServerTGI, OpenAIServerOllama:
	default:
		bad("openai_server", "must be %s, %s, %s or %s, got %q", OpenAIServerVLLM, OpenAIServerLlamaCpp, OpenAIServerTGI, OpenAIServerOllama, c.OpenAIServer)
	}

	l := c.Latency
	nonNeg("latency.ttft_base", l.TTFTBase)
	nonNeg("latency.prefill_per_token", l.PrefillPerToken)
	nonNeg("latency.decode_base", l.DecodeBase)
	nonNeg("latency.decode_per_running", l.DecodePerRunning)
	if !(l.Jitter >= 0 && l.Jitter < 1) {
		bad("latency.jitter", "must be in [0, 1), got %v", l.Jitter)
	}

	s := c.Scheduler
	if s.MaxRunning < 1 || s.MaxRunning > 1<<16 {
		bad("scheduler.max_running", "must be between 1 and 65536, got %d", s.MaxRunning)
	}
	if s.MaxQueue < 0 || s.MaxQueue > 1<<20 {
		bad("scheduler.max_queue", "must be between 0 and 1048576, got %d", s.MaxQueue)
	}
	if s.KVCacheCapacityTokens < 1 {
		bad("scheduler.kv_cache_capacity_tokens", "must be positive, got %d", s.KVCacheCapacityTokens)
	}

	o := c.Output
	if o.MeanTokens < 1 {
		bad("output.mean_tokens", "must be positive, got %d", o.MeanTokens)
	}
	if !(o.LengthSpread >= 0 && o.LengthSpread <= 1) {
		bad("output.length_spread", "must be between 0 and 1, got %v", o.LengthSpread)
	}
	if _, err := parseRoleChunk(o.RoleChunk); err != nil {
		bad("output.role_chunk", "%v", err)
	}
	if o.TokensPerChunk < 1 || o.TokensPerChunk > maxTokensPerChunk {
		bad("output.tokens_per_chunk", "must be between 1 and %d, got %d", maxTokensPerChunk, o.TokensPerChunk)
	}
	if o.ReasoningTokens < 0 || o.ReasoningTokens > c.MaxModelLen {
		bad("output.reasoning_tokens", "must be between 0 and max_model_len, got %d", o.ReasoningTokens)
	}
	if len(o.Answer) > maxHeaderValueLen {
		bad("output.answer", "at most %d bytes", maxHeaderValueLen)
	}
	if rl := c.RateLimit; rl.RequestsPerMinute < 0 || rl.TokensPerMinute < 0 || rl.Window < 0 {
		bad("rate_limit", "limits and window must not be negative")
	}
	if o.CompletionsDefaultMaxTokens < 1 {
		bad("output.completions_default_max_tokens", "must be positive, got %d", o.CompletionsDefaultMaxTokens)
	}

	f := c.Faults
	rate("faults.error_rate", f.ErrorRate)
	rate("faults.reset_rate", f.ResetRate)
	rate("faults.stall_rate", f.StallRate)
	rate("faults.malformed_rate", f.MalformedRate)
	rate("faults.slow_first_token_rate", f.SlowFirstTokenRate)
	rate("faults.truncate_rate", f.TruncateRate)
	rate("faults.error_event_rate", f.ErrorEventRate)
	if f.ErrorStatus < 400 || f.ErrorStatus > 599 {
		bad("faults.error_status", "must be an HTTP error status 400..599, got %d", f.ErrorStatus)
	}
	if f.ErrorEventStatusCode < 400 || f.ErrorEventStatusCode > 599 {
		bad("faults.error_event_status", "must be an HTTP error status 400..599, got %d", f.ErrorEventStatusCode)
	}
	if f.StallDuration < 0 || f.StallDuration > maxFaultDuration {
		bad("faults.stall_duration", "must be in [0, %s], got %s", maxFaultDuration, f.StallDuration)
	}
	if f.CloseAfterStreamDelay < 0 || f.CloseAfterStreamDelay > time.Second {
		bad("faults.close_after_stream_delay", "must be in [0, 1s], got %s", f.CloseAfterStreamDelay)
	}
	if f.SlowFirstTokenDelay < 0 || f.SlowFirstTokenDelay > maxFaultDuration {
		bad("faults.slow_first_token_delay", "must be in [0, %s], got %s", maxFaultDuration, f.SlowFirstTokenDelay)
	}
	if f.ModelLoadDelay < 0 || f.ModelLoadDelay > maxFaultDuration {
		bad("faults.model_load_delay", "must be in [0, %s], got %s", maxFaultDuration, f.ModelLoadDelay)
	}
	if f.ModelKeepAlive > 24*time.Hour {
		bad("faults.model_keep_alive", "must be at most 24h (negative: never unload), got %s", f.ModelKeepAlive)
	}
	if f.SSEPingInterval < 0 || (f.SSEPingInterval > 0 && f.SSEPingInterval < minPingInterval) || f.SSEPingInterval > maxFaultDuration {
		bad("faults.sse_ping_interval", "must be 0 (off) or in [%s, %s], got %s", minPingInterval, maxFaultDuration, f.SSEPingInterval)
	}
	if _, err := parseSlotRelease(f.DisconnectRelease); err != nil {
		bad("faults.disconnect_release", "want leak or a duration in [0, %s], got %q", maxFaultDuration, f.DisconnectRelease)
	}

	g := c.GroundTruth
	if g.Capacity < 1 || g.Capacity > 1<<20 {
		bad("ground_truth.capacity", "must be between 1 and 1048576, got %d", g.Capacity)
	}
	if g.MaxChunksPerEntry < 1 || g.MaxChunksPerEntry > 1<<20 {
		bad("ground_truth.max_chunks_per_request", "must be between 1 and 1048576, got %d", g.MaxChunksPerEntry)
	}
	c.PrefixCache.validate(bad)
	if err := validNaming(c.Metrics.Naming); c.Metrics.Naming != "" && err != nil {
		bad("metrics.naming", "%v", err)
	}
	if m := c.Metrics; m.SpecDecodeTokens < 0 || m.SpecDecodeTokens > 64 {
		bad("metrics.spec_decode_tokens", "must be between 0 and 64, got %d", m.SpecDecodeTokens)
	}
	if a := c.Metrics.SpecDecodeAcceptance; !(a >= 0 && a <= 1) {
		bad("metrics.spec_decode_acceptance", "must be between 0 and 1, got %v", a)
	}
	return errors.Join(errs...)
}

// LoadConfigFile reads a simulator YAML file over DefaultConfig. Unknown
// keys are errors; every error names file:line.
func LoadConfigFile(path string) (Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return Config{}, fmt.Errorf("reading simulator config: %w", err)
	}
	return parseConfig(path, data)
}

var yamlLineRE = regexp.MustCompile(`^line (\d+): `)

func parseConfig(path string, data []byte) (Config, error) {
	cfg := DefaultConfig()
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
		var te *yaml.TypeError
		if errors.As(err, &te) {
			msgs := make([]string, 0, len(te.Errors))
			for _, e := range te.Errors {
				msgs = append(msgs, yamlLineRE.ReplaceAllString(e, path+":$1: "))
			}
			return Config{}, errors.New(strings.Join(msgs, "\n"))
		}
		// Syntax errors read "yaml: line N: ...".
		return Config{}, errors.New(yamlLineRE.ReplaceAllString(strings.TrimPrefix(err.Error(), "yaml: "), path+":$1: "))
	}
	if err := cfg.Validate(); err != nil {
		var root yaml.Node
		// The document decoded above, so this cannot fail in practice; an
		// empty root only loses line numbers.
		_ = yaml.Unmarshal(data, &root)
		return Config{}, locateErrors(path, &root, err)
	}
	return cfg, nil
}

// locateErrors prefixes each validation error with file:line of its key.
func locateErrors(path string, root *yaml.Node, err error) error {
	var list []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		list = j.Unwrap()
	} else {
		list = []error{err}
	}
	out := make([]error, 0, len(list))
	for _, e := range list {
		var fe *fieldError
		if errors.As(e, &fe) {
			if line := lineOf(root, fe.path); line > 0 {
				out = append(out, fmt.Errorf("%s:%d: %w", path, line, e))
				continue
			}
		}
		out = append(out, fmt.Errorf("%s: %w", path, e))
	}
	return errors.Join(out...)
}

// lineOf finds the line of a dotted key path such as "latency.jitter" or
// "served_model_names[1]"; 0 when the key is not in the file (a default).
func lineOf(n *yaml.Node, path string) int {
	if n == nil {
		return 0
	}
	if n.Kind == yaml.DocumentNode {
		if len(n.Content) == 0 {
			return 0
		}
		n = n.Content[0]
	}
	line := 0
	for _, part := range strings.Split(path, ".") {
		idx := -1
		if i := strings.IndexByte(part, '['); i >= 0 && strings.HasSuffix(part, "]") {
			v, err := strconv.Atoi(part[i+1 : len(part)-1])
			if err != nil {
				return line
			}
			idx, part = v, part[:i]
		}
		if n.Kind != yaml.MappingNode {
			return line
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == part {
				line, next = n.Content[i].Line, n.Content[i+1]
				break
			}
		}
		if next == nil {
			return line
		}
		n = next
		if idx >= 0 {
			if n.Kind != yaml.SequenceNode || idx >= len(n.Content) {
				return line
			}
			n = n.Content[idx]
			line = n.Line
		}
	}
	return line
}
