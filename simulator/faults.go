package simulator

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"time"
)

// Header names understood by every protocol front-end.
const (
	HeaderRequestID = "X-Request-Id"
	HeaderFault     = "X-Sim-Fault"
	HeaderOptions   = "X-Sim-Options"
)

const (
	maxFaultDuration  = 10 * time.Minute
	maxFaultAfter     = 1 << 20
	maxHeaderValueLen = 1024
	maxFaultsPerReq   = 8
	maxTokensPerChunk = 1024
	// minPingInterval keeps SSE keep-alive comments from flooding a stream.
	minPingInterval = time.Millisecond
	// defaultModelLoadDelay is what model_load waits when neither the
	// header nor faults.model_load_delay says.
	defaultModelLoadDelay = 2 * time.Second
)

// Fault kinds. The grammar is in docs/simulator.md.
const (
	faultError          = "error"
	faultReset          = "reset"
	faultStall          = "stall"
	faultMalformed      = "malformed"
	faultSlowFirstToken = "slow_first_token"
	faultTruncate       = "truncate"
	faultErrorEvent     = "error_event"
	// Behaviours of real servers (docs/simulator.md, "Behaviours taken
	// from real servers").
	faultQueueFull = "queue_full"
	faultNoDone    = "no_done"
	faultModelLoad = "model_load"
	faultSSEPing   = "sse_ping"
)

// fault is one injected misbehaviour. after counts output tokens already
// flushed when a mid-stream fault fires.
type fault struct {
	kind   string
	after  int
	dur    time.Duration
	status int
}

// String is the canonical header form, also used in ground truth.
func (f fault) String() string {
	switch f.kind {
	case faultError:
		return fmt.Sprintf("error:status=%d", f.status)
	case faultStall:
		return fmt.Sprintf("stall:after=%d,for=%s", f.after, f.dur)
	case faultSlowFirstToken:
		return fmt.Sprintf("slow_first_token:delay=%s", f.dur)
	case faultErrorEvent:
		return fmt.Sprintf("error_event:after=%d,status=%d", f.after, f.status)
	case faultQueueFull, faultNoDone:
		return f.kind
	case faultModelLoad:
		return fmt.Sprintf("model_load:delay=%s", f.dur)
	case faultSSEPing:
		return fmt.Sprintf("sse_ping:every=%s", f.dur)
	default:
		return fmt.Sprintf("%s:after=%d", f.kind, f.after)
	}
}

// faultSet is the faults one request suffers, at most one of each kind.
type faultSet []fault

func (fs faultSet) get(kind string) (fault, bool) {
	for _, f := range fs {
		if f.kind == kind {
			return f, true
		}
	}
	return fault{}, false
}

func (fs faultSet) strings() []string {
	out := make([]string, 0, len(fs))
	for _, f := range fs {
		out = append(out, f.String())
	}
	return out
}

// parseFaultHeader parses X-Sim-Fault. defaults supplies the status and
// durations a fault takes when the header leaves them out. It never
// panics on any input (see FuzzParseFaultHeader).
func parseFaultHeader(v string, defaults FaultConfig) (faultSet, error) {
	if len(v) > maxHeaderValueLen {
		return nil, fmt.Errorf("%s: longer than %d bytes", HeaderFault, maxHeaderValueLen)
	}
	v = strings.TrimSpace(v)
	if v == "none" {
		return faultSet{}, nil
	}
	if v == "" {
		return nil, fmt.Errorf("%s: empty (use \"none\" for no faults)", HeaderFault)
	}
	parts := strings.Split(v, ";")
	if len(parts) > maxFaultsPerReq {
		return nil, fmt.Errorf("%s: more than %d faults", HeaderFault, maxFaultsPerReq)
	}
	fs := make(faultSet, 0, len(parts))
	for _, p := range parts {
		f, err := parseFault(strings.TrimSpace(p), defaults)
		if err != nil {
			return nil, fmt.Errorf("%s: %q: %w", HeaderFault, p, err)
		}
		if _, dup := fs.get(f.kind); dup {
			return nil, fmt.Errorf("%s: fault %q given twice", HeaderFault, f.kind)
		}
		fs = append(fs, f)
	}
	return fs, nil
}

func parseFault(s string, defaults FaultConfig) (fault, error) {
	name, params, hasParams := strings.Cut(s, ":")
	name = strings.TrimSpace(name)
	// "error=503" is shorthand for "error:status=503".
	if n, status, ok := strings.Cut(name, "="); ok && strings.TrimSpace(n) == faultError && !hasParams {
		name, params, hasParams = faultError, "status="+status, true
	}
	f := fault{kind: name}
	var allowed []string
	switch name {
	case faultError:
		f.status = defaults.ErrorStatus
		allowed = []string{"status"}
	case faultReset, faultMalformed, faultTruncate:
		allowed = []string{"after"}
	case faultStall:
		f.dur = defaults.StallDuration
		allowed = []string{"after", "for"}
	case faultSlowFirstToken:
		f.dur = defaults.SlowFirstTokenDelay
		allowed = []string{"delay"}
	case faultErrorEvent:
		f.status = defaults.ErrorEventStatusCode
		allowed = []string{"after", "status"}
	case faultQueueFull, faultNoDone:
	case faultModelLoad:
		f.dur = defaults.ModelLoadDelay
		if f.dur <= 0 {
			f.dur = defaultModelLoadDelay
		}
		allowed = []string{"delay"}
	case faultSSEPing:
		f.dur = defaults.SSEPingInterval
		if f.dur <= 0 {
			f.dur = time.Second
		}
		allowed = []string{"every"}
	case "":
		return fault{}, fmt.Errorf("missing fault name")
	default:
		return fault{}, fmt.Errorf("unknown fault %q (want error, reset, stall, malformed, slow_first_token, truncate, error_event, queue_full, no_done, model_load or sse_ping)", name)
	}
	if !hasParams {
		return f, nil
	}
	seen := map[string]bool{}
	for _, kv := range strings.Split(params, ",") {
		k, val, ok := strings.Cut(kv, "=")
		k, val = strings.TrimSpace(k), strings.TrimSpace(val)
		if !ok || k == "" || val == "" {
			return fault{}, fmt.Errorf("parameter %q is not key=value", kv)
		}
		if !contains(allowed, k) {
			return fault{}, fmt.Errorf("fault %s takes no parameter %q (allowed: %s)", name, k, strings.Join(allowed, ", "))
		}
		if seen[k] {
			return fault{}, fmt.Errorf("parameter %q given twice", k)
		}
		seen[k] = true
		switch k {
		case "after":
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 || n > maxFaultAfter {
				return fault{}, fmt.Errorf("after=%q: want a token count 0..%d", val, maxFaultAfter)
			}
			f.after = n
		case "status":
			n, err := strconv.Atoi(val)
			if err != nil || n < 400 || n > 599 {
				return fault{}, fmt.Errorf("status=%q: want an HTTP error status 400..599", val)
			}
			f.status = n
		case "for", "delay":
			d, err := time.ParseDuration(val)
			if err != nil || d <= 0 || d > maxFaultDuration {
				return fault{}, fmt.Errorf("%s=%q: want a duration in (0, %s]", k, val, maxFaultDuration)
			}
			f.dur = d
		case "every":
			d, err := time.ParseDuration(val)
			if err != nil || d < minPingInterval || d > maxFaultDuration {
				return fault{}, fmt.Errorf("every=%q: want a duration in [%s, %s]", val, minPingInterval, maxFaultDuration)
			}
			f.dur = d
		}
	}
	return f, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// drawFaults picks random faults from the configured rates. Every rate is
// drawn every time, in a fixed order, so a seed gives the same sequence
// whatever the rates are.
func drawFaults(c FaultConfig, outputTokens int, rng *rand.Rand) faultSet {
	hit := func(rate float64) bool { return rng.Float64() < rate }
	after := func() int { return rng.IntN(max(outputTokens, 1)) }
	var fs faultSet
	errHit := hit(c.ErrorRate)
	slowHit := hit(c.SlowFirstTokenRate)
	resetHit, resetAfter := hit(c.ResetRate), after()
	stallHit, stallAfter := hit(c.StallRate), after()
	malHit, malAfter := hit(c.MalformedRate), after()
	truncHit, truncAfter := hit(c.TruncateRate), after()
	evHit, evAfter := hit(c.ErrorEventRate), after()
	if errHit {
		// The request never reaches the engine; nothing else applies.
		return faultSet{{kind: faultError, status: c.ErrorStatus}}
	}
	if slowHit {
		fs = append(fs, fault{kind: faultSlowFirstToken, dur: c.SlowFirstTokenDelay})
	}
	if stallHit {
		fs = append(fs, fault{kind: faultStall, after: stallAfter, dur: c.StallDuration})
	}
	if malHit {
		fs = append(fs, fault{kind: faultMalformed, after: malAfter})
	}
	if resetHit {
		fs = append(fs, fault{kind: faultReset, after: resetAfter})
	}
	if truncHit {
		fs = append(fs, fault{kind: faultTruncate, after: truncAfter})
	}
	if evHit {
		fs = append(fs, fault{kind: faultErrorEvent, after: evAfter, status: c.ErrorEventStatusCode})
	}
	return fs
}

// requestOptions are per-request knobs that are not faults.
type requestOptions struct {
	roleChunk           string
	reasoningTokens     int
	tokensPerChunk      int
	separateFinishChunk bool
	// disconnectRelease overrides faults.disconnect_release (cancel.go).
	disconnectRelease slotRelease
	// prefixCache overrides prefix_cache.enabled when set.
	prefixCache *bool
}

func defaultOptions(o OutputConfig) requestOptions {
	return requestOptions{
		roleChunk:           o.RoleChunk,
		reasoningTokens:     o.ReasoningTokens,
		tokensPerChunk:      o.TokensPerChunk,
		separateFinishChunk: o.SeparateFinishChunk,
	}
}

// parseOptionsHeader applies X-Sim-Options ("key=value;key=value") over
// the defaults.
func parseOptionsHeader(v string, opts requestOptions) (requestOptions, error) {
	if len(v) > maxHeaderValueLen {
		return opts, fmt.Errorf("%s: longer than %d bytes", HeaderOptions, maxHeaderValueLen)
	}
	seen := map[string]bool{}
	for _, kv := range strings.Split(v, ";") {
		if strings.TrimSpace(kv) == "" {
			continue
		}
		k, val, ok := strings.Cut(kv, "=")
		k, val = strings.TrimSpace(k), strings.TrimSpace(val)
		if !ok || k == "" || val == "" {
			return opts, fmt.Errorf("%s: %q is not key=value", HeaderOptions, kv)
		}
		if seen[k] {
			return opts, fmt.Errorf("%s: %q given twice", HeaderOptions, k)
		}
		seen[k] = true
		switch k {
		case "role_chunk":
			m, err := parseRoleChunk(val)
			if err != nil {
				return opts, fmt.Errorf("%s: %w", HeaderOptions, err)
			}
			opts.roleChunk = m
		case "reasoning_tokens":
			n, err := strconv.Atoi(val)
			if err != nil || n < 0 || n > maxFaultAfter {
				return opts, fmt.Errorf("%s: reasoning_tokens=%q: want 0..%d", HeaderOptions, val, maxFaultAfter)
			}
			opts.reasoningTokens = n
		case "tokens_per_chunk":
			n, err := strconv.Atoi(val)
			if err != nil || n < 1 || n > maxTokensPerChunk {
				return opts, fmt.Errorf("%s: tokens_per_chunk=%q: want 1..%d", HeaderOptions, val, maxTokensPerChunk)
			}
			opts.tokensPerChunk = n
		case "separate_finish_chunk":
			b, err := strconv.ParseBool(val)
			if err != nil {
				return opts, fmt.Errorf("%s: separate_finish_chunk=%q: want true or false", HeaderOptions, val)
			}
			opts.separateFinishChunk = b
		case optDisconnectRelease:
			r, err := parseSlotRelease(val)
			if err != nil {
				return opts, fmt.Errorf("%s: %w", HeaderOptions, err)
			}
			opts.disconnectRelease = r
		case "prefix_cache":
			b, err := parsePrefixCacheOption(val)
			if err != nil {
				return opts, err
			}
			opts.prefixCache = b
		default:
			return opts, fmt.Errorf("%s: unknown option %q (want role_chunk, reasoning_tokens, tokens_per_chunk, separate_finish_chunk, disconnect_release or prefix_cache)", HeaderOptions, k)
		}
	}
	return opts, nil
}

// parseRoleChunk accepts the three modes, and true/false for immediate/off.
func parseRoleChunk(v string) (string, error) {
	switch v {
	case RoleChunkImmediate, "true":
		return RoleChunkImmediate, nil
	case RoleChunkWithFirstToken:
		return RoleChunkWithFirstToken, nil
	case RoleChunkOff, "false":
		return RoleChunkOff, nil
	}
	return "", fmt.Errorf("role_chunk %q: want immediate, with_first_token or off", v)
}
