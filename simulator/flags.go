package simulator

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/alecthomas/kingpin/v2"
)

// DefaultListenAddress is where `llm-prober simulate` listens by default.
const DefaultListenAddress = "127.0.0.1:8300"

// Flags holds the command-line flags of the simulate command. Only flags
// the user set override the configuration file.
type Flags struct {
	Listen     string
	ConfigFile string
	// GRPCListen is where Triton's gRPC API is served; empty turns it off.
	GRPCListen string

	overrides []flagOverride
}

type flagOverride struct {
	set   *bool
	apply func(*Config)
}

// RegisterFlags adds the simulator's flags to cmd.
func RegisterFlags(cmd *kingpin.CmdClause) *Flags {
	f := &Flags{}
	cmd.Flag("listen", "Address the simulated LLM server listens on.").
		Default(DefaultListenAddress).StringVar(&f.Listen)
	cmd.Flag("grpc-listen", "Address the simulated Triton gRPC API listens on; empty turns it off.").
		Default(DefaultGRPCListenAddress).StringVar(&f.GRPCListen)
	cmd.Flag("config.file", "Optional simulator YAML file (see docs/simulator.md); flags given explicitly override it.").
		StringVar(&f.ConfigFile)

	d := DefaultConfig()
	// override registers a flag whose value is copied into the Config only
	// when the user gave it, so a file's value is not hidden by a default.
	override := func(name, help string, def string, bind func(*kingpin.FlagClause) func(*Config)) {
		o := flagOverride{set: new(bool)}
		fc := cmd.Flag(name, help).Default(def).IsSetByUser(o.set)
		o.apply = bind(fc)
		f.overrides = append(f.overrides, o)
	}
	dur := func(name, help string, def time.Duration, field func(*Config) *time.Duration) {
		override(name, help, def.String(), func(fc *kingpin.FlagClause) func(*Config) {
			v := fc.Duration()
			return func(c *Config) { *field(c) = *v }
		})
	}
	flt := func(name, help string, def float64, field func(*Config) *float64) {
		override(name, help, fmt.Sprint(def), func(fc *kingpin.FlagClause) func(*Config) {
			v := fc.Float64()
			return func(c *Config) { *field(c) = *v }
		})
	}
	integer := func(name, help string, def int, field func(*Config) *int) {
		override(name, help, fmt.Sprint(def), func(fc *kingpin.FlagClause) func(*Config) {
			v := fc.Int()
			return func(c *Config) { *field(c) = *v }
		})
	}

	override("seed", "Seed of every random draw (output, jitter, faults).", fmt.Sprint(d.Seed),
		func(fc *kingpin.FlagClause) func(*Config) {
			v := fc.Int64()
			return func(c *Config) { c.Seed = *v }
		})
	override("model", "Served model name (repeatable); the first labels /metrics.", "",
		func(fc *kingpin.FlagClause) func(*Config) {
			v := fc.Strings()
			return func(c *Config) { c.ServedModelNames = append([]string(nil), *v...) }
		})

	integer("max-model-len", "Context length: the limit on prompt + max_tokens (llama.cpp: on the prompt).", d.MaxModelLen,
		func(c *Config) *int { return &c.MaxModelLen })
	override("openai-server", "Server the OpenAI-compatible routes answer as: vllm, llamacpp (timings, context check and error shapes of llama-server), tgi or ollama (their stream errors).", d.OpenAIServer,
		func(fc *kingpin.FlagClause) func(*Config) {
			v := fc.Enum(OpenAIServerVLLM, OpenAIServerLlamaCpp, OpenAIServerTGI, OpenAIServerOllama)
			return func(c *Config) { c.OpenAIServer = *v }
		})

	dur("latency.ttft-base", "Fixed part of the time to first token.", d.Latency.TTFTBase,
		func(c *Config) *time.Duration { return &c.Latency.TTFTBase })
	dur("latency.prefill-per-token", "Prefill time per input token.", d.Latency.PrefillPerToken,
		func(c *Config) *time.Duration { return &c.Latency.PrefillPerToken })
	dur("latency.decode-base", "Decode time per output token with one running sequence.", d.Latency.DecodeBase,
		func(c *Config) *time.Duration { return &c.Latency.DecodeBase })
	dur("latency.decode-per-running", "Extra decode time per token for each other running sequence.", d.Latency.DecodePerRunning,
		func(c *Config) *time.Duration { return &c.Latency.DecodePerRunning })
	flt("latency.jitter", "Relative jitter of every planned duration (0..1).", d.Latency.Jitter,
		func(c *Config) *float64 { return &c.Latency.Jitter })

	integer("scheduler.max-running", "Sequences decoded at once; the rest queue.", d.Scheduler.MaxRunning,
		func(c *Config) *int { return &c.Scheduler.MaxRunning })
	integer("scheduler.max-queue", "Waiting requests beyond which new ones get 503 (429 on TGI's routes).", d.Scheduler.MaxQueue,
		func(c *Config) *int { return &c.Scheduler.MaxQueue })
	integer("scheduler.kv-cache-capacity-tokens", "KV-cache capacity in tokens.", d.Scheduler.KVCacheCapacityTokens,
		func(c *Config) *int { return &c.Scheduler.KVCacheCapacityTokens })

	integer("output.mean-tokens", "Mean natural answer length in tokens (when ignore_eos is false).", d.Output.MeanTokens,
		func(c *Config) *int { return &c.Output.MeanTokens })
	integer("output.tokens-per-chunk", "Tokens per streamed chunk.", d.Output.TokensPerChunk,
		func(c *Config) *int { return &c.Output.TokensPerChunk })
	integer("output.reasoning-tokens", "Reasoning tokens sent as reasoning_content before content (chat).", d.Output.ReasoningTokens,
		func(c *Config) *int { return &c.Output.ReasoningTokens })
	override("output.answer", "Fixed content of every chat and completions answer (words, one token each) instead of random words.", d.Output.Answer,
		func(fc *kingpin.FlagClause) func(*Config) {
			v := fc.String()
			return func(c *Config) { c.Output.Answer = *v }
		})
	integer("rate-limit.requests-per-minute", "Send OpenAI's x-ratelimit-*-requests headers for this many requests per window (0: none).", d.RateLimit.RequestsPerMinute,
		func(c *Config) *int { return &c.RateLimit.RequestsPerMinute })
	integer("rate-limit.tokens-per-minute", "Send OpenAI's x-ratelimit-*-tokens headers for this many tokens (prompt + max_tokens) per window (0: none).", d.RateLimit.TokensPerMinute,
		func(c *Config) *int { return &c.RateLimit.TokensPerMinute })
	override("rate-limit.enforce", "Answer 429 with Retry-After when a request does not fit in the window's rest.", "false",
		func(fc *kingpin.FlagClause) func(*Config) {
			v := fc.Bool()
			return func(c *Config) { c.RateLimit.Enforce = *v }
		})
	override("output.role-chunk", "Role-only first chat chunk: immediate, with_first_token or off.", d.Output.RoleChunk,
		func(fc *kingpin.FlagClause) func(*Config) {
			v := fc.Enum(RoleChunkImmediate, RoleChunkWithFirstToken, RoleChunkOff)
			return func(c *Config) { c.Output.RoleChunk = *v }
		})

	override("fault.close-after-stream", "Close the connection after every streamed answer while its head allowed keep-alive, as llama.cpp's llama-server does.", "false",
		func(fc *kingpin.FlagClause) func(*Config) {
			v := fc.Bool()
			return func(c *Config) { c.Faults.CloseAfterStream = *v }
		})
	dur("fault.close-after-stream-delay", "How long after a streamed answer's last byte the connection closes.", d.Faults.CloseAfterStreamDelay,
		func(c *Config) *time.Duration { return &c.Faults.CloseAfterStreamDelay })
	dur("fault.model-load-delay", "Load the model on demand as Ollama does: the first request, and the first after an idle unload, wait this long (0: always loaded).", d.Faults.ModelLoadDelay,
		func(c *Config) *time.Duration { return &c.Faults.ModelLoadDelay })
	dur("fault.model-keep-alive", "How long an idle model stays loaded (Ollama's OLLAMA_KEEP_ALIVE); 0 unloads at once, negative never.", d.Faults.ModelKeepAlive,
		func(c *Config) *time.Duration { return &c.Faults.ModelKeepAlive })
	dur("fault.sse-ping-interval", "Send an SSE comment \": ping - <time>\" this often on OpenAI-compatible streams, as sse-starlette does (0: never).", d.Faults.SSEPingInterval,
		func(c *Config) *time.Duration { return &c.Faults.SSEPingInterval })
	override("fault.disconnect-release", "What happens to the slot of a running request whose client goes away: 0s frees it at once, a duration that much later, leak never (until POST /debug/slots/release).", d.Faults.DisconnectRelease,
		func(fc *kingpin.FlagClause) func(*Config) {
			v := fc.String()
			return func(c *Config) { c.Faults.DisconnectRelease = *v }
		})
	override("fault.omit-done", "End OpenAI-compatible streams without data: [DONE].", "false",
		func(fc *kingpin.FlagClause) func(*Config) {
			v := fc.Bool()
			return func(c *Config) { c.Faults.OmitDone = *v }
		})
	flt("fault.error-rate", "Probability of an immediate HTTP error.", 0,
		func(c *Config) *float64 { return &c.Faults.ErrorRate })
	integer("fault.error-status", "HTTP status of injected errors.", d.Faults.ErrorStatus,
		func(c *Config) *int { return &c.Faults.ErrorStatus })
	flt("fault.reset-rate", "Probability of a connection reset mid-stream.", 0,
		func(c *Config) *float64 { return &c.Faults.ResetRate })
	flt("fault.stall-rate", "Probability of a stall mid-stream.", 0,
		func(c *Config) *float64 { return &c.Faults.StallRate })
	dur("fault.stall-duration", "Length of an injected stall.", d.Faults.StallDuration,
		func(c *Config) *time.Duration { return &c.Faults.StallDuration })
	flt("fault.malformed-rate", "Probability of a malformed (invalid JSON) chunk.", 0,
		func(c *Config) *float64 { return &c.Faults.MalformedRate })
	flt("fault.slow-first-token-rate", "Probability of a delayed first token.", 0,
		func(c *Config) *float64 { return &c.Faults.SlowFirstTokenRate })
	dur("fault.slow-first-token-delay", "Extra delay of a slow first token.", d.Faults.SlowFirstTokenDelay,
		func(c *Config) *time.Duration { return &c.Faults.SlowFirstTokenDelay })
	flt("fault.truncate-rate", "Probability of a stream closed without [DONE].", 0,
		func(c *Config) *float64 { return &c.Faults.TruncateRate })
	flt("fault.error-event-rate", "Probability of a mid-stream error event.", 0,
		func(c *Config) *float64 { return &c.Faults.ErrorEventRate })

	override("prefix-cache", "Model a prefix cache: cached prompt blocks skip their prefill (per request: X-Sim-Options prefix_cache=true|false).", "false",
		func(fc *kingpin.FlagClause) func(*Config) {
			v := fc.Bool()
			return func(c *Config) { c.PrefixCache.Enabled = *v }
		})
	override("metrics.legacy-names", "Also expose the older vLLM metric names.", "false",
		func(fc *kingpin.FlagClause) func(*Config) {
			v := fc.Bool()
			return func(c *Config) { c.Metrics.LegacyNames = *v }
		})
	integer("metrics.spec-decode-tokens", "Draft tokens a speculative decoder proposes per decode step, for vLLM's spec-decode counters (0: none).", d.Metrics.SpecDecodeTokens,
		func(c *Config) *int { return &c.Metrics.SpecDecodeTokens })
	flt("metrics.spec-decode-acceptance", "Share of draft tokens counted accepted (0..1).", d.Metrics.SpecDecodeAcceptance,
		func(c *Config) *float64 { return &c.Metrics.SpecDecodeAcceptance })
	override("metrics.naming", "Metric names /metrics uses: vllm, triton, tgi, sglang or trtllm (also at /prometheus/metrics).", d.Metrics.Naming,
		func(fc *kingpin.FlagClause) func(*Config) {
			v := fc.Enum(MetricsNamings()...)
			return func(c *Config) { c.Metrics.Naming = *v }
		})
	return f
}

// Config builds the configuration: defaults, then the file, then the
// flags the user set explicitly; the result is validated.
func (f *Flags) Config() (Config, error) {
	cfg := DefaultConfig()
	if f.ConfigFile != "" {
		var err error
		if cfg, err = LoadConfigFile(f.ConfigFile); err != nil {
			return Config{}, err
		}
	}
	for _, o := range f.overrides {
		if *o.set {
			o.apply(&cfg)
		}
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, fmt.Errorf("invalid simulator configuration: %w", err)
	}
	return cfg, nil
}

// Run builds the simulator from the flags and serves its HTTP API, and its
// Triton gRPC API unless --grpc-listen is empty, until ctx ends. Either
// listener failing stops the other.
func Run(ctx context.Context, f *Flags, logger *slog.Logger) error {
	cfg, err := f.Config()
	if err != nil {
		return err
	}
	srv, err := New(cfg, logger)
	if err != nil {
		return err
	}
	logger.Info("Simulated LLM server listening", "address", f.Listen)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	grpcErr := make(chan error, 1)
	if f.GRPCListen != "" {
		go func() {
			err := srv.ListenAndServeGRPC(ctx, f.GRPCListen)
			if err != nil {
				cancel()
			}
			grpcErr <- err
		}()
	} else {
		grpcErr <- nil
	}
	httpErr := srv.ListenAndServe(ctx, f.Listen)
	if httpErr != nil {
		httpErr = fmt.Errorf("HTTP: %w", httpErr)
	}
	cancel()
	if err := <-grpcErr; err != nil {
		return errors.Join(httpErr, fmt.Errorf("gRPC: %w", err))
	}
	return httpErr
}
