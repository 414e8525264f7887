package simulator

import (
	"hash/fnv"
	"math/rand/v2"
	"strings"
	"unicode"
)

// vocabulary gives deterministic output text: one word per token, each
// followed by a space, so a client counting words sees the token count.
var vocabulary = [...]string{
	"the", "model", "token", "stream", "latency", "server", "request", "queue",
	"batch", "cache", "prefill", "decode", "answer", "simple", "quick", "steady",
	"river", "mountain", "window", "garden", "signal", "metric", "probe", "sample",
	"bright", "quiet", "green", "blue", "orange", "silver", "small", "large",
	"runs", "waits", "sends", "reads", "writes", "counts", "moves", "holds",
	"and", "of", "to", "in", "on", "with", "for", "from",
	"alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "lambda",
	"north", "south", "east", "west", "early", "later", "often", "never",
}

// countWords approximates tokens as whitespace-separated words.
func countWords(s string) int {
	return len(strings.FieldsFunc(s, unicode.IsSpace))
}

// textRNG gives the generator of a request's words. A request carrying a
// seed gets the same text whatever order it arrives in, as vLLM's seed
// promises; otherwise text follows the server's request sequence.
func textRNG(serverSeed int64, reqSeed *int64, prompt string, seq uint64) *rand.Rand {
	if reqSeed != nil {
		h := fnv.New64a()
		h.Write([]byte(prompt))
		return rand.New(rand.NewPCG(uint64(serverSeed)^uint64(*reqSeed)*0x9e3779b97f4a7c15, h.Sum64()))
	}
	return rand.New(rand.NewPCG(uint64(serverSeed), seq*0x9e3779b97f4a7c15+1))
}

// sequenceRNG drives timing jitter and random faults of the seq-th request.
func sequenceRNG(serverSeed int64, seq uint64) *rand.Rand {
	return rand.New(rand.NewPCG(uint64(serverSeed)^0x5851f42d4c957f2d, seq))
}

// words returns n tokens of text.
func words(rng *rand.Rand, n int) string {
	var b strings.Builder
	for range n {
		b.WriteString(vocabulary[rng.IntN(len(vocabulary))])
		b.WriteByte(' ')
	}
	return b.String()
}
