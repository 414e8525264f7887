package collector

import "github.com/llm-prober/llm-prober/probe"

// streamed reports whether r's answer arrived as a stream, the only case in
// which TTFT, TPOT and ITL mean anything: a non-streamed answer's "first
// token" arrives with its last.
func streamed(r *probe.Result) bool {
	return r.Streamed
}
