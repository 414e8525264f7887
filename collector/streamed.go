package collector

import "github.com/llm-prober/llm-prober/probe"

// streamed reports whether r's answer arrived as a stream, the only case in
// which TTFT, TPOT and ITL mean anything. probe.Result has no Streamed field
// yet; until it does, a first-token time is the best available evidence.
func streamed(r *probe.Result) bool {
	return r.TTFT > 0
}
