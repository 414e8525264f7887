package probe

import (
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/llm-prober/llm-prober/internal/stats"
)

// WriteReport prints the human-readable breakdown of one probe, as the
// `llm-prober probe` subcommand shows it: outcome first, then where the time
// went (phases, TTFT, TPOT, ITL percentiles, end-to-end), then tokens.
func WriteReport(w io.Writer, target, probeName string, r *Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	line := func(label, format string, args ...any) {
		fmt.Fprintf(tw, "%s\t%s\n", label, fmt.Sprintf(format, args...))
	}
	if r == nil {
		line("target", "%s", targetProbe(target, probeName))
		line("outcome", "no result")
		return tw.Flush()
	}
	line("target", "%s", targetProbe(target, probeName))
	if r.Err != nil {
		line("outcome", "%s: %v", r.Outcome, r.Err)
	} else {
		line("outcome", "%s", r.Outcome)
	}
	line("request id", "%s", orNone(r.RequestID))
	if r.StatusCode != 0 {
		line("status", "%d", r.StatusCode)
	} else {
		line("status", "none")
	}
	p := r.Phases
	conn := "new connection"
	if p.ConnectionReused {
		conn = "reused connection (no dns/connect/tls)"
	}
	line("connection", "%s", conn)
	if rt := r.Retry; rt != nil {
		line("  retried", "the first attempt's pooled connection failed before any answer (%s: %s); sent again on a new connection, and every time below is that attempt's", rt.Reason, orNone(rt.ErrText()))
	}
	line("  dns", "%s", phase(p.DNS, p.HasDNS))
	line("  connect", "%s", phase(p.Connect, p.HasConnect))
	line("  tls", "%s", phase(p.TLS, p.HasTLS))
	line("  write", "%s", phase(p.Write, p.HasWrite))
	line("  first byte", "%s", phase(p.FirstByte, p.HasFirstByte))

	switch {
	case !r.Streamed:
		line("ttft", "n/a (not streamed)")
	case r.TTFT > 0:
		line("ttft", "%s", ms(r.TTFT))
	default:
		line("ttft", "none (no output arrived)")
	}
	if tpot, ok := r.TPOT(); ok {
		line("tpot", "%s", ms(tpot))
	} else {
		line("tpot", "n/a (needs a streamed answer of 2+ tokens)")
	}
	var itl []time.Duration
	r.InterTokenLatencies(func(d time.Duration) { itl = append(itl, d) })
	if len(itl) > 0 {
		slices.Sort(itl)
		line("itl", "p50 %s  p95 %s  max %s  (%d gaps over %d chunks)",
			ms(stats.Percentile(itl, 0.50)), ms(stats.Percentile(itl, 0.95)), ms(itl[len(itl)-1]), len(itl), len(r.Chunks))
	} else {
		line("itl", "n/a")
	}
	if r.EndToEnd > 0 {
		line("end-to-end", "%s", ms(r.EndToEnd))
	} else {
		line("end-to-end", "n/a")
	}
	if tps, ok := r.OutputTokensPerSecond(); ok {
		line("output tokens/s", "%.1f", tps)
	} else {
		line("output tokens/s", "n/a")
	}
	line("input tokens", "%s", tokens(r.InputTokens, r.InputTokensSource))
	if r.HasCachedInputTokens {
		line("  cached", "%d (server's prefix cache, usage prompt_tokens_details)", r.CachedInputTokens)
	}
	line("output tokens", "%s", tokens(r.OutputTokens, r.OutputTokensSource))
	if len(r.UsageInvalid) > 0 {
		line("  dropped", "%s: the server's count was implausible for what arrived (docs/metrics.md 1.1)", strings.Join(r.UsageInvalid, ", "))
	}
	line("finish reason", "%s", orNone(r.FinishReason))
	writePooled(line, r)
	writeServerLoad(line, r.ServerLoad)
	writeServerTimings(line, r)
	writeAnswerReport(line, r)
	writeCancelReport(line, r)
	return tw.Flush()
}

// writeServerLoad prints the load report the server sent with the answer,
// or why it could not be used.
func writeServerLoad(line func(label, format string, args ...any), l *ServerLoad) {
	if l == nil {
		return
	}
	line("server load", "%s", ServerLoadSummary(l))
	if l.Err != nil {
		line("  dropped", "%v", l.Err)
	}
}

// ServerLoadSummary is a load report in one line, as the probe report,
// the status page and /probe?debug=true show it, e.g. "waiting 3,
// kv cache 42.0% (the server's, at this request)".
func ServerLoadSummary(l *ServerLoad) string {
	if !l.Present() {
		return "none usable"
	}
	var parts []string
	if l.HasWaiting {
		parts = append(parts, "waiting "+strconv.FormatFloat(l.Waiting, 'f', -1, 64))
	}
	if l.HasRunning {
		parts = append(parts, "running "+strconv.FormatFloat(l.Running, 'f', -1, 64))
	}
	if l.HasKVCache {
		parts = append(parts, fmt.Sprintf("kv cache %.1f%%", 100*l.KVCacheUsage))
	}
	return strings.Join(parts, ", ") + " (the server's, at this request)"
}

// writeServerTimings prints the server's own account beside the client's
// view of the same stretch: its total next to the end-to-end latency (the
// difference is network, HTTP and client time the server cannot see), its
// prompt clock next to TTFT, its decode clock next to the client's time
// from the first token to the end, its time per token next to TPOT (which
// divides by one token fewer: docs/metrics.md).
func writeServerTimings(line func(label, format string, args ...any), r *Result) {
	if len(r.ServerTimings) == 0 && r.ServerTimingsInvalid == 0 {
		return
	}
	line("server timings", "as reported by the server, beside the client's view")
	ttft := r.Streamed && r.TTFT > 0
	tpot, hasTPOT := r.TPOT()
	for _, st := range r.ServerTimings {
		switch {
		case st.Name == "total" && r.EndToEnd > 0:
			line("  "+st.Name, "%s  (client end-to-end %s, %s outside the server)",
				ms(st.Duration), ms(r.EndToEnd), ms(r.EndToEnd-st.Duration))
		case (st.Name == "prompt" || st.Name == "prompt_eval") && ttft:
			line("  "+st.Name, "%s  (client TTFT %s, %s outside the server's prompt clock)",
				ms(st.Duration), ms(r.TTFT), ms(r.TTFT-st.Duration))
		case (st.Name == "predicted" || st.Name == "eval") && ttft && r.EndToEnd >= r.TTFT:
			line("  "+st.Name, "%s  (client end-to-end − TTFT %s)", ms(st.Duration), ms(r.EndToEnd-r.TTFT))
		case st.Name == "predicted_per_token" && hasTPOT:
			line("  "+st.Name, "%s  (client TPOT %s; the server divides by %d tokens, TPOT by %d)",
				ms(st.Duration), ms(tpot), r.OutputTokens, r.OutputTokens-1)
		default:
			line("  "+st.Name, "%s", ms(st.Duration))
		}
	}
	if r.ServerTimingsInvalid > 0 {
		line("  invalid", "%d more the server sent could not be used (missing, null, not a number, negative or over an hour)", r.ServerTimingsInvalid)
	}
}

func targetProbe(target, probeName string) string {
	if probeName == "" {
		return target
	}
	return target + " / " + probeName
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func phase(d time.Duration, ok bool) string {
	if !ok {
		return "-"
	}
	return ms(d)
}

// ms prints a duration in milliseconds with precision that suits its size.
func ms(d time.Duration) string { return stats.Millis(d) + " ms" }

func tokens(n int, src TokenSource) string {
	if src == TokenSourceNone {
		return "unknown"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d (%s)", n, src)
	return b.String()
}

// writePooled says what an embedding or rerank answer held: what the
// checks behind wrong_answer saw.
func writePooled(line func(label, format string, args ...any), r *Result) {
	switch a := r.Pooled; {
	case a == nil:
	case a.Dimension > 0:
		line("answer", "%d %s of dimension %d", a.Items, plural(a.Items, "vector"), a.Dimension)
	default:
		line("answer", "%d rerank %s, document %d first", a.Items, plural(a.Items, "result"), a.Top)
	}
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}
